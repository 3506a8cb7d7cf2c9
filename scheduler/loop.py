"""The main loop: the critical path from buffers to the sink.

Each tick: ask the gate for room, let the strategy choose a source among
those with a batch ready, take the batch from that source's buffer (memory
only), claim it in the ledger, hand it to the sink, and otherwise wait on an
event until a batch completes or a refill lands. The loop never reads a source
or writes a target itself.

The loop runs the ticks and owns the stop; its parts do the work: a
:class:`~scheduler.throttle.Throttle` says how much may be fed (windows,
import slots, the backpressure gate), a :class:`~scheduler.feeder.Feeder`
feeds a batch (strategy, buffer, ledger claim), and
:class:`~scheduler.inflight.BatchesInFlight` holds the batches in the sink and
records how each ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from queue import Empty, SimpleQueue

from config.errors import LedgerError
from config.models import SluiceConfig
from config.sources import walks_ranges
from scheduler.batch_size import (
    BatchSizer,
    largest_batches,
    plan_every_range,
    plan_ranges,
    sample_widths,
)  # fmt: skip
from scheduler.collector import TickCollector
from scheduler.feeder import Feeder
from scheduler.final_pass import FinalPass
from scheduler.gate import BackpressureGate
from scheduler.inflight import BatchesInFlight
from scheduler.ledger import UNFINISHED, Checkpoint, Ledger
from scheduler.order import FirstPasses
from scheduler.probe import Probe
from scheduler.stats import RunStats
from scheduler.strategy import Node
from scheduler.throttle import Throttle
from scheduler.windows import Windows
from sinks.abc import Sink
from sources.budgets import Budgets
from sources.buffer import Stocked
from sources.queueing import QueueingLimitedSource
from spark_jobs.common.manifest import Manifest

log = logging.getLogger("sluice.loop")


class MainLoop:
    """Feeds batches from the buffers to the sink until stopped or drained."""

    def __init__(
        self,
        cfg: SluiceConfig,
        queues: Mapping[str, QueueingLimitedSource],
        strategy: Node,
        ledger: Ledger,
        sink: Sink,
        checkpoints: Mapping[str, Checkpoint],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        budgets: Budgets | None = None,
    ) -> None:
        self.cfg = cfg
        self.queues = dict(queues)
        self.stocked = watched(self.queues)
        self.ledger = ledger
        self.sink = sink
        self.checkpoints = dict(checkpoints)
        self.clock = clock
        self.stats = RunStats(sink_ready=lambda: self.sink.ready_at)
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._next_retry_check = 0.0
        self._last_poke: dict[str, float] = {}
        self._next_global_check = 0.0
        self._next_poke = 0.0
        self.until_drained = False  # set by run(until_drained=True) or drain_then_stop()
        self._final: FinalPass | None = None  # a cutover's (drain_then_stop)
        self._adopted: SimpleQueue[Manifest] = SimpleQueue()
        self._new_cfg: SluiceConfig | None = None
        self.fatal: BaseException | None = None
        self.collector = TickCollector()  # collects garbage between ticks while run() runs
        self.throttle = Throttle(cfg, sink, clock=clock, wall_clock=wall_clock)
        # Each source's batch size: batch.max_items, or adapting to batch.target_latency.
        # Ranges follow the latest size whatever order two sink threads' changes land in.
        self.sizes = BatchSizer(
            cfg.batch, on_change=lambda name, _size: plan_ranges(
                self.queues, self.cfg, name, self.sizes.size(name)),
            largest=largest_batches(cfg, self.queues, first=True),
        )
        sample_widths(lambda: self.cfg, self.queues, self.sizes)  # off the loop's thread
        plan_every_range(self.queues, cfg, self.sizes)
        self.inflight = BatchesInFlight(ledger, sink, self.queues, self.stats, cfg.retry, self.wake,
                                 die=self.die, halt=self._halt, budgets=budgets, sizes=self.sizes)
        self.feeder = Feeder(cfg, self.queues, strategy, ledger, sink, self.checkpoints,
                             throttle=self.throttle, inflight=self.inflight, stats=self.stats,
                             sizes=self.sizes, stocked=self.stocked,
                             order=FirstPasses(cfg, self.queues, ledger, clock))  # fmt: skip

    # -- the parts' state, where it was before they had objects of their own ------------

    @property
    def strategy(self) -> Node:
        """The strategy choosing the next source (replaced on a reload)."""
        return self.feeder.strategy

    @property
    def gate(self) -> BackpressureGate:
        """The backpressure gate (replaced on a reload, keeping its state)."""
        return self.throttle.gate

    @property
    def windows(self) -> Windows:
        """The feeding windows (replaced on a reload)."""
        return self.throttle.windows

    @property
    def probe(self) -> Probe | None:
        """The downstream's own pending work, if probed."""
        return self.throttle.probe

    @probe.setter
    def probe(self, probe: Probe | None) -> None:
        self.throttle.probe = probe

    @property
    def wall_clock(self) -> Callable[[], datetime]:
        """The clock the feeding windows are read on."""
        return self.throttle.wall_clock

    @wall_clock.setter
    def wall_clock(self, wall_clock: Callable[[], datetime]) -> None:
        self.throttle.wall_clock = wall_clock

    # -- control -----------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop feeding; in-flight batches are drained by :meth:`run`."""
        self._stopping.set()
        self.wake.set()

    def drain_then_stop(self) -> None:
        """Feed until every source is drained as of now, then stop (a cutover's final pass)."""
        self._final = FinalPass()  # before until_drained: the loop sees both
        self.until_drained = True
        self.wake.set()

    def notify(self) -> None:
        """Wake the loop (a refill landed, a batch finished)."""
        self.wake.set()

    def adopt(self, manifests: list[Manifest]) -> None:
        """Hand the loop batches taken over from a dead owner (thread-safe)."""
        for manifest in manifests:
            self._adopted.put(manifest)
        if manifests:
            self.wake.set()

    def reconfigure(self, cfg: SluiceConfig) -> None:
        """Use a new config (strategy, batch, backpressure, retry, windows) from the next tick."""
        self._new_cfg = cfg
        self.wake.set()

    def _apply_new_config(self) -> None:
        cfg, self._new_cfg = self._new_cfg, None
        if cfg is None:
            return
        self.cfg = cfg
        self.inflight.retry = cfg.retry
        self.feeder.reconfigure(cfg)
        self.throttle.reconfigure(cfg)
        self.sizes.configure(cfg.batch, largest_batches(cfg, self.queues))
        plan_every_range(self.queues, cfg, self.sizes)
        sample_widths(lambda: self.cfg, self.queues, self.sizes)  # those not sampled yet

    def die(self, error: BaseException) -> None:
        """A supervised part (the ledger writer) died: stop loudly."""
        self.fatal = error
        self.request_stop()

    def _halt(self, error: BaseException) -> None:
        """The ledger failed as a batch ended: stop, raising ``error`` once drained. Unlike
        :meth:`die` it does not wake the loop: the sink thread that calls it does, once it
        has let go of the batch."""
        self.fatal = error
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stopping.is_set()

    def run(self, *, until_drained: bool = False, drain_timeout: float | None = None) -> RunStats:
        """Feed until stopped (or, with ``until_drained``, until nothing is left)."""
        self.until_drained = self.until_drained or until_drained
        self._resume_unfinished()
        try:
            # Garbage is collected here, between ticks, so that no collection
            # (whichever thread would have set it off) lands inside a tick.
            with self.collector as collector:
                while not self._stopping.is_set():
                    self.wake.clear()
                    collector.between_ticks()
                    if self.fatal is not None:
                        break
                    self._apply_new_config()
                    self._retry_due()
                    self._take_adopted()
                    self.inflight.dispatch_waiting()
                    if self._feed_once():
                        continue
                    if self.until_drained and self._drained():
                        break
                    if self.clock() >= self._next_poke:  # a lock per buffer: not each tick
                        self._next_poke = self.clock() + STREAM_POLL
                        poke_exhausted(self.queues, self.cfg, self._last_poke, self.clock(),
                                       self.until_drained)  # fmt: skip
                    self.wake.wait(self._idle_timeout())
        except LedgerError as error:
            # The ledger is gone (for longer than the grace, or a stop came
            # while it was away): the batches in flight still finish their
            # imports, and their ends are not waited for in the ledger.
            self.ledger.patience.stop_waiting()
            self.fatal = self.fatal or error
        self.inflight.drain(drain_timeout)
        if self.fatal is not None:
            raise self.fatal
        return self.stats

    # -- feeding -----------------------------------------------------------------------

    def pending(self) -> int:
        """Items not yet done downstream: ours in flight plus what the probe reports."""
        return self.throttle.pending()

    def batch_size(self, source: str) -> int:
        """The number of items ``source``'s next batch may hold (status, metrics, the page).

        ``batch.max_items``, or less where it adapts (:mod:`scheduler.batch_size`)
        or where the source database's rate caps it (:mod:`sources.budget`).
        Safe to call from any thread: it reads plain values.
        """
        size = self.sizes.size(source)
        cap = self.inflight.batch_cap(source)
        return size if cap is None else min(size, cap)

    def _feed_once(self) -> bool:
        # One tick's feeding, a method of the loop's own so that a benchmark
        # can time it (benchmarks/bench_critical_path.py overrides it).
        return self.feeder.feed_once()

    def _retry_due(self) -> None:
        # The ledger is the truth about failed batches (``sluice retry`` and
        # other daemons change them too); a read at most once a second.
        if self.clock() < self._next_retry_check:
            return
        self._next_retry_check = self.clock() + min(1.0, self.cfg.retry.backoff)
        for manifest in self.ledger.reads.due_retries(self.queues, self.ledger.clock()):
            self.inflight.dispatch(manifest)

    def _resume_unfinished(self) -> None:
        """Re-run batches a previous run (or a dead daemon) claimed but did not finish."""
        for manifest in self.ledger.orphans(self.queues):
            log.info("resuming batch %s of %s", manifest.batch_id, manifest.source)
            self.inflight.dispatch(manifest)

    # -- idling ------------------------------------------------------------------------

    def _take_adopted(self) -> None:
        while True:
            try:
                manifest = self._adopted.get_nowait()
            except Empty:
                return
            if not self.inflight.holds(manifest.batch_id):
                log.warning("batch %s of %s: its owner's lease lapsed or the owner is gone; "
                            "trying to take it over", manifest.batch_id, manifest.source)
                self.inflight.dispatch(manifest)

    def _drained(self) -> bool:
        busy = self.inflight.busy()
        if busy or not all(q.exhausted for q in self.queues.values()):
            return False
        if self._final is not None and not self._final.read_all(self.queues):
            return False
        # Locally drained; other daemons on this ledger may still hold batches
        # (which the reaper hands to us if their owner dies).
        now = self.clock()
        if now < self._next_global_check:
            return False
        self._next_global_check = now + 0.5
        return not self.ledger.reads.batches(UNFINISHED + ("failed",), self.queues)

    def _idle_timeout(self) -> float:
        return idle_timeout([self.queues[n] for n in self.stocked()], self.cfg.batch.max_wait,
                            self.throttle.room(), self.inflight.budgets)


