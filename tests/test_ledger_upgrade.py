"""Ledgers made by an earlier sluice open, upgrade in place and resume.

``tests/data/ledger_v0/`` keeps one half-finished migration made by the sluice
of the commit its README names (before the ledger had migrations): a SQLite
ledger with its source and target files, and ``pg_dump`` of a PostgreSQL
ledger with its source and target databases. Each is put back where it was
made, the daemon of today runs it to the end, and every source row must be in
its target exactly once, the batches done before the upgrade not imported again.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.daemon import Daemon
from sinks.spark import SparkSink
from tests.conftest import PG_ADMIN_URL
from tests.data.ledger_v0.make_fixture import PG_DATABASES, SQLITE_HOME, config_text
from tests.helpers import assert_same_rows, write_config

KEPT = Path(__file__).parent / "data" / "ledger_v0"


def restore_sqlite() -> dict[str, str]:
    """The kept SQLite files back at their paths; returns their URLs by role."""
    shutil.rmtree(SQLITE_HOME, ignore_errors=True)
    SQLITE_HOME.mkdir(parents=True)
    for name in PG_DATABASES:
        shutil.copy(KEPT / "sqlite" / f"{name}.db", SQLITE_HOME / f"{name}.db")
    return {name: f"sqlite:///{SQLITE_HOME / name}.db" for name in PG_DATABASES}


def _drop_pg(admin: sa.Engine) -> None:
    with admin.connect() as conn:
        for name in PG_DATABASES:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS sluice_v0_{name} WITH (FORCE)"))


@pytest.fixture
def kept_postgres(pg_factory) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    """The kept dumps restored into their databases (dropped afterwards)."""
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    _drop_pg(admin)
    urls = {}
    for name in PG_DATABASES:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE sluice_v0_{name}"))
        urls[name] = admin.url.set(database=f"sluice_v0_{name}").render_as_string(False)
        engine = sa.create_engine(urls[name])
        dump = (KEPT / "postgres" / f"{name}.sql").read_text()
        # pg_dump --inserts: plain SQL but for psql's \restrict meta-commands.
        script = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
        with engine.begin() as conn:
            conn.exec_driver_sql(script)
        engine.dispose()
    try:
        yield urls
    finally:
        _drop_pg(admin)
        admin.dispose()


def _batches(ledger: str) -> dict[str, tuple[str, int]]:
    engine = sa.create_engine(ledger)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, state, attempts FROM sluice_batches")).all()
    engine.dispose()
    return {row.id: (row.state, row.attempts) for row in rows}


def _resume_and_check(tmp_path: Path, kind: str, urls: dict[str, str], spark) -> None:  # type: ignore[no-untyped-def]
    before = _batches(urls["ledger"])
    assert {state for state, _ in before.values()} == {"done", "importing"}, before
    path, cfg = write_config(tmp_path, config_text(kind))
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    try:
        summary = daemon.run(until_drained=True)
    finally:
        daemon.close()
    assert summary.exit_code == 0, summary

    after = _batches(urls["ledger"])
    assert {state for state, _ in after.values()} == {"done"}, after
    for batch_id, (state, attempts) in before.items():
        if state == "done":  # done before the upgrade: never imported again
            assert after[batch_id] == ("done", attempts), batch_id
    engine = sa.create_engine(urls["warehouse"])
    with engine.connect() as conn:
        for table, rows in (("orders", 300), ("customers", 200)):
            count, keys = conn.execute(
                sa.text(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}")
            ).one()
            assert (count, keys) == (rows, rows), table
    engine.dispose()
    for table in ("orders", "customers"):
        if kind == "postgres":
            assert_same_rows(urls["shop"], table, urls["warehouse"], table)
        else:
            # The kept SQLite target was made by a sluice that read SQLite's
            # DATETIME as a date: compare what that version kept whole.
            columns = "id, customer, amount, flag"
            assert _rows(urls["shop"], table, columns) == _rows(urls["warehouse"], table, columns)


def _rows(url: str, table: str, columns: str) -> list[tuple[str, ...]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT {columns} FROM {table} ORDER BY id")).all()
    engine.dispose()
    return [tuple(str(value) for value in row) for row in rows]


@pytest.mark.spark
def test_a_kept_sqlite_ledger_resumes(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    _resume_and_check(tmp_path, "sqlite", restore_sqlite(), spark)


@pytest.mark.spark
@pytest.mark.postgres
def test_a_kept_postgresql_ledger_resumes(tmp_path: Path, kept_postgres, spark) -> None:  # type: ignore[no-untyped-def]
    _resume_and_check(tmp_path, "postgres", kept_postgres, spark)
