"""A whole database for the whole-database tests: 14 tables with foreign keys.

Composite keys (``stock``, ``order_lines``, ``shipment_items``, the latter
with a composite foreign key), a self-reference (``employees``), a table
without a primary key (``notes``: migrated through an override of its key),
and one that a pattern leaves out (``audit_log``). The same DDL, in
PostgreSQL or MariaDB words, makes the source (with rows) and the target
(empty, foreign keys enforced).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

TABLES = [
    "regions", "customers", "suppliers", "products", "warehouses", "stock", "orders",
    "order_lines", "payments", "shipments", "shipment_items", "employees", "notes",
]  # fmt: skip
"""The tables migrated (``audit_log`` is excluded by pattern), parents before children."""


def ddl(dialect: str, target: bool = False) -> list[str]:
    """The schema's statements for ``postgresql`` or ``mysql``, parents first.

    In a ``target``, ``notes`` has the key the source's lacks (the one the
    config's override names): sluice upserts by it.
    """
    pg = dialect == "postgresql"
    stamp = "timestamptz" if pg else "datetime(6)"
    blob = "bytea" if pg else "blob"
    return [
        "CREATE TABLE regions (code varchar(8) PRIMARY KEY, name varchar(80) NOT NULL)",
        f"CREATE TABLE customers (id integer PRIMARY KEY, region_code varchar(8) NOT NULL "
        f"REFERENCES regions (code), name varchar(100), created_at {stamp})",
        "CREATE TABLE suppliers (id integer PRIMARY KEY, name varchar(100) NOT NULL)",
        f"CREATE TABLE products (id integer PRIMARY KEY, supplier_id integer REFERENCES "
        f"suppliers (id), price numeric(10, 2), label {blob})",
        "CREATE TABLE warehouses (id integer PRIMARY KEY, region_code varchar(8) NOT NULL "
        "REFERENCES regions (code))",
        "CREATE TABLE stock (warehouse_id integer NOT NULL REFERENCES warehouses (id), "
        "product_id integer NOT NULL REFERENCES products (id), qty integer NOT NULL, "
        "PRIMARY KEY (warehouse_id, product_id))",
        f"CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer NOT NULL "
        f"REFERENCES customers (id), placed_at {stamp} NOT NULL, note text)",
        "CREATE TABLE order_lines (order_id integer NOT NULL REFERENCES orders (id), "
        "line_no integer NOT NULL, product_id integer NOT NULL REFERENCES products (id), "
        "qty integer NOT NULL, PRIMARY KEY (order_id, line_no))",
        "CREATE TABLE payments (id integer PRIMARY KEY, order_id integer NOT NULL "
        "REFERENCES orders (id), amount numeric(12, 2) NOT NULL)",
        "CREATE TABLE shipments (id integer PRIMARY KEY, order_id integer NOT NULL "
        "REFERENCES orders (id), warehouse_id integer NOT NULL REFERENCES warehouses (id))",
        "CREATE TABLE shipment_items (shipment_id integer NOT NULL REFERENCES shipments (id), "
        "order_id integer NOT NULL, line_no integer NOT NULL, "
        "PRIMARY KEY (shipment_id, order_id, line_no), "
        "FOREIGN KEY (order_id, line_no) REFERENCES order_lines (order_id, line_no))",
        "CREATE TABLE employees (id integer PRIMARY KEY, manager_id integer REFERENCES "
        "employees (id), region_code varchar(8) REFERENCES regions (code), name varchar(80))",
        "CREATE TABLE notes (customer_id integer NOT NULL REFERENCES customers (id), "
        "seq integer NOT NULL, body text"
        + (", PRIMARY KEY (customer_id, seq))" if target else ")"),
        f"CREATE TABLE audit_log (id integer PRIMARY KEY, happened_at {stamp}, what text)",
    ]


def create_schema(url: str, target: bool = False) -> None:
    """The 14 tables, empty, at ``url`` (a ``target``'s ``notes`` with a key)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in ddl(engine.dialect.name, target):
            conn.execute(sa.text(statement))
    engine.dispose()


def seed(url: str, scale: int = 1, seed_: int = 7) -> dict[str, int]:
    """Create the schema at ``url`` and fill it; returns the rows of each table."""
    create_schema(url)
    rng = random.Random(seed_)
    t0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
    n = 40 * scale
    rows: dict[str, list[dict[str, object]]] = {
        "regions": [{"code": c, "name": f"Région {c} ✓"} for c in ("eu", "us", "apac", "latam")],
        "suppliers": [{"id": i, "name": f"supplier {i}"} for i in range(1, 9)],
        "audit_log": [{"id": i, "happened_at": t0, "what": "x"} for i in range(1, 6)],
    }
    codes = [r["code"] for r in rows["regions"]]
    rows["customers"] = [
        {"id": i, "region_code": rng.choice(codes),
         "name": None if i % 7 == 0 else f"Kunde Nº{i} — ☃",
         "created_at": None if i % 5 == 0 else t0 + dt.timedelta(seconds=i * 3601.25)}
        for i in range(1, n + 1)
    ]  # fmt: skip
    rows["products"] = [
        {"id": i, "supplier_id": None if i % 9 == 0 else rng.randint(1, 8),
         "price": Decimal(rng.randint(100, 99999)) / 100,
         "label": None if i % 4 == 0 else bytes([i % 256, 0, 255, 10])}
        for i in range(1, 31)
    ]  # fmt: skip
    rows["warehouses"] = [{"id": i, "region_code": codes[i % 4]} for i in range(1, 6)]
    rows["stock"] = [
        {"warehouse_id": w, "product_id": p, "qty": rng.randint(0, 500)}
        for w in range(1, 6) for p in range(1, 31) if (w + p) % 3
    ]  # fmt: skip
    rows["orders"] = [
        {"id": i, "customer_id": rng.randint(1, n),
         "placed_at": t0 + dt.timedelta(minutes=i * 17), "note": None if i % 3 else "eilig ⚡"}
        for i in range(1, 3 * n + 1)
    ]  # fmt: skip
    rows["order_lines"] = [
        {"order_id": o, "line_no": line, "product_id": rng.randint(1, 30), "qty": line}
        for o in range(1, 3 * n + 1) for line in range(1, 1 + o % 4)
    ]  # fmt: skip
    rows["payments"] = [
        {"id": i, "order_id": rng.randint(1, 3 * n), "amount": Decimal(rng.randint(1, 10**6)) / 100}
        for i in range(1, 2 * n + 1)
    ]  # fmt: skip
    shipped = [line for line in rows["order_lines"] if line["line_no"] == 1]
    rows["shipments"] = [
        {"id": i, "order_id": line["order_id"], "warehouse_id": 1 + i % 5}
        for i, line in enumerate(shipped, start=1)
    ]  # fmt: skip
    rows["shipment_items"] = [
        {"shipment_id": i, "order_id": line["order_id"], "line_no": 1}
        for i, line in enumerate(shipped, start=1)
    ]  # fmt: skip
    rows["employees"] = [
        {"id": i, "manager_id": None if i == 1 else rng.randint(1, i - 1),
         "region_code": codes[i % 4], "name": f"employee {i}"}
        for i in range(1, 21)
    ]  # fmt: skip
    rows["notes"] = [
        {"customer_id": c, "seq": s, "body": f"note {s} for {c}"}
        for c in range(1, n + 1, 3) for s in (1, 2)
    ]  # fmt: skip
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        for table in [*TABLES, "audit_log"]:
            conn.execute(meta.tables[table].insert(), rows[table])
    engine.dispose()
    return {table: len(rows[table]) for table in rows}


def shop_config(source: str, target: str, dialect: str) -> str:
    """A hand-written config migrating the whole schema (but ``audit_log``), parents first."""
    schema = "public." if dialect == "postgresql" else ""
    return f"""
ledger: sqlite:///ledger.db
sources:
  shop:
    kind: sql
    url: '{source}'
    tables: ["{schema}*", "!{schema}audit_*"]
    order: foreign_keys
    target: wh
    overrides: {{notes: {{key: [customer_id, seq]}}}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100, max_wait: 50ms}}
"""


def rows_of(url: str, table: str) -> list[tuple[str, ...]]:
    """Every row of ``table`` as text, sorted (the target's own types, normalised)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        result = conn.execute(
            sa.select(sa.table(table, *[sa.column(c) for c in _columns(engine, table)]))
        )
        rows = sorted(tuple(_text(v) for v in row) for row in result)
    engine.dispose()
    return rows


def _columns(engine: sa.Engine, table: str) -> list[str]:
    return sorted(c["name"] for c in sa.inspect(engine).get_columns(table))


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if hasattr(value, "astimezone") and getattr(value, "tzinfo", None) is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return str(value)
