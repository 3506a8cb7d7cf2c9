"""The peers benchmark's data: one orders table, seeded alike in PostgreSQL and MariaDB,
and a row-by-row check of a copy against its source.

The table is what a migration meets: a sparse bigint key, a short text, ~200
bytes of unicode text with quotes (NULL in some rows, empty in others), a
signed numeric(12,2) with NULLs, a timestamp with microseconds and a text
with NULLs. Each database seeds it in one statement, server side.

The check hashes each row's canonical text (every column as text, a NULL
marker, timestamps in UTC with microseconds) in the database that holds it,
and compares the count and the sum of the hashes: a row missing, doubled or
changed in any column shows. On a mismatch the rows that differ are listed.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

COLUMNS = ("id", "customer", "note", "amount", "placed_at", "tag")

PG_TABLE = """CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, note text,
    amount numeric(12,2), placed_at timestamptz, tag text)"""
MARIADB_TABLE = """CREATE TABLE orders (id bigint PRIMARY KEY, customer varchar(40) NOT NULL,
    note text, amount decimal(12,2), placed_at datetime(6), tag varchar(20))
    CHARACTER SET utf8mb4"""

_NOTE = "ünïcødé \"q\", 日本語 'x' "  # 32 characters, 44 bytes


def seed(engine: sa.Engine, rows: int) -> None:
    """Create and fill ``orders`` with ``rows`` rows (PostgreSQL or MariaDB)."""
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS orders"))
        conn.execute(sa.text(PG_TABLE if pg else MARIADB_TABLE))
        if pg:
            conn.execute(
                sa.text(
                    "INSERT INTO orders SELECT i * 7 + i % 3, 'customer-' || (i % 9973), "
                    "CASE WHEN i % 11 = 0 THEN NULL WHEN i % 13 = 0 THEN '' "
                    "ELSE repeat(:note, 5) || i END, "
                    "CASE WHEN i % 17 = 0 THEN NULL ELSE (i % 100000 - 30000) / 100.0 END, "
                    "timestamptz '2024-01-01 00:00:00+00' + i * interval '1.000321 second', "
                    "CASE WHEN i % 5 = 0 THEN NULL ELSE 'tag' || (i % 17) END "
                    "FROM generate_series(1, :n) AS i"
                ),
                {"n": rows, "note": _NOTE},
            )
        else:
            conn.execute(
                sa.text(
                    "INSERT INTO orders SELECT seq * 7 + seq % 3, "
                    "CONCAT('customer-', seq % 9973), "
                    "CASE WHEN seq % 11 = 0 THEN NULL WHEN seq % 13 = 0 THEN '' "
                    "ELSE CONCAT(REPEAT(:note, 5), seq) END, "
                    "CASE WHEN seq % 17 = 0 THEN NULL "
                    "ELSE (CAST(seq % 100000 AS SIGNED) - 30000) / 100.0 END, "
                    "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 1000321 MICROSECOND, "
                    "CASE WHEN seq % 5 = 0 THEN NULL ELSE CONCAT('tag', seq % 17) END "
                    f"FROM seq_1_to_{int(rows)}"
                ),
                {"note": _NOTE},
            )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # What autovacuum or ANALYZE would soon do to a table after a bulk load.
        conn.execute(sa.text("VACUUM (ANALYZE) orders" if pg else "ANALYZE TABLE orders"))


def seeded_rows(engine: sa.Engine) -> int | None:
    """Rows of an existing ``orders`` table, or None when there is none."""
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM orders")).scalar_one())
    except sa.exc.DBAPIError:
        return None


def _pg_row_text(engine: sa.Engine, schema: str) -> str:
    """A PostgreSQL expression of an ``orders`` row as canonical text (types as found)."""
    with engine.connect() as conn:
        types = dict(
            conn.execute(
                sa.text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = :s AND table_name = 'orders'"
                ),
                {"s": schema},
            ).all()
        )
    missing = [c for c in COLUMNS if c not in types]
    if missing:
        raise SystemExit(f"{engine.url.database}.{schema}.orders lacks columns {missing}")
    parts = []
    for column in COLUMNS:
        value = f'"{column}"'
        if types[column] == "timestamp with time zone":
            value = f"to_char({value} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
        elif types[column] == "timestamp without time zone":
            value = f"to_char({value}, 'YYYY-MM-DD HH24:MI:SS.US')"
        parts.append(f"coalesce({value}::text, '\\N')")
    return "concat_ws(chr(31), " + ", ".join(parts) + ")"


def _mariadb_row_text() -> str:
    parts = [
        "CAST(id AS CHAR)", "customer", "note", "CAST(amount AS CHAR)",
        "DATE_FORMAT(placed_at, '%Y-%m-%d %H:%i:%s.%f')", "tag",
    ]  # fmt: skip
    return "CONCAT_WS(CHAR(31), " + ", ".join(f"COALESCE({p}, '\\\\N')" for p in parts) + ")"


def _row_text(engine: sa.Engine, schema: str | None) -> tuple[str, str]:
    if engine.dialect.name == "postgresql":
        schema = schema or "public"
        return _pg_row_text(engine, schema), f'"{schema}".orders'
    return _mariadb_row_text(), "orders"


def fingerprint(engine: sa.Engine, schema: str | None = None) -> tuple[int, int]:
    """(rows, sum of a 60-bit hash of each row's canonical text) of ``orders``."""
    text, table = _row_text(engine, schema)
    if engine.dialect.name == "postgresql":
        hashed = f"('x' || substr(md5({text}), 1, 15))::bit(60)::bigint"
    else:
        hashed = f"CAST(CONV(SUBSTR(MD5({text}), 1, 15), 16, 10) AS UNSIGNED)"
    with engine.connect() as conn:
        count, total = conn.execute(sa.text(f"SELECT count(*), sum({hashed}) FROM {table}")).one()
    return int(count), int(total or 0)


def differences(
    source: sa.Engine, target: sa.Engine, schema: str | None = None, limit: int = 5
) -> list[str]:
    """Up to ``limit`` keys whose rows differ, are missing or are extra, with both texts."""
    found: dict[Any, dict[str, str]] = {}
    for side, engine, where in (("source", source, None), ("target", target, schema)):
        text, table = _row_text(engine, where)
        with engine.connect() as conn:
            for key, row in conn.execute(sa.text(f"SELECT id, {text} FROM {table}")):
                found.setdefault(int(key), {})[side] = row
    different = sorted(k for k, v in found.items() if v.get("source") != v.get("target"))
    return [
        f"id {k}: source {found[k].get('source')!r} target {found[k].get('target')!r}"
        for k in different[:limit]
    ] + ([f"... {len(different)} keys differ in all"] if len(different) > limit else [])


def check_copy(source: sa.Engine, expected: tuple[int, int], target: sa.Engine,
               schema: str | None, label: str) -> None:
    """Stop the benchmark unless the target's ``orders`` equals the source row by row."""
    got = fingerprint(target, schema)
    if got != expected:
        detail = "\n  ".join(differences(source, target, schema))
        raise SystemExit(
            f"{label}: the copy differs from its source ({got[0]:,} rows vs {expected[0]:,}):"
            f"\n  {detail}"
        )
