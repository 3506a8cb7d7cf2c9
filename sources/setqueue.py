"""A thread-safe bounded FIFO with set semantics, and memory of what it handed out.

The queue holds *values* (an :class:`~sources.abc.Item`, or a bare key) under a
key computed once on the way in (``key=operator.attrgetter("key")`` for Items;
no ``key`` means the value is its own key). A key is in at most one of two
places:

- *queued*: waiting, in FIFO order;
- *held*: handed out by :meth:`SetQueue.poll_many` under a batch id and not yet
  acknowledged (:meth:`SetQueue.ack`) or given back (:meth:`SetQueue.release`).

Offering a key that is queued or held is a no-op: a queued key keeps its place,
and a refill cannot queue a key whose batch is still in flight. Held keys count
against ``capacity`` (they are in memory too), so ``queued + held <= capacity``
always holds; nothing is ever evicted to make room, an offer simply takes fewer.

Layout, chosen so the batch operations run as C-level loops: the FIFO order is
a list of keys whose live part starts at ``_head`` (polling slices it and moves
the head; the dead prefix is cut off in one ``del`` once it is half the list),
and ``_values`` maps each queued key to its value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from itertools import islice
from typing import Generic, TypeVar, cast

V = TypeVar("V")

# Cutting the consumed prefix of the order list costs a memmove of the live
# part; doing it only when the prefix is large and at least half the list keeps
# it amortised O(1) per key.
_COMPACT_MIN = 4096


class SetQueue(Generic[V]):
    """A bounded FIFO of unique keys, safe to share between threads.

    Every method takes one short lock and never blocks on anything else; none
    raises except ``ValueError`` for a non-positive capacity. Cost per key in
    :meth:`offer_many` and :meth:`poll_many` is a few hundred nanoseconds.
    """

    def __init__(self, capacity: int, key: Callable[[V], Hashable] | None = None) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._key = key
        self._lock = threading.Lock()
        self._order: list[Hashable] = []
        self._head = 0
        self._values: dict[Hashable, V] = {}
        self._held_keys: set[Hashable] = set()
        # batch id -> (keys, values) in the order they were polled
        self._held: dict[Hashable, tuple[list[Hashable], list[V]]] = {}

    def _keys_of(self, values: list[V]) -> list[Hashable]:
        if self._key is None:
            return cast("list[Hashable]", values)
        return list(map(self._key, values))

    def offer(self, value: V) -> bool:
        """Queue one value at the back; False if its key is queued or held, or no room."""
        key = value if self._key is None else self._key(value)
        with self._lock:
            if key in self._values or key in self._held_keys or self._free() <= 0:
                return False
            self._values[key] = value
            self._order.append(key)
            return True

    def offer_many(self, values: Iterable[V]) -> int:
        """Queue values at the back, in order; return how many were accepted.

        Keys already queued or held are skipped (a queued key keeps its place);
        of the rest, only the first :meth:`free` are taken, the others are left
        out (the caller still owns them). A key repeated within ``values`` is
        taken once, with its first value.
        """
        values = values if isinstance(values, list) else list(values)
        keys = self._keys_of(values)
        fresh = dict(zip(keys, values, strict=True))  # built outside the lock
        if len(fresh) != len(keys):
            # Repeats within the offer: keep the first value of each key.
            fresh = {}
            for k, v in zip(keys, values, strict=True):
                fresh.setdefault(k, v)
        with self._lock:
            room = self._free()
            if room <= 0 or not fresh:
                return 0
            # Set operations on dict views run in C over the smaller side.
            known = (fresh.keys() & self._values.keys()) | (fresh.keys() & self._held_keys)
            if len(known) == len(fresh):
                return 0
            for k in known:
                del fresh[k]
            if len(fresh) > room:
                fresh = dict(islice(fresh.items(), room))
            self._values.update(fresh)
            self._order.extend(fresh)
            return len(fresh)

    def poll_many(self, n: int, batch_id: Hashable) -> list[V]:
        """Take up to ``n`` values from the head and hold them under ``batch_id``.

        Polling again with the same ``batch_id`` adds to that batch. The values'
        keys stay held (not offerable) until :meth:`ack` or :meth:`release`.
        """
        with self._lock:
            head = self._head
            keys = self._order[head : head + n] if n > 0 else []
            if not keys:
                return []
            self._head = head + len(keys)
            values = list(map(self._values.pop, keys))
            self._held_keys.update(keys)
            held = self._held.get(batch_id)
            if held is None:
                self._held[batch_id] = (keys, values)
            else:
                held[0].extend(keys)
                held[1].extend(values)
            self._compact()
            return values

    def ack(self, batch_id: Hashable) -> list[V]:
        """The batch is done: forget its held keys; return its values ([] if unknown)."""
        with self._lock:
            held = self._held.pop(batch_id, None)
            if held is None:
                return []
            self._held_keys.difference_update(held[0])
            return held[1]

    def release(self, batch_id: Hashable) -> int:
        """Give a batch's held keys back to the front of the queue, in their order.

        Returns how many were given back (0 for an unknown batch). Capacity is
        unaffected: the keys move from held to queued.
        """
        with self._lock:
            held = self._held.pop(batch_id, None)
            if held is None:
                return 0
            keys, values = held
            self._held_keys.difference_update(keys)
            # Replacing the consumed prefix puts the keys at the front in one step.
            self._order[: self._head] = keys
            self._head = 0
            self._values.update(zip(keys, values, strict=True))
            return len(keys)

    def drain(self) -> list[V]:
        """Remove and return every queued value in order (held ones stay held)."""
        with self._lock:
            keys = self._order[self._head :]
            values = list(map(self._values.pop, keys))
            self._order.clear()
            self._head = 0
            return values

    def free(self) -> int:
        """Room left: ``capacity - queued - held`` (held keys count against capacity)."""
        with self._lock:
            return self._free()

    def held_count(self) -> int:
        """How many keys are held by batches not yet acknowledged or released."""
        with self._lock:
            return len(self._held_keys)

    def __len__(self) -> int:
        """How many keys are queued (held ones not included)."""
        with self._lock:
            return len(self._order) - self._head

    def __contains__(self, key: object) -> bool:
        """True when the key is queued or held."""
        with self._lock:
            return key in self._values or key in self._held_keys

    def _free(self) -> int:
        return self.capacity - (len(self._order) - self._head) - len(self._held_keys)

    def _compact(self) -> None:
        head = self._head
        if head == len(self._order):
            self._order.clear()
            self._head = 0
        elif head >= _COMPACT_MIN and head * 2 >= len(self._order):
            del self._order[:head]
            self._head = 0