def watched(queues: Mapping[str, QueueingLimitedSource]) -> Callable[[], list[str]]:
    """Which of ``queues`` hold items, in their order (as a strategy would have seen them
    all), kept by the buffers (:class:`~sources.buffer.Stocked`): a tick looks at those,
    not at 1,000 small tables' mostly empty buffers (twice, to feed and to time its wait)."""
    stocked = Stocked()
    for queue in queues.values():
        queue.watch(stocked)
    position = {name: i for i, name in enumerate(queues)}
    return lambda: sorted((n for n in stocked.names() if n in position), key=position.__getitem__)


def idle_timeout(queues: Iterable[QueueingLimitedSource], max_wait: float, room: int,
                 budgets: Budgets | None) -> float:  # fmt: skip
    """Seconds the loop may sleep: until the item at the front of one of ``queues`` has
    waited ``max_wait``, a rate's bucket of ``budgets`` has refilled, or a second at most
    (a batch's end or a refill wakes it sooner)."""
    # Only buffers that hold something have an age (a lock each otherwise, every tick);
    # and none matters while there is no room: a batch's end wakes the loop.
    ages = [q.oldest_age() for q in queues if q.buffered] if room > 0 else []
    # A wait already over and not fed was held back by something else (no room, the
    # order, the sink's share): what frees it wakes the loop (a batch's end) or is looked
    # at within a second. Waking every 10 ms for it had the loop spin through 1,000
    # tables' buffers while 1,000 partial batches waited for import slots.
    waits = [w for w in (max_wait - age for age in ages if age is not None) if w > 0]
    rested = None if budgets is None else budgets.wait_s()
    if rested is not None:
        waits.append(rested)
    return max(0.01, min([1.0, *waits]))


