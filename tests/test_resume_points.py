"""Incremental sources resume where every version read before is done.

A restart used to read the whole table again (hours at a hundred million
rows). Now the ledger keeps each incremental source's resume point: the
walk position before the first row version read and not yet done, written
``checkpoint_lag`` behind. No sleeps: batches are held and acked by hand,
the lag runs on a fake clock, and the daemon runs until drained.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.loader import load_config
from config.models import SqlSourceConfig
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger, fingerprint
from scheduler.ledger.schema import decode_position, sources_table
from scheduler.resume_points import ResumePoints
from sinks.abc import MemorySink
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from tests.helpers import FakeClock

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
ROWS = 60


def _seed(url: str, rows: int = ROWS) -> sa.Engine:
    """``items``: ids 1..rows, cursor ``updated_at`` one second apart, in id order."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS items"))
        conn.execute(sa.text(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, label VARCHAR(20), "
            "updated_at TIMESTAMP WITH TIME ZONE)"
            if engine.dialect.name == "postgresql" else
            "CREATE TABLE items (id INTEGER PRIMARY KEY, label VARCHAR(20), updated_at TIMESTAMP)"
        ))  # fmt: skip
        conn.execute(
            sa.text("INSERT INTO items VALUES (:id, 'v1', :at)"),
            [{"id": i, "at": _at(i)} for i in range(1, rows + 1)],
        )
    return engine


def _at(i: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=i)


def _config(url: str, lag: str = "0s") -> SqlSourceConfig:
    return SqlSourceConfig(
        kind="sql", url=url, table="items", key="id", mode="incremental", cursor="updated_at",
        checkpoint_lag=lag, page_size=10, target="lake.items",
    )  # type: ignore[arg-type]


class _Walk:
    """An incremental source in its buffer, registered in a ledger, with its resume points."""

    def __init__(self, url: str, ledger_url: str, clock: FakeClock, lag: str = "0s") -> None:
        self.cfg = _config(url, lag)
        self.ledger = Ledger(ledger_url)
        self.ledger.sources.register("items", fingerprint(self.cfg))
        self.source = SqlSource("items", self.cfg)
        self.queue = QueueingLimitedSource(self.source, capacity=ROWS * 2, replenish_below=0)
        self.points = ResumePoints(
            self.ledger.sources, {"items": self.queue}, {"items": self.cfg.checkpoint_lag}, clock
        )

    def read(self, limit: int) -> None:
        """One refill, on this thread (the walk's own thread is not started)."""
        items = self.source.next_batch(limit)
        self.queue._filled(items, self.source.exhausted)

    def take(self, n: int, batch: str) -> list[int]:
        return [item.key[0] for item in self.queue.next_batch(n, batch)]

    def saved(self) -> list[object] | None:
        with self.ledger.engine.connect() as conn:
            text = conn.scalar(sa.select(sources_table.c.resume_after))
        return decode_position(text)

    def close(self) -> None:
        self.source.close()
        self.ledger.close()


@pytest.mark.postgres
def test_the_resume_point_never_passes_a_version_not_done(
    pg_url: str, sqlite_url: Callable[[str], str]
) -> None:
    _seed(pg_url)
    clock = FakeClock()
    walk = _Walk(pg_url, sqlite_url("ledger"), clock)
    try:
        walk.read(30)
        assert walk.take(10, "a") == list(range(1, 11))
        assert walk.take(10, "b") == list(range(11, 21))
        walk.points.save()
        assert walk.saved() is None  # batch a holds row 1: from the start

        walk.queue.ack("b")  # a later batch done first changes nothing
        walk.points.save()
        assert walk.saved() is None
        walk.queue.ack("a")  # rows 1..20 done, 21..30 still queued
        walk.points.save()
        assert walk.saved() == [_at(20), 20]  # typed: a timestamp, not text

        # Row 25 changes while its batch imports: the newer version is parked.
        assert walk.take(10, "c") == list(range(21, 31))
        with walk.source.engine.begin() as conn:
            conn.execute(sa.text("UPDATE items SET label = 'v2', updated_at = :at WHERE id = 25"),
                         {"at": _at(ROWS + 1)})
        walk.read(100)  # rows 31..60, then 25 again
        assert walk.queue.health().parked == 1
        walk.queue.ack("c")
        assert walk.take(40, "d") == [*range(31, 61), 25]
        walk.points.save()
        assert walk.saved() == [_at(30), 30]
        walk.queue.ack("d")
        walk.points.save()
        assert walk.saved() == [_at(ROWS + 1), 25]  # all done: after the last read
    finally:
        walk.close()


