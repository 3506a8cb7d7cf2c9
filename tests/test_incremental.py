"""Incremental mode keeps the newest version of a row.

Two ways an older version could win, each pinned down here without sleeps:

- a row changes while the batch holding its older version imports: the newer
  read is parked and imported once that batch ends (never dropped as a
  duplicate of a key in flight);
- two imports of one key commit in the wrong order (two daemons, a retry):
  the upsert never replaces a row whose cursor is newer than the incoming one.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.loader import load_config_text
from config.models import JdbcTargetConfig, SluiceConfig
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.strategy import build_strategy
from sinks.abc import PoolSink
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult, run_import
from spark_jobs.load.commit_jdbc import commit_staged
from spark_jobs.load.jdbc_tables import commits_table, create_if_missing, rejects_table
from spark_jobs.load.staging import drop_staging, staging_table
from spark_jobs.load.target import TargetTable

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
WAIT = 120.0  # seconds any one event may take; far more than it does


# -- the upsert: an older version never replaces a newer one ----------------------


def _commit_version(engine: sa.Engine, url: str, batch: str, label: str, at: dt.datetime) -> int:
    """Stage row 1 (and row 2, unchanged) as ``label`` with cursor ``at``; commit it."""
    manifest = Manifest(batch, "items", "wh.items", "keys", 2, 1, keys=[[1], [2]])
    columns = [
        sa.Column("id", sa.Integer()), sa.Column("label", sa.String(20)),
        sa.Column("updated_at", sa.DateTime()),
    ]
    staging = staging_table(manifest, columns, engine.dialect.name)
    with engine.begin() as conn:
        staging.create(conn)
        conn.execute(staging.insert(), [
            {"id": 1, "label": label, "updated_at": at, "_sluice_row": 1},
            {"id": 2, "label": "same", "updated_at": T0, "_sluice_row": 2},
        ])  # fmt: skip
    target = TargetTable(
        "wh", JdbcTargetConfig(kind="jdbc", url=url), None, "items", ("id",), "updated_at"
    )
    try:
        written = commit_staged(engine, target, staging, ["id", "label", "updated_at"], manifest)
    finally:
        drop_staging(engine, staging)
    return written.rows


@pytest.mark.parametrize("db", ["postgresql", "mariadb", "sqlite"])
@pytest.mark.parametrize("order", ["newer-first", "older-first"])
def test_two_imports_of_one_row_end_with_the_newer_version_in_either_order(
    db: str, order: str, request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]
) -> None:
    url = {
        "postgresql": lambda: request.getfixturevalue("pg_url"),
        "mariadb": lambda: request.getfixturevalue("mariadb_url"),
        "sqlite": lambda: sqlite_url("target"),
    }[db]()
    engine = sql_engine(url)
    with engine.begin() as conn:
        # MariaDB's TIMESTAMP would set itself on update: DATETIME there.
        cursor_type = "datetime" if db == "mariadb" else "timestamp"
        conn.exec_driver_sql(
            f"CREATE TABLE items (id integer PRIMARY KEY, label varchar(20), "
            f"updated_at {cursor_type})"
        )
    create_if_missing(engine, commits_table())
    create_if_missing(engine, rejects_table())
    versions = [("v2", T0 + dt.timedelta(hours=2)), ("v1", T0 + dt.timedelta(hours=1))]
    if order == "older-first":
        versions.reverse()
    for batch, (label, at) in enumerate(versions):
        # Every row of the batch counts as delivered, the one kept as newer too.
        assert _commit_version(engine, url, f"b{batch}", label, at) == 2
    # The same cursor again replaces (a re-read of the same version is the same row).
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, label, updated_at FROM items ORDER BY id")).all()
    # As text: SQLite gives its timestamps back as strings.
    assert [(i, label, str(at)[:19]) for i, label, at in rows] == [
        (1, "v2", "2024-05-01 14:00:00"), (2, "same", "2024-05-01 12:00:00")
    ]
    assert _commit_version(engine, url, "b9", "v2-again", T0 + dt.timedelta(hours=2)) == 2
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT label FROM items WHERE id = 1")) == "v2-again"
    engine.dispose()


# -- a change made while the row's older version imports --------------------------


class HoldFirstSink(PoolSink):
    """Real imports on the shared SparkSession; the first one's end waits for the test.

    The first batch is read and committed (its rows are in the target), and
    only then held: as if the change came right after its Spark read.
    """

    def __init__(self, cfg: SluiceConfig, spark) -> None:  # type: ignore[no-untyped-def]
        super().__init__(2, "hold-first")
        self.cfg, self.spark = cfg, spark
        self.committed, self.release = threading.Event(), threading.Event()
        self.manifests: list[Manifest] = []

    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        self.manifests.append(manifest)
        result = run_import(self.spark, self.cfg, manifest)
        if ticket == 0:
            self.committed.set()
            assert self.release.wait(WAIT), "the test never let the first batch end"
        return result

    def close(self, wait: bool = True) -> None:
        self._executor.shutdown(wait=wait)


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_a_change_made_while_the_older_version_imports_reaches_the_target(
    tmp_path: Path, pg_factory, spark  # type: ignore[no-untyped-def]
) -> None:
    source_url, target_url = pg_factory.create("incr_src"), pg_factory.create("incr_dst")
    source = sa.create_engine(source_url)
    with source.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE items (id integer PRIMARY KEY, label text, updated_at timestamp)"
        )
        conn.execute(
            sa.text("INSERT INTO items VALUES (:id, 'v1', :at)"),
            [{"id": i, "at": T0} for i in range(1, 6)],
        )
    cfg = load_config_text(
        f"""
