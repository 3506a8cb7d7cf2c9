"""ETA per source and overall: rows left from the backlog, at the rate of a short window,
never faster than the limit in force; a done source says so.

The arithmetic runs on a fake clock; one daemon migrates a real SQLite table
under ``max_rows_per_s`` and halves it by a reload mid-run: the ETA it shows
must stay within 20% of the time the run really took to end.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from config.loader import load_config, load_config_text
from scheduler.daemon import Daemon
from scheduler.observe.eta import RATE_WINDOW, BacklogCounter, EtaTracker
from sinks.abc import MemorySink
from sources.abc import MemorySource
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from tests.helpers import FakeClock, seed_orders, wait_until


def _tracker(
    keys: dict[str, int], done: dict[str, int], limits: dict[str, float], clock: FakeClock
) -> EtaTracker:
    queues = {
        name: QueueingLimitedSource(MemorySource(name, [(i,) for i in range(n)]), 100, 10)
        for name, n in keys.items()
    }
    counter = BacklogCounter(queues, lambda: done, clock=clock)
    counter.count_now()
    return EtaTracker(queues, lambda: done, limit=limits.get, counter=counter, clock=clock)


def test_rows_left_at_the_recent_rate_capped_by_the_limit_in_force() -> None:
    clock, done, limits = FakeClock(0.0), {"a": 0, "b": 0}, {}
    tracker = _tracker({"a": 1_000, "b": 3_000}, done, limits, clock)
    # a: 10 rows/s for a minute, then 2 rows/s; b: 50 rows/s.
    for second in range(61):
        clock.now = float(second)
        done["a"], done["b"] = 10 * second, 50 * second
        report = tracker.sample()
    a = report.sources["a"]
    assert (a.left, a.rows_per_s, a.eta_s) == (400, pytest.approx(10.0), pytest.approx(40.0))
    assert report.left == 400 + 0 and report.sources["b"].eta_s == 0.0
    for second in range(61, 61 + int(RATE_WINDOW) + 1):
        clock.now = float(second)
        done["a"] += 2
        report = tracker.sample()
    a = report.sources["a"]
    # The short window forgets the faster minute within RATE_WINDOW seconds.
    assert a.rows_per_s == pytest.approx(2.0) and a.eta_s == pytest.approx(a.left / 2.0)
    assert a.chart[-1] == pytest.approx(2.0) and max(a.chart) == pytest.approx(10.0)

    # A limit lowered under the rate is right at the next sample.
    limits["a"] = 0.5
    clock.now += 1
    done["a"] += 2
    a = tracker.sample().sources["a"]
    assert a.limited and a.rows_per_s == 0.5 and a.eta_s == pytest.approx(a.left / 0.5)


def test_overall_eta_is_never_sooner_than_a_source_held_at_its_limit() -> None:
    clock, done, limits = FakeClock(0.0), {"slow": 0, "fast": 0}, {"slow": 10.0}
    tracker = _tracker({"slow": 1_000, "fast": 3_000}, done, limits, clock)
    for second in range(11):
        clock.now = float(second)
        done["slow"], done["fast"] = 10 * second, 100 * second
        report = tracker.sample()
    slow, fast = report.sources["slow"], report.sources["fast"]
    assert slow.limited and not fast.limited
    assert (slow.eta_s, fast.eta_s) == (pytest.approx(90.0), pytest.approx(20.0))
    # The slow source cannot go faster once the fast one is done: 90 s, not
    # its 2,900 rows at the 110 rows/s of both.
    assert report.left == 2_900 and report.eta_s == pytest.approx(90.0)
    # Unlimited, the slow source may take the fast one's share when it is done.
    del limits["slow"]
    report = tracker.sample()
    assert not report.sources["slow"].limited
    assert report.eta_s == pytest.approx(2_900 / 110, rel=0.01)


def test_a_source_run_dry_is_counted_again_and_says_done() -> None:
    done: dict[str, int] = {"a": 0}
    queue = QueueingLimitedSource(MemorySource("a", [(1,), (2,), (3,)]), 100, 10)
    counter = BacklogCounter({"a": queue}, lambda: done)
    counter.count_now()
    tracker = EtaTracker({"a": queue}, lambda: done, counter=counter)
    assert tracker.sample().sources["a"].left == 3 and not tracker.latest().done
    queue.start()
    wait_until(lambda: queue.at_end and queue.buffered == 3, "the buffer to take the keys")
    items = queue.next_batch(3, "b1")
    queue.ack("b1")
    done["a"] = len(items)
    wait_until(lambda: queue.exhausted, "the source to run dry")
    report = tracker.sample()
    assert report.sources["a"].done and report.done and report.eta_s == 0.0
    queue.stop(timeout=5)


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_the_eta_follows_a_rate_halved_by_a_reload_within_20_percent(tmp_path: Path) -> None:
    rows = 24_000
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", rows)
    config = tmp_path / "sluice.yaml"
    text = """
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           page_size: 500, limits: {{max_rows_per_s: {rate}}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 2000, max_wait: 50ms}}
"""
    config.write_text(text.format(rate=3000))
    daemon = Daemon(load_config(config), config_path=str(config), sink=MemorySink())
    runner = threading.Thread(target=daemon.run, kwargs={"until_drained": True}, daemon=True)
    runner.start()
    readings: dict[float, float | None] = {}  # each sample's time and its ETA
    try:
        wait_until(lambda: daemon.loop is not None and daemon.loop.stats.rows >= 9_000,
                   "a third of the rows at 3,000 rows/s", poll=0.01)  # fmt: skip
        config.write_text(text.format(rate=1500))
        assert daemon.reload("the test halves the rate")
        reloaded = time.monotonic()
        assert daemon.loop is not None
        stats = daemon.loop.stats
        while stats.rows < rows and time.monotonic() < reloaded + 30:
            report = daemon.background.eta()
            if report is not None and report.at is not None:
                readings[report.at] = report.sources["orders"].eta_s
            runner.join(0.05)  # a look every 50 ms: the end is timed to within it
        ended = time.monotonic()
    finally:
        runner.join(30)
        daemon.close()
    assert stats.rows == rows and ended - reloaded < 30
    # Once the samples after the reload are in (one a second), every ETA is
    # within 20% of the time the run really took to end from its sample (the
    # last seconds left out, where one batch is a large part of what is left).
    judged = [(t, eta) for t, eta in readings.items() if reloaded + 2.0 <= t <= ended - 3.0]
    assert len(judged) >= 3, readings
    for t, eta in judged:
        real = ended - t
        assert eta is not None and abs(eta - real) <= 0.2 * real, (t - reloaded, eta, real)
    # Halved at 9,000 rows or more: 15,000 rows or fewer at 1,500 rows/s.
    assert 6.0 < ended - reloaded < 12.0


def test_a_backlog_count_is_not_a_slow_key_query_and_a_sweep_leaves_out_its_claimed_keys(
    tmp_path: Path,
) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 300)
    cfg = load_config_text(f"""
