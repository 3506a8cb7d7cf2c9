"""An in-memory buffer in front of a source, refilled in the background.

The scheduler's main loop only ever talks to a :class:`QueueingLimitedSource`:
``next_batch`` takes from memory, so a slow or failing database or queue never
stalls the loop. One refill at a time asks the wrapped source for exactly the
room left in the buffer; errors are counted, backed off and shown in
:meth:`QueueingLimitedSource.health`, never raised to the loop.

A transient error (connection lost, timeout, throttling) is retried for as
long as it lasts. An error the source marks as not transient (the database
refuses the query itself) is retried a few times too, and then the buffer
gives up: it reports itself :attr:`~QueueingLimitedSource.failed` and calls
``on_failed``, so that the daemon stops rather than wait for ever.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from config.errors import SourceError
from config.retrying import Backoff
from sources.abc import Item, LimitedSource
from sources.buffer import ItemBuffer, Stocked
from sources.refill import RefillWorker
from sources.resume import ResumePoint

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RefillHealth:
    """A snapshot of one buffer and its refills, for status and metrics.

    ``buffered`` and ``held`` count items, or rows for a source of ranges.
    """

    buffered: int
    held: int
    refilling: bool  # a refill is running or waiting to retry
    errors: int
    consecutive_errors: int
    last_error: str | None
    failing_since: float | None  # time.monotonic() of its first failed refill in a row
    last_refill_at: float | None  # clock() of the last successful refill
    exhausted: bool
    hook_errors: int = 0
    failed: str | None = None  # why refills were given up for good; None while they go on
    parked: int = 0  # newer versions of keys in flight, waiting for their batch to end
    reads_begun: int = 0  # reads of the source begun so far, each numbered
    last_read_ok: int = 0  # the number of the last read that succeeded

    def failing_for(self) -> float | None:
        """Seconds its refills have failed in a row (None: the last one succeeded)."""
        return None if self.failing_since is None else time.monotonic() - self.failing_since

    @staticmethod
    def of(worker: RefillWorker, buffer: ItemBuffer, hook_errors: int) -> RefillHealth:
        """The health of ``buffer`` and its ``worker`` (under the buffer's lock)."""
        return RefillHealth(
            buffered=buffer.rows(), held=buffer.held_count(), parked=buffer.parked_count(),
            refilling=worker.busy, errors=worker.errors,
            consecutive_errors=worker.consecutive_errors, last_error=worker.last_error,
            failing_since=worker.failing_since,
            last_refill_at=worker.last_refill_at, exhausted=worker.at_end and buffer.rows() == 0,
            hook_errors=hook_errors, failed=None if worker.failure is None else str(worker.failure),
            reads_begun=worker.begun, last_read_ok=worker.last_ok_begun,
        )


class QueueingLimitedSource:
    """Buffers up to ``capacity`` items of ``wrapped``; refills at ``replenish_below``.

    Thread model: ``next_batch``, ``ack``, ``release``, ``poke`` and ``health``
    are called by the scheduler and never wait for I/O (``ack``/``release``
    call the wrapped source's hooks, which may). Refills run on a
    :class:`~sources.refill.RefillWorker`: on ``executor`` (any object with
    ``submit``) or, by default, on one daemon thread per buffer, started by
    :meth:`start`. Nothing happens in the background before :meth:`start` or
    after :meth:`stop`.

    Held items (handed out, batch not yet done) count against ``capacity``.
    An item read again with a newer ``version`` while its key is buffered or
    held (incremental mode: the row changed) is parked, not dropped: it goes
    out in place of the buffered one, or is buffered again once the batch
    holding its key is done (see :class:`~sources.setqueue.SetQueue`).

    Failing refills are retried, or given up on after ``max_permanent_failures``
    errors the source calls not transient, as :class:`~sources.refill.RefillWorker`
    says; then :attr:`failed` holds the error and ``on_failed`` was called.
    Items already buffered or held stay usable: only new reads stop.
    """

    def __init__(
        self,
        wrapped: LimitedSource,
        capacity: int,
        replenish_below: int,
        *,
        executor: Executor | None = None,
        on_refill: Callable[[], None] | None = None,
        on_failed: Callable[[SourceError], None] | None = None,
        max_permanent_failures: int = 3,
        clock: Callable[[], float] = time.monotonic,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        rng: random.Random | None = None,
    ) -> None:
        _check_sizes(wrapped.name, capacity, replenish_below, max_permanent_failures)
        self.name = wrapped.name
        self.wrapped = wrapped
        self.capacity = capacity
        self.replenish_below = replenish_below
        # Ranges (a keyset walk) are counted in rows; keys, one by one.
        self._buffer = ItemBuffer(capacity, ranges=wrapped.weighs_rows, clock=clock)
        self._clock = clock
        self._lock = threading.Lock()  # taken before the queue's own lock
        self._worker = RefillWorker(
            wrapped,
            self._lock,
            room=self._buffer.free,
            filled=self._filled,
            executor=executor,
            on_refill=on_refill,
            on_failed=on_failed,
            max_permanent_failures=max_permanent_failures,
            backoff=Backoff(backoff_base, backoff_max, jitter=True),
            rng=rng or random.Random(),
        )
        self._hook_errors = 0

    # -- the scheduler's side: memory only ---------------------------------

    def watch(self, stocked: Stocked) -> None:
        """Note in ``stocked`` whether this buffer holds items, now and at every change."""
        with self._lock:
            self._buffer.watch(self.name, stocked)

    def start(self) -> None:
        """Start the first refill. Calling it again does nothing."""
        self._worker.start(lambda: self._claim_refill(force=True))

    def next_batch(self, n: int, batch_id: Hashable, at_least_one: bool = False) -> list[Item]:
        """Take up to ``n`` buffered items (rows, for ranges) and hold them under ``batch_id``.

        Never blocks on I/O and never raises the wrapped source's errors. When
        the buffer is left at or below ``replenish_below``, one refill starts.
        ``at_least_one``: a head range of more than ``n`` rows is taken alone
        rather than left (see :meth:`~sources.rangequeue.RangeQueue.poll_many`).
        """
        with self._lock:
            items = self._buffer.take(n, batch_id, at_least_one)
            go = self._claim_refill()
        if go:
            self._worker.launch()
        return items

    def ack(self, batch_id: Hashable) -> None:
        """The batch is done: forget its items here and ack them in the wrapped source.

        Unknown batch ids are ignored. A failing wrapped ack (or release) is
        logged and counted in health (``hook_errors``), not raised.
        """
        self._end(batch_id, self.wrapped.ack)

    def release(self, batch_id: Hashable, *, to_source: bool = False) -> int:
        """Give a batch's items back; return how many.

        By default they return to the front of this buffer, in order (a lost
        claim race: the items are still ours, so the wrapped source is not
        told). With ``to_source=True`` they leave the buffer and go to the
        wrapped source's ``release`` (shutdown: SQS resets their visibility).
        """
        if to_source:
            return self._end(batch_id, self.wrapped.release)
        with self._lock:
            return self._buffer.put_back(batch_id)

    def _end(self, batch_id: Hashable, hook: Callable[[Sequence[Item]], None]) -> int:
        """Drop a batch's held items, pass them to ``hook``, refill the room; return how many."""
        with self._lock:
            items = self._buffer.end(batch_id)
            go = self._claim_refill()  # room was freed
        if items:
            self._call_hook(hook, items)
        if go:
            self._worker.launch()
        return len(items)

    def give_back(self) -> int:
        """Hand every buffered (not held) item back to the wrapped source; return how many.

        Part of shutdown, after :meth:`stop` (SQS: their visibility is reset).
        """
        with self._lock:
            items = self._buffer.drain()
        if items:
            self._call_hook(self.wrapped.release, items)
        return len(items)

    def poke(self) -> bool:
        """Refill now if none runs and the buffer is at or below the threshold.

        Unlike the automatic trigger, this also asks a source that reported
        itself exhausted (the scheduler pokes drained sources now and then).
        A pending backoff is not cut short. Returns whether a refill started.
        """
        with self._lock:
            go = self._claim_refill(force=True)
        if go:
            self._worker.launch()
        return go

    def resume_point(self) -> ResumePoint | None:
        """Incremental: where a restart may resume (:mod:`sources.resume`); else None."""
        with self._lock:
            return self._buffer.resume_point()

    def oldest_age(self) -> float | None:
        """Seconds the item at the head of the buffer has waited; None when empty."""
        with self._lock:
            return self._buffer.oldest_age()

    @property
    def exhausted(self) -> bool:
        """The wrapped source was exhausted on the last refill, none runs, the buffer is empty."""
        with self._lock:
            return self._worker.at_end and self._buffer.rows() == 0 and not self._worker.busy

    @property
    def settled(self) -> bool:
        """Exhausted, and every batch this process fed of it has ended (its first pass, as far
        as this process can tell: a batch taken from the buffer is not in the ledger yet)."""
        return self.exhausted and self._buffer.held_count() == 0

    @property
    def at_end(self) -> bool:
        """The last refill reached the end of the source (items may still be buffered)."""
        return self._worker.at_end

    @property
    def buffered(self) -> int:
        """Items queued in memory, ready to be taken (rows, for ranges)."""
        return self._buffer.rows()

    @property
    def full(self) -> bool:
        """No room left: queued and held items fill the capacity."""
        return self._buffer.free() <= 0

    @property
    def read_once(self) -> bool:
        """A refill succeeded once, or the source is exhausted (no snapshot taken)."""
        return self._worker.last_refill_at is not None or self.exhausted

    @property
    def refilling(self) -> bool:
        """A refill runs or its retry is scheduled."""
        return self._worker.busy

    @property
    def failed(self) -> SourceError | None:
        """Why refills were given up for good (not transient); None while they go on."""
        return self._worker.failure

    def health(self) -> RefillHealth:
        """A consistent snapshot of the buffer and its refills."""
        with self._lock:
            return RefillHealth.of(self._worker, self._buffer, self._hook_errors)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop refilling: cancel a pending retry at once, wait up to ``timeout``.

        Returns True when no wrapped ``next_batch`` call is still running. One
        that is (stuck in I/O) is left behind; whatever it returns later goes
        straight back to the wrapped source's ``release``.
        """
        return self._worker.stop(timeout)

    # -- the refill side ---------------------------------------------------

    def _claim_refill(self, force: bool = False) -> bool:
        """Under the lock: decide whether to start a refill and mark it started."""
        if self._worker.at_end and not force:
            return False  # a drained source is asked again only when poked
        if self._buffer.rows() > self.replenish_below or self._buffer.free() <= 0:
            return False
        return self._worker.claim()

    def _filled(self, items: list[Item], exhausted: bool) -> None:
        """The worker read ``items``: buffer them, or give them back after a stop."""
        # Keys and hashes are computed before taking the lock that next_batch needs.
        offer = self._buffer.prepare(items)
        now = self._clock()
        leftover: list[Item] = []
        with self._lock:
            if not self._worker.succeeded(now, exhausted):
                leftover = items
            else:
                accepted = self._buffer.store(offer, now)
                if accepted < len(items):
                    # Only keys already queued or held are refused: room was
                    # reserved above and only this (single) refill offers.
                    log.debug("%s: %d duplicate keys skipped", self.name, len(items) - accepted)
            # Asked again at once while it has more (SQS: 10 per call) or is
            # not at its end (SQS's quiet period); at its end, on a trigger.
            again = (bool(items) or not exhausted) and self._claim_refill()
        if leftover:
            self._call_hook(self.wrapped.release, leftover)
        if again:
            self._worker.launch()

    def _call_hook(self, hook: Callable[[Sequence[Item]], None], items: list[Item]) -> None:
        try:
            hook(items)
        except Exception as exc:
            log.warning("%s: %s of %d items failed: %s", self.name, hook.__name__, len(items), exc)
            with self._lock:
                self._hook_errors += 1


def _check_sizes(name: str, capacity: int, replenish_below: int, max_permanent: int) -> None:
    if max_permanent < 1:
        raise ValueError(f"{name}: max_permanent_failures must be at least 1")
    if not capacity > replenish_below >= 0:
        raise ValueError(
            f"{name}: replenish_below ({replenish_below}) must be at least 0 "
            f"and below capacity ({capacity})"
        )
