"""``sluice cutover``: a final pass by the running daemons (or by the command), then verify.

Real PostgreSQL source and target: a sweep source keeps receiving rows while
a daemon migrates it; the cutover flag makes the daemon run a final pass and
stop, and the report says the target may take over. Rows written after a
drained daemon's last read are migrated by that daemon's final pass (its
batches, not the command's). Without a daemon, the command runs the final
pass itself. Not ready: a daemon still running past ``--wait``, a dead
batch, rows in flight.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli import app
from scheduler.commands import cutover
from scheduler.commands.cutover import run_cutover
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger
from scheduler.ledger.cutover import cutover_requested
from scheduler.ledger.schema import batches_table, open_engine
from scheduler.verify_tables import verify_config
from sinks.spark import SparkSink
from tests.helpers import wait_until, write_config

pytestmark = pytest.mark.spark


def _source(url: str, rows: int) -> sa.Engine:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE events (id integer PRIMARY KEY, body text, "
                             "at timestamptz DEFAULT now())"))  # fmt: skip
        conn.execute(sa.text("INSERT INTO events (id, body) SELECT i, 'event ' || i || ' ✓' "
                             "FROM generate_series(1, :n) AS i"), {"n": rows})  # fmt: skip
    return engine


def _config(source: str, target: str) -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  events:
    kind: sql
    url: '{source}'
    table: events
    key: id
    mode: sweep
    sweep_pause: 200ms
    target: wh.events
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100, max_wait: 50ms}}
"""


def _keyset_config(source: str, target: str, extra: str = "", limits: str = "") -> str:
    # A drained keyset walk is asked again after sweep_pause: an hour here, so
    # that only a final pass can read rows written after the walk's last read.
    return f"""
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sql, url: '{source}', table: events, key: id, sweep_pause: 1h,
           {limits}target: wh.events}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100, max_wait: 50ms}}
{extra}"""


def _count(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(sa.text("SELECT count(*) FROM events")) or 0)
    except sa.exc.ProgrammingError:
        return 0  # the table is not there yet
    finally:
        engine.dispose()


def test_cutover_with_a_daemon_running_while_rows_still_arrive(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("cut_src"), pg_factory.create("cut_dst")
    writes = _source(source, 300)
    path, cfg = write_config(tmp_path, _config(source, target))
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    ended: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: ended.update(summary=daemon.run()))
    stop_writing = threading.Event()

    def write() -> None:  # the application, still writing
        next_id = 301
        while not stop_writing.wait(0.02):
            with writes.begin() as conn:
                conn.execute(sa.text("INSERT INTO events (id, body) VALUES (:i, 'late')"),
                             {"i": next_id})  # fmt: skip
            next_id += 1

    writer = threading.Thread(target=write)
    runner.start()
    writer.start()
    outcome: dict[str, Any] = {}
    cutting = threading.Thread(target=lambda: outcome.update(
        report=run_cutover(spark, cfg, path, wait=120, poll=0.2)))  # fmt: skip
    try:
        wait_until(lambda: _count(target) >= 300, "the daemon migrated the first rows",
                   timeout=120)  # fmt: skip
        # The application's writes stop, and the cutover begins at once: the
        # last rows written are not migrated yet.
        stop_writing.set()
        writer.join()
        ledger = open_engine(cfg.ledger)
        cutting.start()
        wait_until(lambda: cutover_requested(ledger) is not None, "the flag is set")
        cutting.join(180)
        runner.join(60)
    finally:
        stop_writing.set()
        if runner.is_alive() and daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()
    report = outcome["report"]
    assert report.ready, (report.problems, report.verify and report.verify.to_json())
    assert report.final_pass == "by 1 running daemons, then here"
    # The daemon ran its final pass and stopped on its own.
    assert not runner.is_alive() and ended["summary"].exit_code == 0
    with writes.connect() as conn:
        late = conn.scalar(sa.text("SELECT count(*) FROM events WHERE body = 'late'"))
    assert late and _count(target) == 300 + late
    assert verify_config(spark, cfg).equal
    ledger.dispose()
    writes.dispose()


