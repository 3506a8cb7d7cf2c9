"""The main loop with in-memory sources and sink and a real SQLite ledger."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from config.loader import load_config_text
from config.models import SluiceConfig, SqlSourceConfig
from scheduler import stats as stats_module
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop, RunStats, poke_exhausted
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sources.abc import MemorySource
from sources.queueing import QueueingLimitedSource
from spark_jobs.common.manifest import Manifest
from spark_jobs.tasks.session import SparkUnavailable
from tests.helpers import FakeClock, WatchedSink, wait_until

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders,
            buffer: {{capacity: 400, replenish_below: 100}}}}
  customers: {{kind: sql, url: "sqlite:///c.db", table: customers, key: id,
               target: lake.customers, buffer: {{capacity: 400, replenish_below: 100}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
strategy: {{fair: {{orders: 2, customers: 1}}}}
batch: {{max_items: 50, max_wait: 50ms}}
backpressure: {{max_pending: 150, resume_below: 60, max_importing_batches: 3}}
retry: {{max_attempts: {attempts}, backoff: 10ms, max_backoff: 20ms}}
"""


def build(
    tmp_path: Path, sink: MemorySink, rows: dict[str, int], attempts: int = 3, first_key: int = 1
) -> tuple[MainLoop, Ledger, SluiceConfig]:
    cfg = load_config_text(CONFIG.format(attempts=attempts), str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    # A live owner, as a daemon registers at its start: otherwise another loop
    # on this ledger would take its batches for a dead owner's and run them too.
    ledger.owners.register()
    checkpoints = {
        name: ledger.sources.register(name, fingerprint(src)) for name, src in cfg.sources.items()
    }
    holder: dict[str, MainLoop] = {}
    queues = {
        name: QueueingLimitedSource(
            MemorySource(name, [(k,) for k in range(first_key, rows[name] + 1)]),
            src.buffer.capacity, src.buffer.replenish_below,
            on_refill=lambda: holder["loop"].notify() if "loop" in holder else None,
        )
        for name, src in cfg.sources.items()
    }
    loop = MainLoop(cfg, queues, build_strategy(cfg), ledger, sink, checkpoints)
    holder["loop"] = loop
    for queue in queues.values():
        queue.start()
    return loop, ledger, cfg


def covered(manifests: list[Manifest]) -> Counter:
    """How often each key falls inside a claimed range."""
    keys: Counter = Counter()
    for m in manifests:
        lo = m.lo[0] if m.lo else 0
        keys.update(range(lo + 1, m.hi[0] + 1))  # type: ignore[index]
    return keys


@pytest.mark.timeout(30)
def test_every_key_lands_in_exactly_one_batch(tmp_path: Path) -> None:
    sink = MemorySink()
    loop, ledger, cfg = build(tmp_path, sink, {"orders": 1_000, "customers": 700})
    stats = loop.run(until_drained=True)

    for source, total in (("orders", 1_000), ("customers", 700)):
        manifests = [m for m in sink.submitted if m.source == source]
        assert covered(manifests) == Counter(range(1, total + 1))
        assert all(m.items <= cfg.batch.max_items for m in manifests)
    assert stats.rows_by_source == {"orders": 1_000, "customers": 700}
    states = {p.source: p.states for p in ledger.reads.progress()}
    assert states["orders"] == {"done": len([m for m in sink.submitted if m.source == "orders"])}


@pytest.mark.timeout(30)
def test_shares_follow_weights_while_both_have_items(tmp_path: Path) -> None:
    sink = MemorySink()
    loop, _, _ = build(tmp_path, sink, {"orders": 2_000, "customers": 2_000})
    # Both buffers hold items before the first tick: on a busy machine one
    # source's first refill may land late, and the other alone is fed meanwhile.
    deadline = time.monotonic() + 20
    while not all(q.buffered for q in loop.queues.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.run(until_drained=True)
    # While both sources had items the strategy fed them 2:1.
    first = sink.submitted[:30]
    fed = Counter()
    for m in first:
        fed[m.source] += m.items
    assert fed["orders"] / fed["customers"] == pytest.approx(2.0, rel=0.15)


@pytest.mark.timeout(30)
def test_pending_never_exceeds_max_pending(tmp_path: Path) -> None:
    sink = MemorySink(auto_complete=False)
    loop, _, cfg = build(tmp_path, sink, {"orders": 600, "customers": 300})
    peak = [0]
    done = threading.Event()

    def downstream() -> None:
        # Completes the oldest batch whenever the loop has filled the gate.
        while not done.is_set():
            held = sink.held()
            peak[0] = max(peak[0], sink.pending_items())
            drained = all(q.exhausted for q in loop.queues.values())
            if held and (sink.pending_items() >= 60 or drained):
                sink.complete(held[0])
            else:
                loop.wake.wait(0.005)

    worker = threading.Thread(target=downstream, daemon=True)
    worker.start()
    stats = loop.run(until_drained=True)
    done.set()
    worker.join(timeout=5)
    assert peak[0] <= cfg.backpressure.max_pending
    assert stats.rows == 900


@pytest.mark.timeout(30)
def test_failed_batches_are_retried_then_dead(tmp_path: Path) -> None:
    class FailFirstAttempt(MemorySink):
        def submit(self, manifest: Manifest):  # type: ignore[no-untyped-def]
            if manifest.token == 1:
                self.fail(manifest.batch_id)
            return super().submit(manifest)

    sink = FailFirstAttempt()
    loop, ledger, _ = build(tmp_path, sink, {"orders": 200, "customers": 100})
    stats = loop.run(until_drained=True)
    assert stats.rows == 300 and stats.batches_failed == stats.batches_done
    assert all(p.states == {"done": p.states["done"]} for p in ledger.reads.progress())

    class AlwaysFail(MemorySink):
        def submit(self, manifest: Manifest):  # type: ignore[no-untyped-def]
            self.fail(manifest.batch_id, ValueError("column amount: value too long"))
            return super().submit(manifest)

    dead_path = tmp_path / "dead"
    dead_path.mkdir()
    loop, ledger, _ = build(dead_path, AlwaysFail(), {"orders": 100, "customers": 0}, attempts=2)
    stats = loop.run(until_drained=True)
    [orders] = [p for p in ledger.reads.progress() if p.source == "orders"]
    assert stats.batches_dead == 2 and orders.states == {"dead": 2}
    assert orders.last_error == "column amount: value too long"


@pytest.mark.timeout(30)
def test_a_sink_that_cannot_start_stops_the_run_at_once(tmp_path: Path) -> None:
    class NoJvm(MemorySink):
        def submit(self, manifest: Manifest):  # type: ignore[no-untyped-def]
            self.fail(manifest.batch_id, SparkUnavailable("Spark could not start its JVM"))
            return super().submit(manifest)

    loop, ledger, _ = build(tmp_path, NoJvm(), {"orders": 200, "customers": 100}, attempts=1)
    with pytest.raises(SparkUnavailable, match="could not start"):
        loop.run(until_drained=True)
    # Not every batch into backoff and then dead (with one attempt allowed):
    # they wait, without an attempt spent, for a run whose Spark starts.
    progress = ledger.reads.progress()
    states = Counter(s for p in progress for s, n in p.states.items() for _ in range(n))
    assert "dead" not in states and states["failed"] >= 1


def _crashed_batch(tmp_path: Path) -> None:
    """What a crashed run leaves behind: batch ``crashed``, keys 1..40 claimed and importing."""
    cfg = load_config_text(CONFIG.format(attempts=3), str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoint = ledger.sources.register("orders", fingerprint(cfg.sources["orders"]))
    ledger.claim_range("crashed", "orders", "lake.orders", checkpoint, [40], 40)
    ledger.begin("crashed")


def test_unfinished_batches_are_resumed(tmp_path: Path) -> None:
    _crashed_batch(tmp_path)
    sink = MemorySink()
    loop, ledger, _ = build(tmp_path, sink, {"orders": 100, "customers": 0}, first_key=41)
    loop.run(until_drained=True)
    assert ledger.reads.state_of("crashed") == "done"
    assert covered(sink.submitted) == Counter(range(1, 101))


def test_a_run_of_resumed_batches_only_measures_its_rate_from_the_first(tmp_path: Path) -> None:
    # Everything left was claimed by a crashed run: nothing new is fed.
    _crashed_batch(tmp_path)
    loop, ledger, _ = build(tmp_path, MemorySink(), {"orders": 40, "customers": 0}, first_key=41)
    before = time.monotonic()
    stats = loop.run(until_drained=True)
    assert ledger.reads.state_of("crashed") == "done"
    # The resumed batch was the run's first: the rate runs from it, not from nothing.
    assert stats.first_batch_at is not None and stats.first_batch_at >= before
    assert 0.0 < stats.moving() < time.monotonic() - before + 1.0


@pytest.mark.timeout(60)
def test_two_loops_walking_one_table_claim_each_key_once(tmp_path: Path) -> None:
    sinks = [MemorySink(), MemorySink()]
    loops = [build(tmp_path, sink, {"orders": 3_000, "customers": 0})[0] for sink in sinks]
    runners = [
        threading.Thread(target=loop.run, kwargs={"until_drained": True}) for loop in loops
    ]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(timeout=50)
        assert not runner.is_alive()
    manifests = [m for sink in sinks for m in sink.submitted if m.source == "orders"]
    assert covered(manifests) == Counter(range(1, 3_001))  # no key twice, none missing


@pytest.mark.timeout(30)
def test_the_last_rows_of_a_source_are_split_among_parallel_imports(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.parallel = 2
    loop, _, cfg = build(tmp_path, sink, {"orders": 130, "customers": 0})
    loop.run(until_drained=True)

    sizes = [m.items for m in sink.submitted if m.source == "orders"]
    # 130 rows at the end, batches of 50: 50, then half of what is left each
    # time, down to a quarter of a batch; not 50, 50 and a last 30 alone.
    assert sizes == [50, 40, 20, 12, 8]
    assert covered([m for m in sink.submitted if m.source == "orders"]) == Counter(range(1, 131))


@pytest.mark.timeout(30)
def test_a_slot_that_frees_beside_a_full_batch_takes_a_matching_share(tmp_path: Path) -> None:
    """100 rows, batches of 50, two slots, nothing finishing: the second
    batch takes 38 (the 50 buffered plus half the 50 importing, shared by
    two), not 25, which would leave the first batch running on alone."""
    sink = WatchedSink(auto_complete=False)
    sink.parallel = 2
    loop, _, _ = build(tmp_path, sink, {"orders": 100, "customers": 0})
    queue = loop.queues["orders"]
    # The walk's end known before the first batch; each refill wakes the loop,
    # which is not running yet: its event is the test's to wait on.
    wait_until(lambda: queue.at_end and not queue.refilling, "the walk's end", event=loop.wake)
    runner = threading.Thread(target=loop.run, kwargs={"until_drained": True})
    runner.start()
    try:
        # As many as may import at once: none finishes.
        wait_until(lambda: len(sink.held()) >= 3, "three batches importing", event=sink.arrived)
        sizes = [m.items for m in sink.submitted if m.source == "orders"]
        assert sizes == [50, 38, 12]
    finally:
        while runner.is_alive():
            for batch_id in sink.held():
                sink.complete(batch_id)
            runner.join(timeout=0.05)
    assert covered([m for m in sink.submitted if m.source == "orders"]) == Counter(range(1, 101))


def test_rates_run_from_when_the_first_batch_could_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches fed while the sink (the JVM) was still starting waited: the
    rates count from the sink's start, not from their feeding."""
    clock = FakeClock(1000.0)  # RunStats reads time.monotonic: its module's is this clock
    monkeypatch.setattr(stats_module, "time", SimpleNamespace(monotonic=clock))
    ready: list[float | None] = [None]
    stats = RunStats(sink_ready=lambda: ready[0])
    stats.first_batch_at = clock.now - 100  # fed 100 s ago
    assert stats.moving() == 0.0  # the sink is still starting: nothing moves yet
    ready[0] = clock.now - 10  # ready 10 s ago
    assert stats.moving() == 10
    ready[0] = 0.0  # a sink ready from the start: from the feeding on
    assert stats.moving() == 100


def test_draining_asks_drained_sources_again_in_rounds() -> None:
    # Hundreds of tables' key queries take turns on a few connections: asked
    # each on its own second, some would always be refilling and the run
    # would never see them all drained at once.
    pokes: list[str] = []

    def queue(name: str, exhausted: bool, refilling: bool) -> SimpleNamespace:
        return SimpleNamespace(exhausted=exhausted, refilling=refilling,
                               poke=lambda: pokes.append(name))  # fmt: skip

    queues = {"a": queue("a", True, False), "b": queue("b", True, False),
              "c": queue("c", False, True)}  # fmt: skip
    cfg = SimpleNamespace(sources={n: SimpleNamespace(sweep_pause=30.0) for n in queues})
    last: dict[str, float] = {}
    poke_exhausted(queues, cfg, last, 10.0, draining=True)  # type: ignore[arg-type]
    assert pokes == []  # c's refill runs: the round waits for it
    queues["c"].refilling = False
    poke_exhausted(queues, cfg, last, 10.5, draining=True)  # type: ignore[arg-type]
    # c has rows left to walk: the round waits for it too (1,000 small tables drained
    # one after the other were each asked again every second until the last was walked).
    assert pokes == []
    queues["c"].exhausted = True
    poke_exhausted(queues, cfg, last, 11.0, draining=True)  # type: ignore[arg-type]
    assert pokes == ["a", "b", "c"]
    queues["a"].refilling = True
    poke_exhausted(queues, cfg, last, 12.5, draining=True)  # type: ignore[arg-type]
    assert pokes == ["a", "b", "c"]
    # A daemon that is not draining asks each after its own pause, whatever runs.
    queues["c"].exhausted = False
    poke_exhausted(queues, cfg, last, 41.5, draining=False)  # type: ignore[arg-type]
    assert pokes == ["a", "b", "c", "a", "b"]


def test_a_draining_run_does_not_ask_a_walked_table_again() -> None:
    # A keyset walk's end is final for a draining run: the last batches of 1,000 tables
    # importing, a round of 1,000 key queries held the run past them.
    pokes: list[str] = []
    cfg = SimpleNamespace(sources={
        "orders": SqlSourceConfig(kind="sql", url="sqlite://", table="orders", key="id",
                                  target="wh.orders"),
        "events": SqlSourceConfig(kind="sql", url="sqlite://", table="events", key="id",
                                  target="wh.events", mode="sweep"),
    })  # fmt: skip
    queues = {name: SimpleNamespace(exhausted=True, refilling=False,
                                    poke=lambda name=name: pokes.append(name))
              for name in cfg.sources}  # fmt: skip
    poke_exhausted(queues, cfg, {}, 10.0, draining=True)  # type: ignore[arg-type]
    assert pokes == ["events"]
    poke_exhausted(queues, cfg, {}, 1e6, draining=False)  # type: ignore[arg-type]
    assert pokes == ["events", "orders", "events"]  # a daemon asks it after its pause


def test_a_draining_stream_is_followed_while_tables_are_still_walked() -> None:
    pokes: list[str] = []
    queues = {name: SimpleNamespace(exhausted=name != "walk", refilling=False,
                                    poke=lambda name=name: pokes.append(name))
              for name in ("walk", "done", "changes")}  # fmt: skip
    cfg = SimpleNamespace(sources={"walk": SimpleNamespace(), "done": SimpleNamespace(),
                                   "changes": SimpleNamespace(mode="stream")})  # fmt: skip
    poke_exhausted(queues, cfg, {}, 10.0, draining=True)  # type: ignore[arg-type]
    assert pokes == ["changes"]


def test_a_progress_line_names_a_few_sources_first_those_not_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from scheduler.observe.eta import EtaReport, SourceEta
    from scheduler.observe.progress import LISTED, LogProgress

    names = [f"shop.t{i:03}" for i in range(LISTED + 5)]
    queues = {n: SimpleNamespace(buffered=0) for n in names}
    done = set(names[:6])  # the first tables are done
    eta = EtaReport(sources={n: SourceEta(n, 0 if n in done else 10, 1.0,
                                          0.0 if n in done else 10.0, n in done)
                             for n in names})  # fmt: skip
    stats = RunStats(rows_by_source={n: 5 for n in names})
    with caplog.at_level("INFO", logger="sluice.progress"):
        LogProgress()(stats, queues, eta)  # type: ignore[arg-type]
    [line] = [r.getMessage() for r in caplog.records]
    named = [n for n in names if f"{n} " in line]
    assert len(named) == LISTED and set(names) - done <= set(named)  # every one not done
    assert f"{len(names) - LISTED} more ({len(names) - LISTED} done)" in line
