"""A bounded FIFO of key ranges that counts rows: the buffer of a keyset source.

A keyset walk hands out ranges (``Item.key`` the range's last key,
``Item.rows`` its row count), never one object per row. They go through the
same motions as the keys of a :class:`~sources.setqueue.SetQueue` (queued,
held by a batch until acknowledged or given back), with the same interface,
but every limit counts rows: ``capacity`` and the room an offer may fill
count the rows held in memory (:attr:`~sources.abc.Item.weight`), how much
:meth:`RangeQueue.poll_many` takes the rows of the ranges. A walk never returns a range
twice, so there is nothing to deduplicate; ranges stay in key order, and a
batch takes adjacent ones from the head.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Iterable

from sources.abc import Item
from sources.setqueue import Offer


class RangeQueue:
    """Ranges of one source, in key order, bounded by ``capacity`` rows; thread-safe."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._queued: deque[Item] = deque()
        self._queued_rows = 0
        self._held: dict[Hashable, list[Item]] = {}
        self._held_rows = 0

    def prepare(self, values: Iterable[Item]) -> Offer[Item]:
        """Nothing to compute ahead for ranges: the values, as :meth:`offer_prepared` takes them."""
        return Offer([], values if isinstance(values, list) else list(values), set())

    def offer_prepared(self, offer: Offer[Item]) -> int:
        """Queue ranges at the back while their rows fit; return how many were taken."""
        values = offer.values
        with self._lock:
            room = self._free()
            taken = 0
            for item in values:
                if item.weight > room:
                    break
                room -= item.weight
                taken += 1
            self._queued.extend(values[:taken])
            self._queued_rows += sum(item.weight for item in values[:taken])
            return taken

    def offer_many(self, values: Iterable[Item]) -> int:
        """Queue ranges at the back while their rows fit; return how many were taken."""
        return self.offer_prepared(self.prepare(values))

    def poll_many(self, n: int, batch_id: Hashable, at_least_one: bool = False) -> list[Item]:
        """Take adjacent ranges from the head, ``n`` rows at most, and hold them under ``batch_id``.

        A head range of more than ``n`` rows stays queued, unless
        ``at_least_one``: then it is taken alone (a range planned before the
        batch size was lowered).
        """
        with self._lock:
            taken: list[Item] = []
            rows = 0
            while self._queued and rows + self._queued[0].rows <= n:
                item = self._queued.popleft()
                taken.append(item)
                rows += item.rows
            if not taken and at_least_one and self._queued and n > 0:
                taken.append(self._queued.popleft())
            if taken:
                held = sum(item.weight for item in taken)
                self._queued_rows -= held
                self._held_rows += held
                self._held.setdefault(batch_id, []).extend(taken)
            return taken

    def ack(self, batch_id: Hashable) -> list[Item]:
        """The batch is done: forget its ranges; return them ([] if unknown)."""
        with self._lock:
            items = self._held.pop(batch_id, [])
            self._held_rows -= sum(item.weight for item in items)
            return items

    def release(self, batch_id: Hashable) -> int:
        """Give a batch's ranges back to the head, in order; return how many."""
        with self._lock:
            items = self._held.pop(batch_id, [])
            rows = sum(item.weight for item in items)
            self._held_rows -= rows
            self._queued_rows += rows
            self._queued.extendleft(reversed(items))
            return len(items)

    def drain(self) -> list[Item]:
        """Remove and return every queued range in order (held ones stay held)."""
        with self._lock:
            items = list(self._queued)
            self._queued.clear()
            self._queued_rows = 0
            return items

    def free(self) -> int:
        """Rows of room left: ``capacity`` less the rows queued and held."""
        with self._lock:
            return self._free()

    def rows(self) -> int:
        """Rows in the queued ranges, as last written (no lock: the loop asks every buffer
        each tick, and a count a moment old only decides whether to look closer)."""
        return self._queued_rows

    def held_count(self) -> int:
        """Rows in ranges held by batches not yet acknowledged or released."""
        with self._lock:
            return self._held_rows

    def parked_count(self) -> int:
        """Ranges never have newer versions: always 0."""
        return 0

    def __len__(self) -> int:
        """How many ranges are queued (held ones not included)."""
        with self._lock:
            return len(self._queued)

    def _free(self) -> int:
        return self.capacity - self._queued_rows - self._held_rows
