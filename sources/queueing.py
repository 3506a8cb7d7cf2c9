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
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from operator import attrgetter

from config.errors import SourceError
from config.retrying import Backoff
from sources.abc import Item, LimitedSource
from sources.rangequeue import RangeQueue
from sources.setqueue import SetQueue

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
    last_refill_at: float | None  # clock() of the last successful refill
    exhausted: bool
    hook_errors: int = 0
    failed: str | None = None  # why refills were given up for good; None while they go on
    parked: int = 0  # newer versions of keys in flight, waiting for their batch to end


class QueueingLimitedSource:
    """Buffers up to ``capacity`` items of ``wrapped``; refills at ``replenish_below``.

    Thread model: ``next_batch``, ``ack``, ``release``, ``poke`` and ``health``
    are called by the scheduler and never wait for I/O (``ack``/``release``
    call the wrapped source's hooks, which may). Refills run on ``executor``
    (any object with ``submit``) or, by default, on one daemon thread per
    buffer, started by :meth:`start` and woken by an event: starting a thread
    waits until it runs, milliseconds when the GIL is busy, so none is ever
    started on the scheduler's path; and a daemon thread stuck in I/O cannot
    hold up interpreter exit. Nothing happens in the background before
    :meth:`start` or after :meth:`stop`.

    Held items (handed out, batch not yet done) count against ``capacity``.
    An item read again with a newer ``version`` while its key is buffered or
    held (incremental mode: the row changed) is parked, not dropped: it goes
    out in place of the buffered one, or is buffered again once the batch
    holding its key is done (see :class:`~sources.setqueue.SetQueue`).

    A refill error whose ``transient`` attribute is False counts towards
    ``max_permanent_failures`` (a success resets the count; transient errors,
    and exceptions without the attribute, do not add to it). At that count no
    more refills run, :attr:`failed` holds the error and ``on_failed`` is
    called once, on the refill thread. Items already buffered or held stay
    usable: only new reads stop.
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
        if max_permanent_failures < 1:
            raise ValueError(f"{wrapped.name}: max_permanent_failures must be at least 1")
        if not capacity > replenish_below >= 0:
            raise ValueError(
                f"{wrapped.name}: replenish_below ({replenish_below}) must be at least 0 "
                f"and below capacity ({capacity})"
            )
        self.name = wrapped.name
        self.wrapped = wrapped
        self.replenish_below = replenish_below
        # Ranges (a keyset walk) are counted in rows; keys, one by one.
        self._queue: SetQueue[Item] | RangeQueue = (
            RangeQueue(capacity)
            if wrapped.weighs_rows
            else SetQueue(capacity, key=attrgetter("key"), park=_is_versioned)
        )
        self._executor = executor
        self._on_refill = on_refill
        self._on_failed = on_failed
        self._max_permanent = max_permanent_failures
        self._clock = clock
        self._backoff = Backoff(backoff_base, backoff_max, jitter=True)
        self._rng = rng or random.Random()
        self._lock = threading.Lock()  # taken before the SetQueue's own lock
        self._idle = threading.Event()  # set while no wrapped.next_batch call runs
        self._idle.set()
        self._started = False
        self._stopped = False
        self._busy = False  # a refill is running or its retry is scheduled
        self._timer: threading.Timer | None = None
        self._wake = threading.Event()  # a refill is due (or a stop): the worker runs
        self._worker: threading.Thread | None = None
        self._source_exhausted = False
        # [count, enqueued_at] per refill chunk, oldest first; counts sum to len(queue)
        self._chunks: deque[list[float]] = deque()
        self._batch_enqueued: dict[Hashable, float] = {}
        self._errors = 0
        self._consecutive = 0
        self._permanent = 0  # not-transient errors since the last successful refill
        self._failure: SourceError | None = None
        self._hook_errors = 0
        self._last_error: str | None = None
        self._last_refill_at: float | None = None

    # -- the scheduler's side: memory only ---------------------------------

    def start(self) -> None:
        """Start the first refill. Calling it again does nothing."""
        with self._lock:
            if self._started:
                return
            self._started = True
            go = self._claim_refill(force=True)
        if self._executor is None:
            self._worker = threading.Thread(
                target=self._work, name=f"refill-{self.name}", daemon=True
            )
            self._worker.start()
        if go:
            self._launch()

    def next_batch(self, n: int, batch_id: Hashable, at_least_one: bool = False) -> list[Item]:
        """Take up to ``n`` buffered items (rows, for ranges) and hold them under ``batch_id``.

        Never blocks on I/O and never raises the wrapped source's errors. When
        the buffer is left at or below ``replenish_below``, one refill starts.
        ``at_least_one``: a head range of more than ``n`` rows is taken alone
        rather than left (see :meth:`RangeQueue.poll_many`).
        """
        with self._lock:
            if isinstance(self._queue, RangeQueue):
                items = self._queue.poll_many(n, batch_id, at_least_one)
            else:
                items = self._queue.poll_many(n, batch_id)
            if items:
                self._batch_enqueued.setdefault(batch_id, self._chunks[0][1])
                self._consume_chunks(len(items))
            go = self._claim_refill()
        if go:
            self._launch()
        return items

    def ack(self, batch_id: Hashable) -> None:
        """The batch is done: forget its items here and ack them in the wrapped source.

        Unknown batch ids are ignored. A failing wrapped ack (or release) is
        logged and counted in health (``hook_errors``), not raised.
        """
        with self._lock:
            items = self._forget(batch_id)
            go = self._claim_refill()  # room was freed
        if items:
            self._call_hook(self.wrapped.ack, items)
        if go:
            self._launch()

    def release(self, batch_id: Hashable, *, to_source: bool = False) -> int:
        """Give a batch's items back; return how many.

        By default they return to the front of this buffer, in order (a lost
        claim race: the items are still ours, so the wrapped source is not
        told). With ``to_source=True`` they leave the buffer and go to the
        wrapped source's ``release`` (shutdown: SQS resets their visibility).
        """
        if to_source:
            with self._lock:
                items = self._forget(batch_id)
                go = self._claim_refill()
            if items:
                self._call_hook(self.wrapped.release, items)
            if go:
                self._launch()
            return len(items)
        with self._lock:
            count = self._queue.release(batch_id)
            enqueued = self._batch_enqueued.pop(batch_id, None)
            if count:
                self._chunks.appendleft([count, self._clock() if enqueued is None else enqueued])
            return count

    def _forget(self, batch_id: Hashable) -> list[Item]:
        """Under the lock: drop a batch's held items; newer versions parked for them queue up."""
        before = len(self._queue)
        items = self._queue.ack(batch_id)
        self._batch_enqueued.pop(batch_id, None)
        requeued = len(self._queue) - before
        if requeued:
            self._chunks.append([requeued, self._clock()])
        return items

    def give_back(self) -> int:
        """Hand every buffered (not held) item back to the wrapped source; return how many.

        Part of shutdown, after :meth:`stop`: unprocessed items become
        available to others again (SQS: visibility reset).
        """
        with self._lock:
            items = self._queue.drain()
            self._chunks.clear()
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
            self._launch()
        return go

    def oldest_age(self) -> float | None:
        """Seconds the item at the head of the buffer has waited; None when empty."""
        with self._lock:
            return self._clock() - self._chunks[0][1] if self._chunks else None

    @property
    def exhausted(self) -> bool:
        """The wrapped source was exhausted on the last refill, none runs, the buffer is empty."""
        with self._lock:
            return self._source_exhausted and self._queue.rows() == 0 and not self._busy

    @property
    def at_end(self) -> bool:
        """The last refill reached the end of the source (items may still be buffered)."""
        return self._source_exhausted

    @property
    def buffered(self) -> int:
        """Items queued in memory, ready to be taken (rows, for ranges)."""
        return self._queue.rows()

    @property
    def full(self) -> bool:
        """No room left: queued and held items fill the capacity."""
        return self._queue.free() <= 0

    @property
    def refilling(self) -> bool:
        """A refill runs or its retry is scheduled."""
        return self._busy

    @property
    def failed(self) -> SourceError | None:
        """Why refills were given up for good (not transient); None while they go on."""
        return self._failure

    def health(self) -> RefillHealth:
        """A consistent snapshot of the buffer and its refills."""
        with self._lock:
            return RefillHealth(
                buffered=self._queue.rows(),
                held=self._queue.held_count(),
                parked=self._queue.parked_count(),
                refilling=self._busy,
                errors=self._errors,
                consecutive_errors=self._consecutive,
                last_error=self._last_error,
                last_refill_at=self._last_refill_at,
                exhausted=self._source_exhausted and self._queue.rows() == 0,
                hook_errors=self._hook_errors,
                failed=None if self._failure is None else str(self._failure),
            )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop refilling: cancel a pending retry at once, wait up to ``timeout``.

        Returns True when no wrapped ``next_batch`` call is still running. One
        that is (stuck in I/O) is left behind; whatever it returns later goes
        straight back to the wrapped source's ``release``.
        """
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()  # its retry will not run: nothing is refilling now
                self._busy = False
        self._wake.set()  # an idle worker wakes up and ends
        return self._idle.wait(timeout)

    # -- the refill side ---------------------------------------------------

    def _claim_refill(self, force: bool = False) -> bool:
        """Under the lock: decide whether to start a refill and mark it started."""
        if not self._started or self._stopped or self._busy or self._failure is not None:
            return False
        if self._source_exhausted and not force:
            return False  # a drained source is asked again only when poked
        if self._queue.rows() > self.replenish_below or self._queue.free() <= 0:
            return False
        self._busy = True
        return True

    def _launch(self) -> None:
        if self._executor is None:
            self._wake.set()  # cheap: the worker thread already exists
            return
        try:
            self._executor.submit(self._refill)
        except RuntimeError:  # executor shut down, or no more threads
            log.exception("%s: could not start a refill", self.name)
            with self._lock:
                self._busy = False

    def _work(self) -> None:
        """The default refill thread: one refill per wake-up until stopped."""
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            self._refill()  # returns at once after a stop (and clears _busy)

    def _refill(self) -> None:
        with self._lock:
            room = self._queue.free()
            if self._stopped or room <= 0:
                self._busy = False
                return
            self._idle.clear()
        try:
            items = self.wrapped.next_batch(room)
            exhausted = self.wrapped.exhausted
        except Exception as exc:
            self._failed(exc)
        else:
            self._filled(items, exhausted)
        self._notify()

    def _filled(self, items: list[Item], exhausted: bool) -> None:
        # Keys and hashes are computed before taking the lock that next_batch needs.
        offer = self._queue.prepare(items)
        now = self._clock()
        leftover: list[Item] = []
        with self._lock:
            self._idle.set()
            self._busy = False
            if self._stopped:
                leftover = items
            else:
                accepted = self._queue.offer_prepared(offer)
                if accepted:
                    self._chunks.append([accepted, now])
                if accepted < len(items):
                    # Only keys already queued or held are refused: room was
                    # reserved above and only this (single) refill offers.
                    log.debug("%s: %d duplicate keys skipped", self.name, len(items) - accepted)
                self._consecutive = 0
                self._permanent = 0
                self._last_refill_at = now
                self._source_exhausted = exhausted
            # A source that returns little per call (SQS: 10) is asked again
            # at once while it has more; an empty answer waits for a trigger.
            again = bool(items) and self._claim_refill()
        if leftover:
            self._call_hook(self.wrapped.release, leftover)
        if again:
            self._launch()

    def _failed(self, exc: Exception) -> None:
        failure: SourceError | None = None
        with self._lock:
            self._idle.set()
            self._errors += 1
            self._consecutive += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            # Only an error the source itself calls permanent counts: an
            # unknown one may be a network hiccup, retried as long as it lasts.
            if getattr(exc, "transient", True) is False:
                self._permanent += 1
            if self._stopped:
                self._busy = False
                delay = None
            elif self._permanent >= self._max_permanent:
                # The source refuses the same read every time: retrying for
                # ever would hide the problem (and never let a drain end).
                failure = SourceError(
                    f"source {self.name}: refill failed {self._permanent} times: {exc}"
                )
                failure.transient = False
                self._failure = failure
                self._busy = False
                delay = None
            else:
                # Jittered: spread retries of many sources hitting one dead server.
                delay = self._backoff.delay(self._consecutive, self._rng)
                self._timer = threading.Timer(delay, self._retry)
                self._timer.daemon = True
                self._timer.start()
        if failure is not None:
            then = "not retried: the source refuses the read"
        else:
            then = "stopping, no retry" if delay is None else f"retry in {delay:.2f} s"
        log.warning(
            "%s: refill failed (%d in a row), %s: %s",
            self.name,
            self._consecutive,
            then,
            self._last_error,
        )
        if failure is not None and self._on_failed is not None:
            try:
                self._on_failed(failure)
            except Exception:
                log.exception("%s: on_failed callback failed", self.name)

    def _retry(self) -> None:
        with self._lock:
            self._timer = None
            if self._stopped:
                self._busy = False
                return
        self._launch()

    def _consume_chunks(self, count: int) -> None:
        while count:
            chunk = self._chunks[0]
            if chunk[0] <= count:
                count -= int(chunk[0])
                self._chunks.popleft()
            else:
                chunk[0] -= count
                count = 0

    def _call_hook(self, hook: Callable[[Sequence[Item]], None], items: list[Item]) -> None:
        try:
            hook(items)
        except Exception as exc:
            log.warning("%s: %s of %d items failed: %s", self.name, hook.__name__, len(items), exc)
            with self._lock:
                self._hook_errors += 1

    def _notify(self) -> None:
        if self._on_refill is not None:
            try:
                self._on_refill()
            except Exception:
                log.exception("%s: on_refill callback failed", self.name)


def _is_versioned(item: Item) -> bool:
    """An item read again with a version (incremental mode) is a newer one: parked, not dropped."""
    return bool(item.version)
