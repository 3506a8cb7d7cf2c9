"""The main loop: the critical path from buffers to the sink.

Each tick: ask the gate for room, let the strategy choose a source among
those with a batch ready, take the batch from that source's buffer (memory
only), claim it in the ledger, hand it to the sink, and otherwise wait on an
event until a batch completes or a refill lands. The loop never reads a source
or writes a target itself.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from queue import Empty, SimpleQueue
from typing import Any

from config.errors import ClaimConflict, SinkUnavailable
from config.faults import crash_point
from config.models import SluiceConfig
from scheduler.collector import TickCollector
from scheduler.gate import BackpressureGate
from scheduler.ledger import UNFINISHED, Checkpoint, Ledger
from scheduler.probe import Probe
from scheduler.strategy import Node, build_strategy
from scheduler.windows import Windows
from sinks.abc import Sink
from sources.abc import Item
from sources.queueing import QueueingLimitedSource
from spark_jobs.import_job import ImportResult
from spark_jobs.manifest import Manifest

log = logging.getLogger("sluice.loop")


@dataclass
class RunStats:
    """What a run did, for the summary and the progress display."""

    started: float = field(default_factory=time.monotonic)
    first_batch_at: float | None = None  # monotonic time the first batch was fed
    # When the sink could first run an import (its Sink.ready_at; None: still starting).
    sink_ready: Callable[[], float | None] = field(default=lambda: 0.0, repr=False)
    items: dict[str, int] = field(default_factory=dict)
    rows_by_source: dict[str, int] = field(default_factory=dict)
    rows_by_target: dict[str, int] = field(default_factory=dict)
    batches_done: int = 0
    batches_failed: int = 0
    batches_dead: int = 0
    rows_rejected: int = 0

    @property
    def rows(self) -> int:
        """Rows written to targets so far."""
        return sum(self.rows_by_source.values())

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def moving(self) -> float:
        """Seconds since the first batch could import (0 before): what rates are measured over.

        That is since it was fed, or since the sink got ready when it was fed
        before (the first batches wait for the JVM's start). Start-up (the
        JVM, the sources' checks) is not migration time: a rate over it would
        understate the speed of every run.
        """
        ready = self.sink_ready()
        if self.first_batch_at is None or ready is None:
            return 0.0
        return time.monotonic() - max(self.first_batch_at, ready)


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
    ) -> None:
        self.cfg = cfg
        self.queues = dict(queues)
        self.strategy = strategy
        self.ledger = ledger
        self.sink = sink
        self.gate = BackpressureGate.from_config(cfg.backpressure)
        self.checkpoints = dict(checkpoints)
        self.clock = clock
        self.stats = RunStats(sink_ready=lambda: self.sink.ready_at)
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._inflight: dict[str, Manifest] = {}
        self._next_retry_check = 0.0
        self._last_poke: dict[str, float] = {}
        self._next_global_check = 0.0
        self._adopted: SimpleQueue[Manifest] = SimpleQueue()
        self._new_cfg: SluiceConfig | None = None
        self.probe: Probe | None = None  # the downstream's own pending work, if probed
        self.windows = Windows(cfg.windows)
        self.wall_clock = wall_clock
        self._window_open = True
        self._next_window_check = 0.0
        self.fatal: BaseException | None = None
        self.collector = TickCollector()  # collects garbage between ticks while run() runs

    # -- control -----------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop feeding; in-flight batches are drained by :meth:`run`."""
        self._stopping.set()
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
        self.strategy = build_strategy(cfg)
        was_open = self.gate.is_open
        self.gate = BackpressureGate.from_config(cfg.backpressure)
        self.gate.is_open = was_open
        self.windows = Windows(cfg.windows)
        self._next_window_check = 0.0

    def die(self, error: BaseException) -> None:
        """A supervised part (the ledger writer) died: stop loudly."""
        self.fatal = error
        self.request_stop()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stopping.is_set()

    def run(self, *, until_drained: bool = False, drain_timeout: float | None = None) -> RunStats:
        """Feed until stopped (or, with ``until_drained``, until nothing is left)."""
        self._resume_unfinished()
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
                if self._feed_once():
                    continue
                if until_drained and self._drained():
                    break
                self._poke_exhausted(until_drained)
                self.wake.wait(self._idle_timeout())
        self._drain(drain_timeout)
        if self.fatal is not None:
            raise self.fatal
        return self.stats

    # -- feeding -----------------------------------------------------------------------

    def pending(self) -> int:
        """Items not yet done downstream: ours in flight plus what the probe reports."""
        probed = self.probe.value() if self.probe is not None else 0
        return self.sink.pending_items() + probed

    def _in_window(self) -> bool:
        now = self.clock()
        if now >= self._next_window_check:
            self._next_window_check = now + 1.0
            was_open, self._window_open = self._window_open, self.windows.is_open(self.wall_clock())
            if was_open != self._window_open:
                log.info("feeding %s (windows: %s)",
                         "resumes" if self._window_open else "pauses", self.windows.expressions)
        return self._window_open

    def _feed_once(self) -> bool:
        if not self._in_window():
            return False
        if self.sink.in_flight() >= self.cfg.backpressure.max_importing_batches:
            return False
        room = self.gate.room(self.pending())
        if room <= 0:
            return False
        want = min(self.cfg.batch.max_items, room)
        ready = {name: q.buffered for name, q in self.queues.items() if self._ready(q, want)}
        source = self.strategy.pick(ready)
        if source is None:
            return False
        batch_id = uuid.uuid4().hex
        size = min(want, ready[source])
        share = self._tail_share(source, size)
        # A range of more rows than the room goes alone when nothing else is
        # in flight: waiting would not make more room. Nor when the batch was
        # only made smaller to share a source's last rows.
        items = self.queues[source].next_batch(
            share, batch_id, at_least_one=self.sink.in_flight() == 0 or share < size
        )
        if not items:
            return False
        rows = weight(items)
        manifest = self._claim(source, batch_id, items, rows)
        crash_point("after_claim")
        self.strategy.charge(source, rows)
        self.stats.items[source] = self.stats.items.get(source, 0) + rows
        if self.stats.first_batch_at is None:
            self.stats.first_batch_at = time.monotonic()
        if manifest is None:
            self.queues[source].ack(batch_id)
            return True
        self._dispatch(manifest, begun=True)
        self.gate.observe(self.pending())
        return True

    def _tail_share(self, source: str, size: int) -> int:
        """The batch size for ``source``: ``size``, less at its end.

        Once a keyset walk's last rows are buffered, one full batch after
        another would leave the last one importing alone while the sink
        could run ``parallel`` imports: the rest is split among them instead
        (shrinking as slots free up), down to a quarter of
        ``batch.max_items``. The source's batches still importing count
        with half their rows (half done, on average): a slot that frees up
        beside one that just took a full batch takes a matching share, not
        half of what is left while the other slot's batch runs on alone.
        Not for sources whose end is only for now (incremental, sweep, SQS):
        a trickle of changes would be split too.
        """
        queue = self.queues[source]
        parallel = self.sink.parallel
        if parallel < 2 or not self._walks_ranges(source) or not queue.at_end or queue.refilling:
            return size
        with self._lock:  # sink threads remove the batches that end
            importing = sum(m.items for m in self._inflight.values() if m.source == source)
        share = -(-(queue.buffered + importing // 2) // parallel)
        return min(size, max(share, self.cfg.batch.max_items // 4, 1))

    def _walks_ranges(self, source: str) -> bool:
        """A keyset source: its batches are key ranges, and its end is final."""
        src_cfg = self.cfg.sources[source]
        return src_cfg.kind == "sql" and src_cfg.mode == "keyset"

    def _ready(self, queue: QueueingLimitedSource, want: int) -> bool:
        """A source has a batch ready: a full one, or a partial one that may not wait."""
        buffered = queue.buffered
        if buffered == 0:
            return False
        if buffered >= want or queue.full:
            return True
        if queue.at_end and not queue.refilling:
            return True  # no more is coming soon: waiting would only delay
        age = queue.oldest_age()
        return age is not None and age >= self.cfg.batch.max_wait

    def _claim(self, source: str, batch_id: str, items: list[Item], rows: int) -> Manifest | None:
        src_cfg = self.cfg.sources[source]
        if self._walks_ranges(source):
            return self._claim_range(source, src_cfg.target, batch_id, items, rows)
        keys = [key_values(item) for item in items]
        versions = [item.version for item in items]
        payloads = [item.payload for item in items] if src_cfg.kind == "sqs" else None
        for _ in range(5):
            try:
                return self.ledger.claim_keys(
                    batch_id, source, src_cfg.target, keys, versions=versions,
                    payloads=payloads, begin=True,
                )
            except ClaimConflict:
                # Another daemon inserted some of these keys between our look-up
                # and our insert; the next look-up skips them.
                log.info("source %s: lost a key claim race; claiming the rest", source)
        raise ClaimConflict(f"source {source!r}: lost the key claim five times in a row")

    def _claim_range(
        self, source: str, target: str, batch_id: str, items: list[Item], rows: int
    ) -> Manifest | None:
        """Claim ``(high-water, last key]`` (``rows`` rows) by compare-and-set on the mark.

        ``items`` are adjacent ranges. When another daemon walks the same
        table its claims move the mark under us: re-read it and claim what is
        left above it. Ranges at or below the mark belong to the other
        daemon's batches and are dropped (our walk keeps going forward, so
        nothing is skipped).
        """
        hi = key_values(items[-1])
        for _ in range(5):
            checkpoint = self.checkpoints[source]
            if checkpoint.high_water is not None and tuple(hi) <= tuple(checkpoint.high_water):
                return None  # all of it claimed by another daemon already
            try:
                if checkpoint.high_water is not None:
                    mark = tuple(checkpoint.high_water)
                    rows = weight([i for i in items if tuple(key_values(i)) > mark]) or rows
                manifest, self.checkpoints[source] = self.ledger.claim_range(
                    batch_id, source, target, checkpoint, hi, rows, begin=True
                )
                return manifest
            except ClaimConflict:
                self.checkpoints[source] = self.ledger.sources.checkpoint(source)
                log.info("source %s: another daemon claimed up to %s; claiming above it",
                         source, self.checkpoints[source].high_water)
        raise ClaimConflict(f"source {source!r}: lost the range claim five times in a row")

    def _dispatch(self, manifest: Manifest, *, begun: bool = False) -> None:
        """Hand a batch to the sink; ``begun``: it was claimed as importing already."""
        try:
            started = manifest if begun else self.ledger.begin(manifest.batch_id)
        except ClaimConflict as conflict:
            log.info("batch %s taken by another daemon: %s", manifest.batch_id, conflict)
            return
        with self._lock:
            self._inflight[started.batch_id] = started
        future = self.sink.submit(started)
        future.add_done_callback(lambda f, m=started: self._on_done(m, f))  # type: ignore[misc]

    def _on_done(self, manifest: Manifest, future: Future[ImportResult]) -> None:
        """Runs on a sink thread when an import ends."""
        try:
            error = future.exception()
            queue = self.queues.get(manifest.source)
            if error is None:
                result = future.result()
                rejected = getattr(result, "rows_rejected", 0)
                crash_point("before_ledger_done")
                self.ledger.finish(manifest.batch_id, result.rows_written, rejected,
                                   token=manifest.token)
                if queue is not None:
                    queue.ack(manifest.batch_id)
                with self._lock:
                    s = self.stats
                    s.batches_done += 1
                    s.rows_rejected += rejected
                    s.rows_by_source[manifest.source] = (
                        s.rows_by_source.get(manifest.source, 0) + result.rows_written
                    )
                    s.rows_by_target[manifest.target] = (
                        s.rows_by_target.get(manifest.target, 0) + result.rows_written
                    )
                log.debug("batch %s done: %d rows", manifest.batch_id, result.rows_written)
            else:
                unavailable = isinstance(error, SinkUnavailable)
                state = self.ledger.fail(manifest.batch_id, str(error), self.cfg.retry,
                                         token=manifest.token, counted=not unavailable)
                log.warning("batch %s of %s %s: %s", manifest.batch_id, manifest.source,
                            state, error)
                if unavailable:
                    log.critical("no batch can import: %s", error)
                    self.die(error)
                with self._lock:
                    if state == "dead":
                        self.stats.batches_dead += 1
                        if queue is not None:
                            queue.ack(manifest.batch_id)  # the ledger keeps it for `retry`
                    else:
                        self.stats.batches_failed += 1
        except ClaimConflict as conflict:
            # Our lease ran out and another daemon took the batch over (and
            # may have finished it): it is theirs now; we go on.
            log.warning("batch %s was taken over by another daemon: %s",
                        manifest.batch_id, conflict)
            self._let_go(manifest)
        except BaseException as error:  # the ledger itself failed: stop loudly
            log.critical("cannot record the end of batch %s: %s", manifest.batch_id, error)
            self.fatal = error
            self._stopping.set()
        finally:
            with self._lock:
                self._inflight.pop(manifest.batch_id, None)
            self.wake.set()

    def _let_go(self, manifest: Manifest) -> None:
        """Stop holding the items of a batch another daemon took over.

        Done by them: our items are done too (SQS: their messages are
        deleted). Still theirs to import: the items go back to the source
        (SQS: visible again; a redelivery finds the key held by their batch
        and is left invisible, and deleted once that batch is done), so
        nothing stays held here for good.
        """
        queue = self.queues.get(manifest.source)
        if queue is None:
            return
        try:
            done = self.ledger.reads.state_of(manifest.batch_id) == "done"
        except Exception as error:  # a read failing here must not stop the loop
            log.warning("batch %s: cannot read its state (%s); giving its items back",
                        manifest.batch_id, error)
            done = False
        if done:
            queue.ack(manifest.batch_id)
        else:
            queue.release(manifest.batch_id, to_source=True)

    def _retry_due(self) -> None:
        # The ledger is the truth about failed batches (``sluice retry`` and
        # other daemons change them too); a read at most once a second.
        if self.clock() < self._next_retry_check:
            return
        self._next_retry_check = self.clock() + min(1.0, self.cfg.retry.backoff)
        for manifest in self.ledger.reads.due_retries(self.queues, self.ledger.clock()):
            self._dispatch(manifest)

    def _resume_unfinished(self) -> None:
        """Re-run batches a previous run (or a dead daemon) claimed but did not finish."""
        for manifest in self.ledger.orphans(self.queues):
            log.info("resuming batch %s of %s", manifest.batch_id, manifest.source)
            self._dispatch(manifest)

    # -- idling and draining -----------------------------------------------------------

    def _take_adopted(self) -> None:
        while True:
            try:
                manifest = self._adopted.get_nowait()
            except Empty:
                return
            with self._lock:
                mine = manifest.batch_id in self._inflight
            if not mine:
                log.warning("taking over batch %s of %s from a dead owner",
                            manifest.batch_id, manifest.source)
                self._dispatch(manifest)

    def _drained(self) -> bool:
        with self._lock:
            busy = bool(self._inflight)
        if busy or not all(q.exhausted for q in self.queues.values()):
            return False
        # Locally drained; other daemons on this ledger may still hold batches
        # (which the reaper hands to us if their owner dies).
        now = self.clock()
        if now < self._next_global_check:
            return False
        self._next_global_check = now + 0.5
        return not self.ledger.reads.batches(UNFINISHED + ("failed",), self.queues)

    def _poke_exhausted(self, until_drained: bool) -> None:
        """Ask drained sources again now and then: rows may have arrived."""
        now = self.clock()
        for name, queue in self.queues.items():
            if not queue.exhausted:
                continue
            src_cfg = self.cfg.sources[name]
            # Draining re-checks each second; a daemon waits a source's sweep pause.
            pause = 1.0 if until_drained else getattr(src_cfg, "sweep_pause", 1.0)
            if now - self._last_poke.get(name, 0.0) >= pause:
                self._last_poke[name] = now
                queue.poke()

    def _idle_timeout(self) -> float:
        ages = [q.oldest_age() for q in self.queues.values()]
        waits = [self.cfg.batch.max_wait - age for age in ages if age is not None]
        return max(0.01, min([1.0, *waits]))

    def _drain(self, timeout: float | None) -> None:
        """Wait for in-flight batches to end (they are recorded by ``_on_done``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._inflight:
                    return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                log.warning("stopping with %d batches still importing", len(self._inflight))
                return
            self.wake.wait(0.5 if remaining is None else min(0.5, remaining))
            self.wake.clear()


def weight(items: list[Item]) -> int:
    """Rows in ``items``: one per key, a range's own count for a range."""
    return sum(item.rows for item in items)


def key_values(item: Item) -> list[Any]:
    """An item's key as the list of its column values (how manifests carry keys)."""
    return list(item.key) if isinstance(item.key, tuple) else [item.key]
