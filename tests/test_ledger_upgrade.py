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
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from config.errors import LedgerError
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger
from scheduler.ledger.migrate import HEAD, MIGRATIONS, REVISIONS, VERSION_TABLE, revision
from scheduler.ledger.schema import metadata
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
    assert _schema_drift(urls["ledger"]) == []

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


def _revision(url: str) -> str | None:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = revision(conn)
    engine.dispose()
    return found


def _schema_drift(url: str) -> list[object]:
    """What the ledger at ``url`` differs in from the tables sluice declares (empty: nothing)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert revision(conn) == HEAD
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        drift = compare_metadata(context, metadata)
    engine.dispose()
    return drift


def test_the_revisions_are_the_migrations_in_order() -> None:
    script = ScriptDirectory(str(MIGRATIONS))
    chain = [rev.revision for rev in script.walk_revisions()][::-1]
    assert tuple(chain) == REVISIONS and script.get_current_head() == HEAD


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_new_ledgers_opened_at_once_are_made_once_as_declared(  # type: ignore[no-untyped-def]
    backend: str, tmp_path: Path, pg_factory
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}" if backend == "sqlite" else pg_factory.create("new")
    opened: list[Ledger] = []
    failed: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(Ledger(url))
        except BaseException as error:  # noqa: BLE001 - reported below
            failed.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ledger in opened:
        ledger.close()
    assert not failed and len(opened) == 4
    assert _schema_drift(url) == []


def test_an_upgrade_waits_until_no_older_daemon_is_live(tmp_path: Path) -> None:
    urls = restore_sqlite()
    ledger_url = urls["ledger"]
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:  # the kept daemon, alive again on another host
        conn.execute(sa.text("UPDATE sluice_owners SET host = 'elsewhere', heartbeat_at = :t"),
                     {"t": time.time()})
    with pytest.raises(LedgerError, match=rf"schema 0001 .*needs {HEAD}.*vm:5633:\w+ \(heartbeat"):
        Ledger(ledger_url)
    assert _revision(ledger_url) == "0001"  # untouched

    # Read-only commands read the old ledger as it is and never upgrade it.
    from typer.testing import CliRunner

    from scheduler.cli import app

    config = tmp_path / "sluice.yaml"
    config.write_text(config_text("sqlite"))
    shown = CliRunner().invoke(app, ["status", str(config)])
    assert shown.exit_code == 0, shown.output
    assert f"ledger schema 0001: the next `sluice run` upgrades it to {HEAD}" in shown.output
    assert "an earlier sluice" in shown.output
    planned = CliRunner().invoke(app, ["plan", str(config)])
    assert planned.exit_code == 0, planned.output
    assert "rows past [270]" in planned.output
    assert _revision(ledger_url) == "0001"

    with engine.begin() as conn:  # its heartbeat lapses: it is gone
        conn.execute(sa.text("UPDATE sluice_owners SET heartbeat_at = :t"), {"t": time.time() - 60})
    engine.dispose()
    Ledger(ledger_url).close()
    assert _schema_drift(ledger_url) == []


def test_a_ledger_of_a_later_sluice_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0099'"))
    engine.dispose()
    with pytest.raises(LedgerError, match="schema 0099, newer than this sluice knows"):
        Ledger(url)


def test_where_reads_a_kept_ledger_as_it_is_and_its_ranges_are_numbered_on_upgrade(
    tmp_path: Path,
) -> None:
    """``sluice where`` finds a key's range in a ledger of an older schema without
    upgrading it; the upgrade numbers the ranges in the order they were claimed."""
    import json

    from typer.testing import CliRunner

    from scheduler.cli import app

    ledger_url = restore_sqlite()["ledger"]
    config = tmp_path / "sluice.yaml"
    config.write_text(config_text("sqlite"))
    claimed = ["70bb076c428e423cbd4f16375873fd2e", "fa7e58080f944826844baeb818e2644d",
               "eb1c5eb7fe0848eaaca65cb15320e93c"]  # (start, 90], (90, 180], (180, 270]

    def where(key: int) -> dict[str, object]:
        done = CliRunner().invoke(
            app, ["where", str(config), "--source", "orders", "--key", str(key), "--json"]
        )
        assert done.exit_code == 0, done.output
        answer: dict[str, object] = json.loads(done.stdout)
        return answer

    def held(key: int) -> str | None:
        batch = where(key)["batch"]
        return None if batch is None else batch["id"]  # type: ignore[index]

    assert [held(3), held(100), held(270), held(273)] == [*claimed, None]
    assert _revision(ledger_url) == "0001"  # read as it is

    Ledger(ledger_url).close()  # upgraded
    engine = sa.create_engine(ledger_url)
    with engine.connect() as conn:
        numbered = conn.execute(sa.text(
            "SELECT id, range_seq FROM sluice_batches WHERE kind = 'range' ORDER BY range_seq"
        )).all()  # fmt: skip
        mark = conn.scalar(sa.text("SELECT version FROM sluice_sources WHERE name = 'orders'"))
    engine.dispose()
    assert [(row.id, row.range_seq) for row in numbered] == [(b, i + 1) for i, b in
                                                             enumerate(claimed)]  # fmt: skip
    assert mark == 3  # the next claim's range comes after the last one numbered
    assert [held(3), held(100), held(270), held(273)] == [*claimed, None]
