"""Keyset walks keyed by every orderable type, under two daemons at once and a kill -9.

Four tables, one per key: a ``uuid``; a MariaDB ``bigint unsigned`` with keys on both
sides of 2^63; a ``numeric`` with fractions; a composite (text, timestamptz) whose text
sorts by the database's collation, not Python's. Two ``sluice run --until-drained``
processes share one PostgreSQL ledger; one is killed -9 (its whole process group) once
batches are done, and run again. Every row must be in the target once, every value as
it was, judged by the databases' own texts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.chaos.procs import SLUICE, Proc, base_env
from tests.conftest import DatabaseFactory

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.mariadb,
              pytest.mark.timeout(420)]  # fmt: skip

ROWS = 1_500
PG_TABLES = {
    "by_uuid": (
        "CREATE TABLE by_uuid (id uuid PRIMARY KEY, note text)",
        f"INSERT INTO by_uuid SELECT gen_random_uuid(), 'n' || i FROM generate_series(1, {ROWS}) i",
        ["id"],
    ),
    "by_numeric": (
        "CREATE TABLE by_numeric (id numeric PRIMARY KEY, note text)",
        f"INSERT INTO by_numeric SELECT i / 7.0, 'n' || i FROM generate_series(-{ROWS // 2}, "
        f"{ROWS - ROWS // 2 - 1}) i",
        ["id"],
    ),
    "by_text_time": (
        "CREATE TABLE by_text_time (name text, at timestamptz, note text, "
        "PRIMARY KEY (name, at))",
        # 'a' < 'B' under most collations, while Python sorts 'B' first.
        f"INSERT INTO by_text_time SELECT (ARRAY['a', 'B', 'c', 'É'])[1 + i % 4] || (i % 37), "
        f"timestamptz '2024-01-01 00:00:00.000001+00' + i * interval '1.000001 second', "
        f"'n' || i FROM generate_series(1, {ROWS}) i",
        ["name", "at"],
    ),
}


def _execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement.replace("%", "%%"))
    engine.dispose()


def _texts(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TimeZone = 'UTC'")
        rows = sorted(tuple(r) for r in conn.exec_driver_sql(sql))
    engine.dispose()
    return rows


def _done_batches(ledger: str) -> int:
    engine = sa.create_engine(ledger)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(
                "SELECT count(*) FROM sluice_batches WHERE state = 'done'").scalar_one())
    except sa.exc.DBAPIError:
        return 0  # no tables yet
    finally:
        engine.dispose()


def test_keys_of_every_orderable_type_survive_two_daemons_and_a_kill(
    tmp_path: Path, pg_factory: DatabaseFactory, mariadb_factory: DatabaseFactory
) -> None:
    shop, legacy = pg_factory.create("keys_src"), mariadb_factory.create("keys_legacy")
    target, ledger = pg_factory.create("keys_dst"), pg_factory.create("keys_ledger")
    for ddl, insert, _ in PG_TABLES.values():
        _execute(shop, ddl, insert)
    _execute(legacy, "CREATE TABLE by_unsigned (id bigint unsigned PRIMARY KEY, note text)",
             f"INSERT INTO by_unsigned SELECT 9223372036854775808 + seq - {ROWS // 2}, "
             f"CONCAT('n', seq) FROM seq_1_to_{ROWS}")  # fmt: skip
    sources = "".join(
        f"  {name}: {{kind: sql, url: '{shop}', table: {name}, key: {key}, "
        f"target: wh.{name}}}\n"
        for name, (_, _, key) in PG_TABLES.items()
    ) + f"  by_unsigned: {{kind: sql, url: '{legacy}', table: by_unsigned, key: id, " \
        "target: wh.by_unsigned}\n"
    config = tmp_path / "sluice.yaml"
    config.write_text(f"""
ledger: '{ledger}'
sources:
{sources}targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 200, max_wait: 100ms}}
lease: {{ttl: 10s}}
spark: {{master: "local[1]", max_concurrent_imports: 1}}
""")  # fmt: skip
    args = [SLUICE, "run", str(config), "--until-drained"]
    a = Proc(args, base_env(), tmp_path / "a.log")
    b = Proc(args, base_env(), tmp_path / "b.log")
    deadline = time.monotonic() + 180
    while _done_batches(ledger) < 4 and a.poll() is None:
        assert time.monotonic() < deadline, a.tail()
        time.sleep(0.2)  # another process's progress: nothing to wait on but time
    a.kill()
    again = Proc(args, base_env(), tmp_path / "a2.log")
    for proc in (b, again):
        code = proc.wait(300)
        assert code == 0, proc.tail()

    for name, (_, _, key) in PG_TABLES.items():
        listed = ", ".join(f"{c}::text" for c in [*key, "note"])
        source_rows = _texts(shop, f"SELECT {listed} FROM {name}")
        assert len(source_rows) == ROWS
        assert _texts(target, f"SELECT {listed} FROM {name}") == source_rows, name
    unsigned = _texts(legacy, "SELECT CAST(id AS CHAR), note FROM by_unsigned")
    keys = [int(k) for k, _ in unsigned]
    assert min(keys) < 2**63 <= max(keys) and len(keys) == ROWS
    assert _texts(target, "SELECT id::text, note FROM by_unsigned") == unsigned