def test_the_point_written_is_the_one_known_checkpoint_lag_ago(
    sqlite_url: Callable[[str], str]
) -> None:
    url = sqlite_url("source")
    _seed(url)
    clock = FakeClock()
    walk = _Walk(url, sqlite_url("ledger"), clock, lag="60s")
    try:
        walk.read(20)
        walk.take(10, "a")
        walk.queue.ack("a")
        walk.points.save()  # t=0: rows 1..10 done
        clock.now += 30
        walk.take(10, "b")
        walk.queue.ack("b")
        walk.points.save()  # t=30: rows 1..20 done, but the point of t=0 is not 60 s old
        assert walk.saved() is None
        clock.now += 31
        walk.points.save()  # t=61: t=0's point is due, t=30's is not
        assert (walk.saved() or [])[-1] == 10
        clock.now += 30
        walk.points.save()
        assert walk.saved() is not None and walk.saved()[-1] == 20
    finally:
        walk.close()


CONFIG = """
sources:
  items: {{kind: sql, url: "{url}", table: items, key: id, mode: incremental,
          cursor: updated_at, checkpoint_lag: 0s, page_size: 25, target: lake.items}}
targets:
  lake: {{kind: parquet, path: ./lake}}
ledger: "sqlite:///{ledger}"
batch: {{max_items: 20, max_wait: 10ms}}
"""


def _drain(config: Path) -> dict[str, int]:
    """Run a daemon until drained with a sink that completes every batch; the keys claimed."""
    sink = MemorySink()
    daemon = Daemon(load_config(config), config_path=str(config), sink=sink)
    try:
        summary = daemon.run(until_drained=True)
    finally:
        daemon.close()
    assert summary.exit_code == 0
    return {
        "claimed": summary.stats.items.get("items", 0),
        "imported": sum(len(m.keys or []) for m in sink.submitted),
    }


@pytest.mark.parametrize("db", ["postgresql", "mariadb", "sqlite"])
def test_a_restart_reads_past_the_resume_point_and_still_sees_changes(
    db: str, tmp_path: Path, request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]
) -> None:
    url = {
        "postgresql": lambda: request.getfixturevalue("pg_url"),
        "mariadb": lambda: request.getfixturevalue("mariadb_url"),
        "sqlite": lambda: sqlite_url("source"),
    }[db]()
    engine = _seed(url, rows=200)
    config = tmp_path / "sluice.yaml"
    config.write_text(CONFIG.format(url=url, ledger=tmp_path / "ledger.db"))

    assert _drain(config) == {"claimed": 200, "imported": 200}
    # Before resume points the second run read all 200 rows again (and claimed
    # none, the ledger having every version): now it reads nothing.
    assert _drain(config) == {"claimed": 0, "imported": 0}

    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE items SET label = 'v2', updated_at = :at WHERE id <= 5"),
                     {"at": _at(1000)})
        conn.execute(sa.text("INSERT INTO items VALUES (201, 'new', :at)"), {"at": _at(1001)})
    assert _drain(config) == {"claimed": 6, "imported": 6}
    assert _drain(config) == {"claimed": 0, "imported": 0}

    from typer.testing import CliRunner

    from scheduler.cli import app

    shown = CliRunner().invoke(app, ["status", str(config)])
    assert shown.exit_code == 0, shown.output
    assert [line.split()[10] for line in shown.output.splitlines()
            if line.startswith("items")] == ["done"], shown.output

    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO items VALUES (202, 'new', :at)"), {"at": _at(1002)})
    planned = CliRunner().invoke(app, ["plan", str(config)])
    assert planned.exit_code == 0, planned.output
    assert "past the resume point" in planned.output and " 1 " in planned.output, planned.output


def test_checkpoint_lag_belongs_to_incremental_sources_only() -> None:
    only = "checkpoint_lag: is only used by mode incremental, not keyset"
    with pytest.raises(ValueError, match=only):
        SqlSourceConfig(
            kind="sql", url="sqlite://", table="items", key="id", checkpoint_lag="5s",
            target="lake.items",
        )  # type: ignore[arg-type]
    assert _config("sqlite://", "90s").checkpoint_lag == 90.0