def test_cutover_without_a_daemon_runs_the_final_pass_itself(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("cut1_src"), pg_factory.create("cut1_dst")
    _source(source, 150).dispose()
    path, _ = write_config(tmp_path, _config(source, target))
    result = CliRunner().invoke(app, ["cutover", str(path)])
    assert result.exit_code == 0, result.output
    assert "run here (no daemon was running)" in result.output
    assert result.output.rstrip().endswith("s: the target may take over")
    assert "READY in " in result.output
    assert _count(target) == 150
    cancelled = CliRunner().invoke(app, ["cutover", str(path), "--cancel"])
    assert cancelled.exit_code == 0 and "cutover cancelled" in cancelled.output


def _drained(daemon: Daemon) -> bool:
    loop = daemon.loop
    return loop is not None and all(q.exhausted for q in loop.queues.values())


def test_the_daemons_final_pass_migrates_rows_written_after_its_last_read(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("cut2_src"), pg_factory.create("cut2_dst")
    writes = _source(source, 300)
    path, cfg = write_config(tmp_path, _keyset_config(source, target))
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    owner = daemon.ledger.owner
    ended: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: ended.update(summary=daemon.run()))
    runner.start()
    try:
        wait_until(lambda: _count(target) == 300 and _drained(daemon),
                   "the daemon drained the table", timeout=120)  # fmt: skip
        with writes.begin() as conn:  # the application's last writes, then it stops
            conn.execute(sa.text(
                "INSERT INTO events (id, body) SELECT i, 'late' FROM generate_series(301, 340) AS i"
            ))
        report = run_cutover(spark, cfg, path, wait=120, poll=0.2)
        runner.join(60)
    finally:
        if runner.is_alive() and daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()
        writes.dispose()
    assert report.ready, report.problems
    assert not runner.is_alive() and ended["summary"].exit_code == 0
    assert _count(target) == 340
    # Every row came through the daemon's own batches: the command's pass, after
    # the daemon's, found nothing left to claim.
    ledger = open_engine(cfg.ledger)
    b = batches_table
    with ledger.connect() as conn:
        by_owner = conn.execute(sa.select(b.c.owner, sa.func.sum(b.c.rows)).group_by(b.c.owner))
        assert [tuple(row) for row in by_owner] == [(owner, 340)]
    ledger.dispose()


def test_a_daemon_still_running_past_the_wait_is_not_ready(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("cut3_src"), pg_factory.create("cut3_dst")
    _source(source, 200).dispose()
    # 40 rows a second: the daemon's final pass takes five seconds, the wait one.
    text = _keyset_config(source, target, limits="limits: {max_rows_per_s: 40}, ")
    path, cfg = write_config(tmp_path, text)
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    runner = threading.Thread(target=daemon.run)
    runner.start()
    try:
        wait_until(lambda: _count(target) > 0, "the daemon's first batch", timeout=120)
        report = run_cutover(spark, cfg, path, wait=1, poll=0.2)
        assert not report.ready and report.verify is None
        assert report.problems[0].startswith("daemons still running after 1 s: ")
        # The daemon goes on with its final pass, and stops on its own at the end.
        runner.join(60)
        assert not runner.is_alive() and _count(target) == 200
    finally:
        if runner.is_alive() and daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()


def test_a_dead_batch_is_not_ready(tmp_path: Path, pg_factory: Any, spark: Any) -> None:
    source, target = pg_factory.create("cut4_src"), pg_factory.create("cut4_dst")
    _source(source, 50).dispose()
    made = sa.create_engine(target)
    with made.begin() as conn:  # a target made by hand without the source's "body"
        conn.execute(sa.text("CREATE TABLE events (id integer PRIMARY KEY, at timestamptz)"))
    made.dispose()
    path, _ = write_config(tmp_path, _keyset_config(source, target, "retry: {max_attempts: 1}"))
    result = CliRunner().invoke(app, ["cutover", str(path)])
    assert result.exit_code == 1, result.output
    assert "1 dead batches" in result.output
    assert result.output.rstrip().endswith("NOT READY: the target may not take over yet")


def test_rows_in_flight_are_not_ready(
    tmp_path: Path, pg_factory: Any, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = pg_factory.create("cut5_src"), pg_factory.create("cut5_dst")
    writes = _source(source, 100)
    path, cfg = write_config(tmp_path, _config(source, target))
    ran = cutover.run_until_drained

    def then_a_late_daemon_claims(*args: Any) -> Any:
        # Between the final pass and the verify, a daemon starts and claims rows
        # written meanwhile: they are in flight when the verify reads.
        summary = ran(*args)
        with writes.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO events (id, body) SELECT i, 'late' FROM generate_series(101, 105) AS i"
            ))
        late = Ledger(cfg.ledger, owner="late-daemon")
        try:
            late.claim_keys("late", "events", "wh.events", [[i] for i in range(101, 106)],
                            begin=True)  # fmt: skip
        finally:
            late.close()
        return summary

    monkeypatch.setattr(cutover, "run_until_drained", then_a_late_daemon_claims)
    report = run_cutover(spark, cfg, path, wait=30, poll=0.2)
    writes.dispose()
    assert not report.ready
    assert report.problems == ["events: 0 rows not migrated, 5 in flight"]