ledger: sqlite:///{tmp_path / 'ledger.db'}
sources:
  items: {{kind: sql, url: "{source_url}", table: items, key: id, mode: incremental,
           cursor: updated_at, buffer: {{capacity: 100, replenish_below: 50}},
           target: wh.items}}
targets:
  wh: {{kind: jdbc, url: "{target_url}"}}
batch: {{max_items: 10, max_wait: 50ms}}
""",
        str(tmp_path / "sluice.yaml"),
    )
    ledger = Ledger(cfg.ledger)
    src_cfg = cfg.sources["items"]
    checkpoints = {"items": ledger.sources.register("items", fingerprint(src_cfg))}
    refilled = threading.Event()
    loop_box: list[MainLoop] = []

    def on_refill() -> None:
        refilled.set()
        if loop_box:
            loop_box[0].notify()

    queue = QueueingLimitedSource(
        SqlSource("items", src_cfg), 100, 50, on_refill=on_refill  # type: ignore[arg-type]
    )
    sink = HoldFirstSink(cfg, spark)
    loop = MainLoop(cfg, {"items": queue}, build_strategy(cfg), ledger, sink, checkpoints)
    loop_box.append(loop)
    queue.start()
    runner = threading.Thread(target=loop.run, kwargs={"until_drained": True}, daemon=True)
    runner.start()
    try:
        assert sink.committed.wait(WAIT), "the first batch never committed"
        # Version 1 of row 3 is in the target; its batch has not ended yet.
        with source.begin() as conn:
            conn.execute(sa.text("UPDATE items SET label = 'v2', updated_at = :at WHERE id = 3"),
                         {"at": T0 + dt.timedelta(minutes=5)})  # fmt: skip
        # The loop asks the drained source again; the re-read finds row 3 held.
        while queue.health().parked == 0:
            assert refilled.wait(WAIT), "the source was never read again"
            refilled.clear()
        sink.release.set()
        runner.join(WAIT)
        assert not runner.is_alive(), "the run did not drain"
    finally:
        sink.release.set()
        loop.request_stop()
        runner.join(WAIT)
        queue.stop(5)
        queue.wrapped.close()
        ledger.close()
    target = sa.create_engine(target_url)
    with target.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, label FROM items ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [(1, "v1"), (2, "v1"), (3, "v2"), (4, "v1"), (5, "v1")]
    # Row 3 went twice, its second version in a batch of its own after the first ended.
    assert [m.keys for m in sink.manifests] == [[[1], [2], [3], [4], [5]], [[3]]]
    target.dispose()
    source.dispose()
