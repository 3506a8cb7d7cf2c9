"""Adaptive batch size: a source's batches sized so that its imports take ``batch.target_latency``.

The controller is checked on simulated imports (pure and fast); the whole
path on a real PostgreSQL target whose table slows down mid-run (a trigger
that sleeps for each row, as long as a knob table says), imported by Spark.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.errors import ConfigError
from config.loader import load_config_text
from config.models import BatchConfig, SqlSourceConfig
from config.settings import BATCH_BYTES, KEY_RANGE
from scheduler.batch_size import SLACK, BatchSizer, range_bytes, range_rows
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sinks.spark import SparkSink
from sources.abc import MemorySource
from sources.queueing import QueueingLimitedSource
from tests.helpers import assert_same_rows, seed_orders, wait_until, write_config


def _imports(sizer: BatchSizer, seconds_per_row: float, fixed: float, n: int) -> list[float]:
    """``n`` imports of one source, one after the other, at a pace; their latencies."""
    latencies = []
    for _ in range(n):
        items = sizer.size("a")
        latency = fixed + items * seconds_per_row
        sizer.observe("a", items, latency)
        latencies.append(latency)
    return latencies


def test_without_a_target_every_batch_may_hold_max_items() -> None:
    sizer = BatchSizer(BatchConfig(max_items=1000))
    sizer.observe("a", 1000, 60.0)
    sizer.observe("a", 1000, None, ok=False)
    assert sizer.size("a") == 1000 and not sizer.adaptive


def test_keyset_ranges_are_sluices_size_unless_the_config_sets_a_page_or_a_batch() -> None:
    def loaded(source: str, batch: str = "") -> tuple[int, int | None]:
        cfg = load_config_text(f"""
ledger: sqlite:///l.db
sources:
  s: {{kind: sql, url: "sqlite:///s.db", table: t, key: id, target: w.t{source}}}
