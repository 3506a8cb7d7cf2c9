"""What a buffer holds in memory: its queue of items, and how long they have waited."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable
from operator import attrgetter

from sources.abc import Item
from sources.rangequeue import RangeQueue
from sources.resume import ReadMark, ResumePoint, resume_point
from sources.setqueue import Offer, SetQueue


class Stocked:
    """The names of the buffers that hold items now, kept by the buffers themselves.

    A buffer :meth:`~sources.queueing.QueueingLimitedSource.watch`-ed by one
    notes every change of its queue here (under its own lock), so that a loop
    over 1,000 small tables looks at the few buffers holding a batch, not at
    every buffer on every tick. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def note(self, name: str, stocked: bool) -> None:
        """Buffer ``name`` holds items (``stocked``) or holds none."""
        with self._lock:
            if stocked:
                self._names.add(name)
            else:
                self._names.discard(name)

    def names(self) -> set[str]:
        """The buffers holding items at this moment (a copy)."""
        with self._lock:
            return set(self._names)


class ItemBuffer:
    """The items of one :class:`~sources.queueing.QueueingLimitedSource`, with their ages.

    The queue is a :class:`~sources.setqueue.SetQueue` of keys, or for a
    source of ranges (``ranges``) a :class:`~sources.rangequeue.RangeQueue`
    that counts rows. Its items are queued, held by a batch in flight, or
    parked (a newer version of a key queued or held).

    Items enter and leave the queue in FIFO order, so the ages take one
    ``[count, enqueued_at]`` per chunk of items queued together, oldest
    first: the counts sum to ``len(queue)`` (ranges, not rows), and the head
    chunk's time is the age of the oldest item. A batch taken remembers the
    time of its first item, so that a batch given back returns as old as it
    was. Every motion of the queue goes through here to keep the two in step.

    Not thread-safe on its own: the buffer calls every method but
    :meth:`prepare` under its lock (the queue also takes its own).
    """

    def __init__(self, capacity: int, *, ranges: bool, clock: Callable[[], float]) -> None:
        self._queue: SetQueue[Item] | RangeQueue = (
            RangeQueue(capacity)
            if ranges
            else SetQueue(capacity, key=attrgetter("key"), park=_is_versioned)
        )
        self._clock = clock
        self._chunks: deque[list[float]] = deque()
        self._batch_enqueued: dict[Hashable, float] = {}
        self._last_read: ReadMark | None = None  # incremental: the last item stored
        self._watched: tuple[str, Stocked] | None = None

    def watch(self, name: str, stocked: Stocked) -> None:
        """Note in ``stocked``, under ``name``, whether items are queued: now and after
        every motion of the queue (each goes through here)."""
        self._watched = name, stocked
        self._note()

    def _note(self) -> None:
        if self._watched is not None:
            self._watched[1].note(self._watched[0], self._queue.rows() > 0)

    def take(self, n: int, batch_id: Hashable, at_least_one: bool) -> list[Item]:
        """Take up to ``n`` items (rows, for ranges) from the front, held under ``batch_id``.

        ``at_least_one``: a head range of more than ``n`` rows is taken alone
        (see :meth:`~sources.rangequeue.RangeQueue.poll_many`); keys ignore it.
        """
        if isinstance(self._queue, RangeQueue):
            items = self._queue.poll_many(n, batch_id, at_least_one)
        else:
            items = self._queue.poll_many(n, batch_id)
        if items:
            self._batch_enqueued.setdefault(batch_id, self._chunks[0][1])
            self._consume_chunks(len(items))
            self._note()
        return items

    def end(self, batch_id: Hashable) -> list[Item]:
        """Drop a batch's held items and return them; newer versions parked for them queue up."""
        before = len(self._queue)
        items = self._queue.ack(batch_id)
        self._batch_enqueued.pop(batch_id, None)
        requeued = len(self._queue) - before
        if requeued:
            self._chunks.append([requeued, self._clock()])
            self._note()
        return items

    def put_back(self, batch_id: Hashable) -> int:
        """Return a batch's items to the front, in order and as old as when taken; how many."""
        count = self._queue.release(batch_id)
        enqueued = self._batch_enqueued.pop(batch_id, None)
        if count:
            self._chunks.appendleft([count, self._clock() if enqueued is None else enqueued])
            self._note()
        return count

    def drain(self) -> list[Item]:
        """Remove and return every queued item (held ones stay held)."""
        items = self._queue.drain()
        self._chunks.clear()
        self._note()
        return items

    def prepare(self, items: list[Item]) -> Offer[Item]:
        """Compute keys and hashes ahead of :meth:`store`, without the buffer's lock."""
        return self._queue.prepare(items)

    def store(self, offer: Offer[Item], at: float) -> int:
        """Queue what fits of a prepared offer, read at ``at``; return how many items."""
        accepted = self._queue.offer_prepared(offer)
        if offer.values and isinstance(mark := offer.values[-1].handle, ReadMark):
            # Refused ones too: a twin of theirs is queued, held or parked.
            self._last_read = mark
        if accepted:
            self._chunks.append([accepted, at])
            self._note()
        return accepted

    def resume_point(self) -> ResumePoint | None:
        """Where an incremental walk may resume: before the first item read and not done.

        None when no incremental item was stored (see :mod:`sources.resume`).
        """
        if self._last_read is None or isinstance(self._queue, RangeQueue):
            return None
        return resume_point(self._queue.values(), self._last_read)

    def oldest_age(self) -> float | None:
        """Seconds the item at the front has waited; None when nothing is queued."""
        return self._clock() - self._chunks[0][1] if self._chunks else None

    def rows(self) -> int:
        """Items queued (rows, for ranges)."""
        return self._queue.rows()

    def free(self) -> int:
        """Room left (rows, for ranges): capacity less what is queued and held."""
        return self._queue.free()

    def held_count(self) -> int:
        """Items held by batches in flight (rows, for ranges)."""
        return self._queue.held_count()

    def parked_count(self) -> int:
        """Newer versions waiting for their key's batch to end."""
        return self._queue.parked_count()

    def _consume_chunks(self, count: int) -> None:
        while count:
            chunk = self._chunks[0]
            if chunk[0] <= count:
                count -= int(chunk[0])
                self._chunks.popleft()
            else:
                chunk[0] -= count
                count = 0


def _is_versioned(item: Item) -> bool:
    """An item read again with a version (incremental mode) is a newer one: parked, not dropped."""
    return bool(item.version)
