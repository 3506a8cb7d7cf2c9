"""A stream source shares a fair strategy with a keyset source, into a target that is slow.

The target's tables sleep a little for each row while a switch is on: the
gate holds both sources back. The keyset source keeps its share of what is
fed (fair 1:1), the stream's lag grows while the writer outruns the target,
and once the target is fast again the stream drains its lag and catches up.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.daemon import Daemon
from sinks.spark import SparkSink
from tests.helpers import wait_until, write_config
from tests.test_stream_source import Writer, _rows, make_source

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def _config(source: str, target: str) -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  items:
    kind: sql
    url: '{source}'
    table: items
    key: id
    mode: stream
    page_size: 100
    target: wh.items
  orders:
    kind: sql
    url: '{source}'
    table: orders
    key: id
    page_size: 100
    target: wh.orders
targets:
  wh: {{kind: jdbc, url: '{target}'}}
strategy:
  fair: {{items: 1, orders: 1}}
batch: {{max_items: 100, max_wait: 50ms}}
backpressure: {{max_pending: 200, resume_below: 100}}
"""


def _slow_target(url: str) -> sa.Engine:
    """The target's tables, each row sleeping 4 ms while ``slow.on``."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE slow (on_ boolean NOT NULL)"))
        conn.execute(sa.text("INSERT INTO slow VALUES (true)"))
        conn.execute(sa.text(
            "CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF (SELECT on_ FROM slow) THEN PERFORM pg_sleep(0.004); END IF; RETURN NEW; END $$"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE items (id integer PRIMARY KEY, v bigint NOT NULL, "
                             "name text, tags text[], amount numeric(20,6))"))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE orders (id integer PRIMARY KEY, body text)"))
        for table in ("items", "orders"):
            conn.execute(sa.text(f"CREATE TRIGGER slow BEFORE INSERT OR UPDATE ON {table} "
                                 "FOR EACH ROW EXECUTE FUNCTION slow_row()"))  # fmt: skip
    return engine


def _claimed(ledger: Path) -> dict[str, int]:
    engine = sa.create_engine(f"sqlite:///{ledger}")
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text(  # type: ignore[arg-type]
                "SELECT source, sum(items) FROM sluice_batches GROUP BY source")).all())
    except sa.exc.OperationalError:
        return {}  # no batch table yet
    finally:
        engine.dispose()


def test_a_stream_lags_behind_a_slow_target_and_drains_while_a_keyset_source_keeps_its_share(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = logical_pg.create("share_src"), pg_factory.create("share_dst")
    make_source(source, 100)
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id integer PRIMARY KEY, body text)"))
        conn.execute(sa.text("INSERT INTO orders SELECT i, 'order ' || i "
                             "FROM generate_series(1, 6000) AS i"))  # fmt: skip
    engine.dispose()
    target_engine = _slow_target(target)
    path, cfg = write_config(tmp_path, _config(source, target))
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    runner = threading.Thread(target=daemon.run, daemon=True)
    writer = Writer(source)
    lags: list[float] = []
    try:
        runner.start()
        wait_until(lambda: "items" in daemon.queues, "the daemon opened its sources")
        stream = daemon.queues["items"].wrapped
        writer.thread.start()
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:  # the target is slow: both held back by the gate
            lags.append(stream.health().lag or 0.0)  # type: ignore[attr-defined]
            time.sleep(0.25)
        claimed = _claimed(tmp_path / "ledger.db")
        assert claimed.get("orders", 0) < 6000, "the keyset source ran out: no sharing shown"
        share = claimed.get("orders", 0) / sum(claimed.values())
        assert share >= 0.4, f"the keyset source got {share:.0%} of a fair 1:1 share: {claimed}"
        assert max(lags) >= 1.0 and max(lags) > lags[0], f"the lag never grew: {lags}"

        writer.stop.set()
        writer.thread.join()
        with target_engine.begin() as conn:  # the target is fast again: the gate opens
            conn.execute(sa.text("UPDATE slow SET on_ = false"))
        health = stream.health  # type: ignore[attr-defined]
        # Caught up by a read after the writer stopped: the target holds every change.
        wait_until(lambda: health().caught_up and health().lag == 0.0
                   and _rows(target) == _rows(source), "the stream caught up",
                   timeout=90)  # fmt: skip
    finally:
        writer.stop.set()
        if daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(120)
        daemon.close()
        daemon_stream = daemon.queues.get("items")
        if daemon_stream is not None:
            daemon_stream.wrapped.drop()  # type: ignore[attr-defined]  # no slot left behind
        target_engine.dispose()
    assert _rows(target) == _rows(source)