targets:
  w: {{kind: jdbc, url: "sqlite:///w.db"}}
{batch}""")
        src = cfg.sources["s"]
        assert isinstance(src, SqlSourceConfig)
        return range_rows(src, cfg), range_bytes(src, cfg)

    assert loaded("") == (KEY_RANGE, BATCH_BYTES)
    assert loaded(", page_size: 5000") == (5000, None)
    assert loaded("", "batch: {max_items: 100000}") == (100000, None)
    assert loaded("", "batch: {max_items: 1000000}") == (KEY_RANGE, None)


def test_a_slowdown_cuts_the_size_to_what_fits_and_its_end_wins_it_back() -> None:
    sizer = BatchSizer(BatchConfig(max_items=2000, min_items=50, target_latency=1.0))
    fast = _imports(sizer, 0.0001, 0.2, 5)
    assert sizer.size("a") == 2000 and max(fast) < 1.0  # fast enough at the most

    # Ten times slower per row: the size falls, at most halving per import.
    sizes = [sizer.size("a")]
    slow = []
    for _ in range(12):
        slow += _imports(sizer, 0.005, 0.2, 1)
        sizes.append(sizer.size("a"))
    assert all(b >= a // 2 for a, b in zip(sizes, sizes[1:], strict=False))
    assert sizes[-1] < 300
    settled = slow[-6:]
    assert all(1.0 / SLACK <= s <= 1.0 * SLACK for s in settled), settled
    assert sizes[-6:] == [sizes[-1]] * 6  # it rests once right

    # Fast again: additive steps (a sixteenth of max_items) back to the most.
    before = sizer.size("a")
    _imports(sizer, 0.0001, 0.2, 1)
    assert sizer.size("a") == before + 2000 // 16
    _imports(sizer, 0.0001, 0.2, 20)
    assert sizer.size("a") == 2000


def test_a_late_report_of_a_batch_planned_before_the_cut_does_not_cut_again() -> None:
    sizer = BatchSizer(BatchConfig(max_items=1000, min_items=10, target_latency=1.0))
    sizer.observe("a", 1000, 4.0)  # 250 would have fit: halved
    sizer.observe("a", 1000, 4.0)  # a batch in flight beside it, as slow: no second cut
    assert sizer.size("a") == 500
    sizer.observe("a", 500, 2.0)  # a batch of the new size, still slow: down to what fits
    assert sizer.size("a") == 250
    sizer.observe("a", 1000, 4.0)  # another batch of the old size, as slow
    assert sizer.size("a") == 250
    sizer.observe("b", 1000, 0.1)
    assert sizer.size("b") == 1000  # each source on its own


def test_failures_halve_the_size_down_to_min_items() -> None:
    sizer = BatchSizer(BatchConfig(max_items=1000, min_items=300, target_latency=5.0))
    sizer.observe("a", 1000, None, ok=False)
    assert sizer.size("a") == 500
    sizer.observe("a", 500, None, ok=False)
    assert sizer.size("a") == 300


def test_a_reload_keeps_sizes_within_the_new_bounds_and_no_target_ends_adapting() -> None:
    planned: list[tuple[str, int]] = []
    sizer = BatchSizer(
        BatchConfig(max_items=1000, min_items=10, target_latency=1.0),
        on_change=lambda source, size: planned.append((source, size)),
    )
    sizer.observe("a", 1000, 10.0)
    assert planned == [("a", 500)]
    sizer.configure(BatchConfig(max_items=400, min_items=10, target_latency=1.0))
    assert sizer.size("a") == 400 and planned[-1] == ("a", 400)
    sizer.observe("a", 400, 4.0)
    sizer.configure(BatchConfig(max_items=400))
    assert sizer.size("a") == 400 and not sizer.adaptive and planned[-1] == ("a", 400)


def test_a_big_change_is_logged_once_not_every_batch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sluice.loop")
    sizer = BatchSizer(BatchConfig(max_items=1000, min_items=10, target_latency=1.0))
    sizer.observe("a", 1000, 1.5)  # 1000 -> 666: noteworthy
    sizer.observe("a", 666, 1.3)  # 666 -> 512: not yet, from the size last logged
    lines = [r.getMessage() for r in caplog.records if "batches of" in r.getMessage()]
    assert lines == [
        "source a: batches of 666 rows, from 1000 (a batch of 1000 took 1.50 s; target 1 s)"
    ]


def test_min_items_above_max_items_is_a_config_error() -> None:
    base = (
        "sources: {o: {kind: sql, url: 'sqlite:///o.db', table: t, key: id, target: l.t}}\n"
        "targets: {l: {kind: parquet, path: ./l}}\n"
    )
    with pytest.raises(ConfigError, match=r"min_items \(600\) must not exceed max_items \(500\)"):
        load_config_text(base + "batch: {max_items: 500, min_items: 600}\n", "s.yaml")
    small = load_config_text(base + "batch: {max_items: 50}\n", "s.yaml").batch
    assert (small.min_items, small.target_latency) == (50, None)  # the default follows it


@pytest.mark.timeout(30)
def test_the_loop_feeds_batches_of_the_adapted_size(tmp_path: Path) -> None:
    cfg = load_config_text("""
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders,
           buffer: {capacity: 400, replenish_below: 200}}
