"""The daemon as operators run it: hot reload, windows, a dead ledger writer."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.loader import load_config
from scheduler.daemon import Daemon
from sinks.abc import MemorySink
from tests.helpers import seed_orders

CONFIG = """
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           buffer: {{capacity: 400, replenish_below: 100}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {max_items}, max_wait: 50ms}}
backpressure: {{max_pending: 400, resume_below: 100}}
{extra}
"""


def write(path: Path, max_items: int = 100, extra: str = "") -> None:
    path.write_text(CONFIG.format(max_items=max_items, extra=extra))


def wait_for(condition, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    """Poll a condition another thread makes true (the daemon has no hook for tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.timeout(60)
def test_a_changed_config_is_picked_up_and_an_invalid_one_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 3000)
    config = tmp_path / "sluice.yaml"
    write(config, max_items=100)
    sink = MemorySink(auto_complete=False)  # nothing completes: the daemon keeps running
    daemon = Daemon(load_config(config), config_path=str(config), sink=sink)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    assert wait_for(lambda: len(sink.held()) >= 1)
    assert all(m.items <= 100 for m in sink.submitted)

    write(config, max_items=50, extra="retry: {max_attempts: 9}")
    assert wait_for(lambda: daemon.cfg.batch.max_items == 50)  # the file watcher saw it
    assert daemon.loop is not None
    assert wait_for(lambda: daemon.loop is not None and daemon.loop.cfg.retry.max_attempts == 9)

    caplog.set_level(logging.WARNING, logger="sluice.daemon")
    config.write_text(CONFIG.format(max_items="lots", extra=""))
    assert wait_for(lambda: "reload" in caplog.text and "ignored" in caplog.text)
    assert "max_items" in caplog.text and daemon.cfg.batch.max_items == 50
    assert daemon.reload("SIGHUP") is False  # still invalid: still ignored

    # Let everything finish, then stop.
    daemon.loop.request_stop()
    for batch_id in sink.held():
        sink.complete(batch_id)
    runner.join(timeout=30)
    assert not runner.is_alive()
    daemon.close()


@pytest.mark.timeout(60)
def test_nothing_is_fed_outside_the_windows(tmp_path: Path) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 500)
    config = tmp_path / "sluice.yaml"
    write(config, extra='windows: ["* 1 * * *"]')  # 01:00-01:59 UTC only
    sink = MemorySink()
    clock = [datetime(2026, 1, 5, 12, 0, tzinfo=UTC)]
    daemon = Daemon(
        load_config(config), config_path=str(config), sink=sink, wall_clock=lambda: clock[0]
    )
    runner = threading.Thread(target=daemon.run, kwargs={"until_drained": True}, daemon=True)
    runner.start()
    assert wait_for(lambda: daemon.loop is not None and daemon.queues["orders"].buffered > 0)
    assert daemon.loop is not None
    time.sleep(0.3)  # the loop had every chance to feed and must not have
    assert sink.submitted == []
    clock[0] = datetime(2026, 1, 5, 1, 30, tzinfo=UTC)
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert sum(m.items for m in sink.submitted) == 500
    daemon.close()
