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

A *newer version* of a queued or held key (an incremental source read the row
again after it changed: ``park(value)`` says so) is not dropped but *parked*,
one per key, the latest offered winning. A parked value goes out in place of
its key's queued one when that key is polled, and is queued at the back once
the batch holding its key is acknowledged: the change is imported after the
batch that may have read the row before it, never lost. Parked values do not
count against ``capacity``; there are never more of them than queued and held keys.

Layout, chosen so that every batch operation is a handful of C-level bulk
operations (set ``update``/``difference_update``/``isdisjoint``, list slices
and ``extend``) and no per-key Python code runs on the common path:

- ``_queued``: the set of queued keys; ``_held_keys``: the set of held keys;
- ``_keys`` (and ``_vals``, only when a ``key`` function is given: otherwise a
  value is its own key) hold the FIFO order; their live part starts at
  ``_head``. Polling slices them and moves the head; the dead prefix is cut
  off in one ``del`` once it is half the list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Offer(Generic[V]):
    """Values ready to be offered: their keys (first of each) and the set of them."""

    keys: list[Hashable]
    values: list[V]
    unique: set[Hashable]

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

    def __init__(
        self,
        capacity: int,
        key: Callable[[V], Hashable] | None = None,
        park: Callable[[V], bool] | None = None,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._key = key
        # Without a key function a value is its own key: nothing to park.
        self._park = park if key is not None else None
        self._parked: dict[Hashable, V] = {}
        self._lock = threading.Lock()
        self._keys: list[Hashable] = []
        self._vals: list[V] = []  # parallel to _keys; unused (empty) when key is None
        self._head = 0
        self._queued: set[Hashable] = set()
        self._held_keys: set[Hashable] = set()
        # batch id -> (keys, values) in the order they were polled (one list when key is None)
        self._held: dict[Hashable, tuple[list[Hashable], list[V]]] = {}

    def offer(self, value: V) -> bool:
        """Queue one value at the back; False if its key is queued or held, or no room."""
        return self.offer_many([value]) == 1

    def offer_many(self, values: Iterable[V]) -> int:
        """Queue values at the back, in order; return how many were accepted.

        Keys already queued or held are skipped (a queued key keeps its place),
        or parked when ``park`` calls the value a newer version; of the rest,
        only the first :meth:`free` are taken, the others are left out (the
        caller still owns them). A key repeated within ``values`` is taken
        once, with its first value.
        """
        return self.offer_prepared(self.prepare(values))

    def prepare(self, values: Iterable[V]) -> Offer[V]:
        """The costly half of :meth:`offer_many` (keys, hashes), without the lock.

        A caller that must offer under a lock of its own prepares first,
        outside it, then calls :meth:`offer_prepared` under it.
        """
        vals: list[V] = values if isinstance(values, list) else list(values)
        keys = cast("list[Hashable]", vals) if self._key is None else list(map(self._key, vals))
        unique = set(keys)
        if len(unique) != len(keys):
            # Repeats within the offer: keep the first value of each key, in order.
            firsts: dict[Hashable, V] = {}
            for k, v in zip(keys, vals, strict=True):
                firsts.setdefault(k, v)
            keys, vals = list(firsts), list(firsts.values())
        return Offer(keys, vals, unique)

    def offer_prepared(self, offer: Offer[V]) -> int:
        """Queue a prepared offer (see :meth:`offer_many`); C-level set work only."""
        keys, vals = offer.keys, offer.values
        if not keys:
            return 0
        with self._lock:
            queued, held = self._queued, self._held_keys
            # Set-to-set operations reuse the hashes stored in the offer's set.
            unique: set[Hashable] | None = offer.unique
            if not (queued.isdisjoint(offer.unique) and held.isdisjoint(offer.unique)):
                # Some keys are known: the slow path, per key, for those offers only.
                fresh = [i for i, k in enumerate(keys) if k not in queued and k not in held]
                if self._park is not None and len(fresh) < len(keys):
                    self._park_known(keys, vals, fresh)
                keys = [keys[i] for i in fresh]
                vals = [vals[i] for i in fresh]
                unique = None
            room = self._free()
            if room <= 0 or not keys:
                return 0
            if len(keys) > room:
                keys, vals, unique = keys[:room], vals[:room], None
            queued.update(keys if unique is None else unique)
            self._keys.extend(keys)
            if self._key is not None:
                self._vals.extend(vals)
            return len(keys)

    def poll_many(self, n: int, batch_id: Hashable) -> list[V]:
        """Take up to ``n`` values from the head and hold them under ``batch_id``.

        Polling again with the same ``batch_id`` adds to that batch. The values'
        keys stay held (not offerable) until :meth:`ack` or :meth:`release`.
        """
        with self._lock:
            head = self._head
            keys = self._keys[head : head + n] if n > 0 else []
            if not keys:
                return []
            end = head + len(keys)
            values = cast("list[V]", keys) if self._key is None else self._vals[head:end]
            self._head = end
            self._queued.difference_update(keys)
            self._held_keys.update(keys)
            if self._parked:
                # A newer version waiting for its key goes out instead of the old one.
                parked = self._parked
                values = [parked.pop(k, v) for k, v in zip(keys, values, strict=True)]
            held = self._held.get(batch_id)
            if held is None:
                self._held[batch_id] = (keys, values)
            else:
                held[0].extend(keys)
                if held[1] is not held[0]:
                    held[1].extend(values)
            self._compact()
            return list(values)  # the caller's own list: later polls extend the held one

    def ack(self, batch_id: Hashable) -> list[V]:
        """The batch is done: forget its held keys; return its values ([] if unknown).

        Newer versions parked for those keys are queued at the back.
        """
        with self._lock:
            held = self._held.pop(batch_id, None)
            if held is None:
                return []
            self._held_keys.difference_update(held[0])
            if self._parked:
                self._requeue_parked(held[0])
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
            self._keys[: self._head] = keys
            if self._key is not None:
                self._vals[: self._head] = values
            self._head = 0
            self._queued.update(keys)
            return len(keys)

    def drain(self) -> list[V]:
        """Remove and return every queued value in order (held ones stay held).

        A queued key's parked newer version is returned in its place; those
        of held keys stay parked.
        """
        with self._lock:
            head = self._head
            values = cast("list[V]", self._keys[head:]) if self._key is None else self._vals[head:]
            if self._parked:
                parked = self._parked
                values = [parked.pop(k, v) for k, v in zip(self._keys[head:], values, strict=True)]
            self._keys.clear()
            self._vals.clear()
            self._head = 0
            self._queued.clear()
            return values

    def values(self) -> list[V]:
        """Every value queued, held or parked, in no particular order (a snapshot)."""
        with self._lock:
            queued = self._keys[self._head :] if self._key is None else self._vals[self._head :]
            held = [v for _, vals in self._held.values() for v in vals]
            return [*cast("list[V]", queued), *held, *self._parked.values()]

    def free(self) -> int:
        """Room left: ``capacity - queued - held`` (held keys count against capacity)."""
        with self._lock:
            return self._free()

    def parked_count(self) -> int:
        """How many newer versions wait for their key's batch (or turn) to end."""
        with self._lock:
            return len(self._parked)

    def held_count(self) -> int:
        """How many keys are held by batches not yet acknowledged or released."""
        with self._lock:
            return len(self._held_keys)

    def rows(self) -> int:
        """How many keys are queued: :meth:`__len__`, as a buffer of ranges counts rows."""
        return len(self)

    def __len__(self) -> int:
        """How many keys are queued (held ones not included)."""
        with self._lock:
            return len(self._queued)

    def __contains__(self, key: object) -> bool:
        """True when the key is queued or held."""
        with self._lock:
            return key in self._queued or key in self._held_keys

    def _park_known(self, keys: list[Hashable], vals: list[V], fresh: list[int]) -> None:
        """Under the lock: park the newer versions among values whose key is known."""
        is_fresh = set(fresh)
        park = self._park
        assert park is not None
        for i, k in enumerate(keys):
            if i not in is_fresh and park(vals[i]):
                self._parked[k] = vals[i]  # the latest offered is the newest read

    def _requeue_parked(self, keys: list[Hashable]) -> None:
        """Under the lock: queue at the back the parked versions of keys no longer held."""
        parked = self._parked
        for k in keys:
            if k in parked:  # neither queued nor held now: its own place at the back
                self._queued.add(k)
                self._keys.append(k)
                self._vals.append(parked.pop(k))

    def _free(self) -> int:
        return self.capacity - len(self._queued) - len(self._held_keys)

    def _compact(self) -> None:
        head = self._head
        if head == len(self._keys):
            self._keys.clear()
            self._vals.clear()
            self._head = 0
        elif head >= _COMPACT_MIN and head * 2 >= len(self._keys):
            del self._keys[:head]
            if self._key is not None:
                del self._vals[:head]
            self._head = 0