targets: {lake: {kind: parquet, path: ./lake}}
batch: {max_items: 100, min_items: 10, max_wait: 20ms, target_latency: 1s}
""", str(tmp_path / "sluice.yaml"))  # fmt: skip
    ledger = Ledger(cfg.ledger)
    ledger.owners.register()
    checkpoints = {"orders": ledger.sources.register("orders", fingerprint(cfg.sources["orders"]))}
    queue = QueueingLimitedSource(MemorySource("orders", [(k,) for k in range(1, 1001)]), 400, 200)
    sink = MemorySink()  # says nothing of how long an import took: sizes as the test sets them
    loop = MainLoop(cfg, {"orders": queue}, build_strategy(cfg), ledger, sink, checkpoints)
    loop.sizes.observe("orders", 100, 4.0)
    loop.sizes.observe("orders", 50, 2.0)
    assert loop.batch_size("orders") == 25
    queue.start()
    try:
        loop.run(until_drained=True)
        assert {m.items for m in sink.submitted} == {25}
        assert sum(m.items for m in sink.submitted) == 1000
        # A reload without a target: batches of max_items again, from the next tick.
        loop.reconfigure(cfg.model_copy(update={"batch": BatchConfig(max_items=100)}))
        loop.run(until_drained=True)
        assert loop.batch_size("orders") == 100
    finally:
        queue.stop(timeout=5)
        ledger.close()


@dataclass(frozen=True)
class Seen:
    """One batch's end as the sizer saw it, with its size before and after."""

    items: int
    seconds: float | None
    before: int
    after: int


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Seen]]:
    """Every batch end the sizers of this test are told of, in order."""
    ends: list[Seen] = []
    lock = threading.Lock()
    observe = BatchSizer.observe

    def recorded(
        self: BatchSizer, source: str, items: int, seconds: float | None, *, ok: bool = True
    ) -> None:
        with lock:  # before and after of this end, not of another sink thread's
            before = self.size(source)
            observe(self, source, items, seconds, ok=ok)
            ends.append(Seen(items, seconds, before, self.size(source)))

    monkeypatch.setattr(BatchSizer, "observe", recorded)
    yield ends


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(180)
def test_a_target_that_slows_down_gets_smaller_batches_until_it_is_fast_again(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_factory, spark, seen: list[Seen]
) -> None:
    rows, target_latency, delay = 12_000, 1.0, 0.005
    source = pg_factory.create("adaptive_src")
    seed_orders(source, rows)
    warehouse = pg_factory.create("adaptive_dst")
    admin = sa.create_engine(warehouse, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        # The target's table as sluice would create it, with a trigger that
        # sleeps for every row as long as the knob says.
        conn.execute(sa.text(
            "CREATE TABLE orders (id integer PRIMARY KEY, customer varchar(60), "
            "amount numeric(12, 2) NOT NULL, flag smallint NOT NULL, placed_at timestamp)"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE knob (delay float NOT NULL)"))
        conn.execute(sa.text("INSERT INTO knob VALUES (0)"))
        conn.execute(sa.text(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep((SELECT delay FROM knob)); RETURN NEW; END $$"
        ))  # fmt: skip
        conn.execute(sa.text(
            "CREATE TRIGGER slow BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION slow()"
        ))  # fmt: skip

    def turn_knob(seconds: float) -> None:
        with admin.connect() as conn:
            conn.execute(sa.text("UPDATE knob SET delay = :d"), {"d": seconds})

    # Ranges are planned at the batch size (page_size is larger). Four
    # batches in flight, two importing: those waiting for a slot together
    # share a Spark job, each timed by its own task. The buffer holds no
    # more than that, so that few batches planned before a change are still
    # to come after it.
    path, cfg = write_config(
        tmp_path,
        f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: '{source}', table: orders, key: id, target: wh.orders,
           buffer: {{capacity: 2400, replenish_below: 1200}}}}
targets:
  wh: {{kind: jdbc, url: '{warehouse}'}}
batch: {{max_items: 600, min_items: 20, max_wait: 50ms, target_latency: {target_latency}s}}
backpressure: {{max_pending: 2400, resume_below: 1800, max_importing_batches: 4}}
spark: {{master: "local[2]", max_concurrent_imports: 2}}
""",
    )
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(summary=daemon.run(until_drained=True)))
    runner.start()

    def size() -> int:
        return 0 if daemon.loop is None else daemon.loop.batch_size("orders")

    try:
        wait_until(lambda: len(seen) >= 2 and size() == 600, "fast imports at the most", timeout=90)
        turn_knob(delay)
        slowed = len(seen)
        wait_until(lambda: size() <= 300, "the batch size to fall")
        # Settled: six ends in a row that did not cut the size.
        wait_until(
            lambda: len(seen) >= slowed + 6 and all(s.after >= s.before for s in seen[-6:]),
            "the size to settle",
        )
        start = len(seen)
        wait_until(lambda: len(seen) >= start + 10, "ten imports once settled")
        settled = seen[start : start + 10]
        low = size()
        # The range planner follows: new ranges hold as many rows as a batch.
        wait_until(
            lambda: daemon.queues["orders"].wrapped.range_rows == size(),  # type: ignore[attr-defined]
            "ranges of the batch size",
        )
        turn_knob(0)
        wait_until(lambda: size() >= min(600, 2 * low), "the batch size to rise again")
        runner.join(120)
    finally:
        if daemon.loop is not None and runner.is_alive():
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()
        turn_knob(0)
        admin.dispose()
    report = [(s.items, round(s.seconds or 0, 2)) for s in seen]
    assert low < 300 and all(s.seconds is not None for s in settled), report
    median = statistics.median(s.seconds or 0.0 for s in settled)
    assert abs(median - target_latency) <= 0.3 * target_latency, (median, report)
    # Every row once: the run drained, and the target holds the source's rows.
    assert "summary" in outcome and outcome["summary"].exit_code == 0, outcome
    assert assert_same_rows(source, "orders", warehouse, "orders") == rows