STREAM_POLL = 0.2
"""Seconds between two reads of a stream source that was at its end (see :func:`poke_exhausted`)."""


def poke_exhausted(
    queues: Mapping[str, QueueingLimitedSource], cfg: SluiceConfig, last_poke: dict[str, float],
    now: float, draining: bool,
) -> None:  # fmt: skip
    """Ask drained sources again now and then: rows may have arrived.

    Draining asks them in rounds: none while any source's refill runs, and
    none while a source has rows left to walk (a change stream excepted: it
    is followed). Each source asked each second would keep a database of
    hundreds of tables from ever having all its sources drained at one
    moment; and 1,000 small tables drained one after the other, each asked
    again every second until the last was walked, made 4,500 key queries
    that took the turns of the tables still to walk on their database's
    few connections.
    """
    if draining:
        if any(q.refilling for q in queues.values()):
            return
        walking = any(not q.exhausted for name, q in queues.items() if not _streamed(cfg, name))
        # A keyset walk's end is final for a draining run (rows written since are the next
        # run's, or a cutover's final pass): 1,000 tables asked again while the last
        # batches imported held the run ~2.5 s past them.
        queues = {n: q for n, q in queues.items()
                  if _streamed(cfg, n) or not (walking or walks_ranges(cfg.sources[n]))}
    for name, queue in queues.items():
        if not queue.exhausted:
            continue
        src_cfg = cfg.sources[name]
        # Draining re-checks each second; a daemon waits a source's sweep pause.
        pause = 1.0 if draining else getattr(src_cfg, "sweep_pause", 1.0)
        if _streamed(cfg, name):
            pause = STREAM_POLL  # a change stream is followed, not swept
        if now - last_poke.get(name, 0.0) >= pause:
            last_poke[name] = now
            queue.poke()


def _streamed(cfg: SluiceConfig, name: str) -> bool:
    return getattr(cfg.sources[name], "mode", None) == "stream"