sources:
  walk: {{kind: sql, url: "sqlite:///{tmp_path / 'shop.db'}", table: orders, key: id,
         target: lake.o, limits: {{max_rows_per_s: 1000, max_query_latency: 500ms}}}}
  sweep: {{kind: sql, url: "sqlite:///{tmp_path / 'shop.db'}", table: orders, key: id,
          mode: sweep, where: "id > 0", target: lake.o}}
targets:
  lake: {{kind: parquet, path: ./lake}}
""", str(tmp_path / "sluice.yaml"))  # fmt: skip
    ticks = iter(range(10_000))
    budgets = Budgets(cfg, clock=lambda: float(next(ticks)))  # every query takes seconds
    budget = budgets.of("walk")
    assert budget is not None
    sources = {name: SqlSource(name, src, budget=budgets.of(name))  # type: ignore[arg-type]
               for name, src in cfg.sources.items()}  # fmt: skip
    queues = {name: QueueingLimitedSource(s, 1_000, 10) for name, s in sources.items()}
    counter = BacklogCounter(queues, dict, sweeps=frozenset({"sweep"}),
                             claimed=lambda: {"sweep": 40})  # fmt: skip
    try:
        counter.count_now()
        walk, sweep = counter.count("walk"), counter.count("sweep")
        assert walk is not None and sweep is not None
        assert (walk.left, sweep.left) == (300, 260)
        # Counted past max_query_latency, and still the whole rate.
        assert budget.factor == 1.0
        sources["walk"].backlog()  # the same count, as a key query: the rate halves
        assert budget.factor == 0.5
    finally:
        for source in sources.values():
            source.close()
