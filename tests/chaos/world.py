"""The sources every scenario migrates, seeded once per test session.

- ``orders`` in PostgreSQL, walked by key (keyset);
- ``customers`` in MariaDB, swept with ``where: status = 'active'`` (the
  rows stay visible; ``status`` never changes, and the closed rows must not
  reach the target);
- ``events``: SQS message bodies, 10% of them sent twice and 1% poison; each
  scenario sends them to a queue of its own (a queue is consumed).

Sluice only reads the SQL sources, so all scenarios share them. Sizes come
from ``CHAOS``: unset (``make test``) the short form, ``CHAOS=long``
(``make chaos``) the long form.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from tests.helpers import run_sql, seed_orders


@dataclass(frozen=True)
class Sizes:
    """How much data a scenario moves, and how many random kills it survives."""

    orders: int
    customers: int
    events: int
    kills: int
    label: str


SHORT = Sizes(orders=20_000, customers=5_000, events=300, kills=1, label="short")
LONG = Sizes(orders=200_000, customers=50_000, events=1_000, kills=10, label="long")


def sizes() -> Sizes:
    """The long form under ``CHAOS=long``, else the short form."""
    return LONG if os.environ.get("CHAOS", "").lower() == "long" else SHORT


@dataclass
class World:
    """The seeded SQL sources and the SQS bodies to send, with what the target must hold."""

    sizes: Sizes
    shop_url: str  # PostgreSQL, table orders
    legacy_url: str  # MariaDB, table customers
    bodies: list[str] = field(default_factory=list)  # in sending order
    poison: set[str] = field(default_factory=set)
    events: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> record
    active_customers: int = 0


def build_world(shop_url: str, legacy_url: str, size: Sizes) -> World:
    """Seed ``orders`` and ``customers`` and make the SQS bodies."""
    seed_orders(shop_url, size.orders)
    # Statistics now, as a production table has them: the long form's orders (200,000 rows)
    # are then loaded without their primary key, which follows their first pass
    # (spark_jobs/load/late_keys.py), through every kill and race of the scenarios.
    run_sql(shop_url, "ANALYZE orders")
    world = World(size, shop_url, legacy_url)
    world.active_customers = seed_customers(legacy_url, size.customers)
    world.bodies, world.poison, world.events = make_events(size.events)
    return world


def seed_customers(url: str, active: int) -> int:
    """``active`` rows with status 'active', one closed row after every tenth; returns ``active``.

    Types a migration can get wrong: a TINYINT holding 0..3 (a number; a
    TINYINT(1) is a boolean to the catalogue), DECIMAL, DATETIME, NULLs, quotes
    and non-ASCII text.
    """
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    from sqlalchemy.dialects import mysql

    table = sa.Table(
        "customers",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("balance", sa.Numeric(12, 3), nullable=True),
        sa.Column("tier", mysql.TINYINT(), nullable=False),
        sa.Column("joined", sa.DateTime, nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        mysql_charset="utf8mb4",
    )
    meta.create_all(engine)
    base = dt.datetime(2023, 1, 2, 3, 4, 5)
    rows = []
    key = 0
    for i in range(1, active + 1):
        for status in ("active", "closed") if i % 10 == 0 else ("active",):
            key += 2
            rows.append(
                {
                    "id": key,
                    "name": f"Kunde {i} d'Été «{i % 13}»",
                    "status": status,
                    "balance": None if i % 11 == 0 else decimal.Decimal(i * 7 % 100_000) / 8,
                    "tier": i % 4,
                    "joined": None if i % 19 == 0 else base + dt.timedelta(minutes=13 * i),
                    "note": None if i % 3 else f"line one\nline two {i}",
                }
            )
    with engine.begin() as conn:
        for start in range(0, len(rows), 5_000):
            conn.execute(table.insert(), rows[start : start + 5_000])
    engine.dispose()
    return active


def make_events(count: int) -> tuple[list[str], set[str], dict[int, dict[str, Any]]]:
    """``count`` events, the first 10% sent again at the end, 1% poison spread among them.

    Every body has every field (a field missing from a whole batch is a
    separate question: see tests/test_bad_input.py).
    """
    records = {
        i: {
            "id": i,
            "kind": ("view", "click", "buy")[i % 3],
            "score": i / 8,
            "count": i % 7,
            "ok": i % 2 == 0,
            "meta": {"n": i, "tags": ["a", "ü"][: i % 3]},
            "text": f"event {i} 'quoted' ü",
        }
        for i in range(1, count + 1)
    }
    bodies = [json.dumps(r, ensure_ascii=False) for r in records.values()]
    bodies += bodies[: count // 10]  # sent twice
    poison = [
        f"not json {n}" if n % 2 else json.dumps({"no_id": n}) for n in range(max(1, count // 100))
    ]
    step = len(bodies) // len(poison)
    for n, body in enumerate(poison):
        bodies.insert(n * step + step // 2, body)
    return bodies, set(poison), records
