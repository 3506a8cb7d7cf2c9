"""The type matrix through a change stream: every value read from the slot and applied.

The matrix table (:mod:`tests.type_matrix`) is loaded by a ``mode: stream``
source, then every row is deleted and inserted again in one transaction: the
second run takes each value from the slot (``pgoutput``'s text), not from a
chunk. The source database prints dates, intervals and times in forms of its
own (``DateStyle``, ``IntervalStyle``, ``TimeZone``); both sides are compared
in one fixed set of forms, value by value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.commands.streams import drop_streams
from spark_jobs.engines.postgresql.read import pin
from tests.helpers import drain, write_config
from tests.type_matrix import (
    MARIADB_SESSION,
    MARIADB_TO_PG,
    MARIADB_TYPES,
    PG_CANONICAL,
    PG_TYPES,
    column_name,
    compare,
    mariadb_create_source,
    mariadb_texts,
    pg_create_source,
    pg_texts,
)

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def _texts(url: str, columns: list[str]) -> dict[Any, tuple[Any, ...]]:
    """Every row's columns as PostgreSQL prints them in the keyset read's settings."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            pin(conn)
            listed = ", ".join(f"{c}::text" for c in columns)
            rows = conn.execute(sa.text(f"SELECT id, {listed} FROM matrix ORDER BY id"))
            return {row[0]: tuple(row[1:]) for row in rows}
    finally:
        engine.dispose()


def _config(source: str, target: str) -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  matrix: {{kind: sql, url: '{source}', table: matrix, key: id, mode: stream,
           target: wh.matrix}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 1000, max_wait: 100ms}}
"""


def test_every_postgresql_type_goes_through_the_slot_as_it_was(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = logical_pg.create("smx_src"), pg_factory.create("smx_dst")
    rows = pg_create_source(source, "matrix", PG_TYPES)
    columns = [column_name(t) for t, _ in PG_TYPES]
    database = sa.make_url(source).database
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        for setting in ("DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'",
                        "TimeZone = 'Pacific/Chatham'", "extra_float_digits = 0"):  # fmt: skip
            conn.exec_driver_sql(f"ALTER DATABASE {database} SET {setting}")
        conn.exec_driver_sql("CREATE TABLE matrix_seed AS SELECT * FROM matrix")
    path, cfg = write_config(tmp_path, _config(source, target))
    try:
        assert drain(cfg, path, spark).exit_code == 0  # the full load, from chunks
        listed = ", ".join(["id", *columns, "n_identity"])
        with engine.begin() as conn:  # every value again, through the slot
            conn.exec_driver_sql("DELETE FROM matrix")
            conn.exec_driver_sql(f"INSERT INTO matrix ({listed}) OVERRIDING SYSTEM VALUE "
                                 f"SELECT {listed} FROM matrix_seed")  # fmt: skip
        engine.dispose()
        assert drain(cfg, path, spark).exit_code == 0
    finally:
        drop_streams(cfg)  # the server is the session's: leave no slot for the next test

    shown = [*(t for t, _ in PG_TYPES), "identity column", "generated column"]
    every = [*columns, "n_identity", "n_generated"]
    copied = _texts(target, every)
    matrix = compare(_texts(source, every), copied, every, shown,
                     "postgresql -> postgresql (stream)")  # fmt: skip
    print(f"\n{matrix.table()}")
    assert len(copied) == rows
    assert all(r == "same" for r in matrix.results.values()), matrix.table()


def test_every_mariadb_type_goes_through_the_binary_log_as_the_mapping_says(
    tmp_path: Path, binlog_mariadb: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = binlog_mariadb.create("smx_src"), pg_factory.create("smx_dst")
    # Values the keyset copy refuses into PostgreSQL's boolean (a reject each) left out: a
    # stream has no rejects, its batch waits until the value is fixed.
    specs = [(t, [v for v in values if t != "tinyint(1)" or v in ("0", "1")])
             for t, values in MARIADB_TYPES]  # fmt: skip
    rows = mariadb_create_source(source, "matrix", specs)
    columns = [column_name(t) for t, _ in specs]
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        # A generated column of MariaDB has no PostgreSQL form the stream could create
        # (refused by name: the target table is made first then); the keyset matrix has it.
        conn.exec_driver_sql("ALTER TABLE matrix DROP COLUMN n_generated")
        conn.exec_driver_sql("CREATE TABLE matrix_seed AS SELECT * FROM matrix")
    path, cfg = write_config(tmp_path, _config(source, target))
    assert drain(cfg, path, spark).exit_code == 0  # the full load, from chunks
    listed = ", ".join(["id", *(f"`{c}`" for c in columns)])
    with engine.begin() as conn:  # every value again, through the binary log
        conn.exec_driver_sql(MARIADB_SESSION)
        conn.exec_driver_sql("DELETE FROM matrix")
        conn.exec_driver_sql(f"INSERT INTO matrix ({listed}) SELECT {listed} FROM matrix_seed")
    engine.dispose()
    assert drain(cfg, path, spark).exit_code == 0

    ddls = [t for t, _ in specs]
    copied = pg_texts(target, "matrix", columns)
    matrix = compare(mariadb_texts(source, "matrix", columns, ddls), copied, columns, ddls,
                     "mariadb -> postgresql (stream)", MARIADB_TO_PG, PG_CANONICAL)
    print(f"\n{matrix.table()}")
    assert len(copied) == rows
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
