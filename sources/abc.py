"""The source interface: what the scheduler may ask of any source.

A source hands out *items* (a source name, a key, optionally a payload and an
ack handle) in bounded amounts. It never blocks the scheduler: the scheduler
only talks to a :class:`~sources.queueing.QueueingLimitedSource`, which calls
``next_batch`` on a background thread.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

Key = Hashable
"""A record's key: a scalar (int, str) or a tuple for composite keys."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__,
# which made an Item cost 0.84 us to build instead of 0.22 us, and a refill
# builds one per key of the table. Items are never changed once built; the
# hash is that of the compared fields, as a frozen one's would be.
@dataclass(slots=True, unsafe_hash=True)
class Item:
    """One record, or one range of records, to migrate; treat it as immutable.

    ``key`` identifies the record within its source; ``payload`` carries the
    record itself when the source cannot be re-read (an SQS body); ``handle``
    is what the source needs to acknowledge it (an SQS receipt handle).
    ``version`` distinguishes re-migrations of the same key (the cursor value
    in incremental mode), empty otherwise.

    A keyset source hands out *ranges* instead: ``key`` is the last key of
    the range (it starts after the previous range's), ``rows`` how many rows
    it holds; every limit and share counts those rows. ``held``: what it
    holds in memory, in rows, where that is not ``rows`` (a stream's load
    range, 1: its importer reads its rows); a buffer's capacity counts it.
    Items are hashed by value, ``rows``, ``held`` and ``handle`` aside.
    """

    source: str
    key: Key
    payload: Any = None
    handle: Any = field(default=None, compare=False)
    version: str = ""
    rows: int = field(default=1, compare=False)
    held: int | None = field(default=None, compare=False)

    @property
    def weight(self) -> int:
        """Rows it holds in memory: ``held``, else ``rows``."""
        return self.rows if self.held is None else self.held


class LimitedSource(abc.ABC):
    """A source that returns at most ``limit`` items per call.

    ``next_batch`` may block on I/O (it runs on a refill thread) and may raise:
    errors are the caller's to retry. It never returns more than ``limit``
    items and never the same item twice within one run, unless the item was
    given back with :meth:`release`.

    A source whose items are ranges (``weighs_rows``: a keyset walk) counts
    ``limit`` in rows, not items: the ranges it returns hold at most
    ``limit`` rows together, each range adjacent to the one before.
    """

    name: str
    weighs_rows: bool = False

    @abc.abstractmethod
    def next_batch(self, limit: int) -> list[Item]:
        """Return up to ``limit`` new items; an empty list means nothing now."""

    @property
    def exhausted(self) -> bool:
        """True when the last read reached the end of what is there now."""
        return False

    def backlog(self) -> int | None:
        """How many items are left to hand out, if the source can tell; read-only.

        May block on I/O like :meth:`next_batch` (``sluice plan`` calls it,
        never the main loop). None means the source cannot tell.
        """
        return None

    def ack(self, items: Sequence[Item]) -> None:  # noqa: B027 - optional hook
        """The items' batch is done: forget them for good (SQS: delete)."""

    def release(self, items: Sequence[Item]) -> None:  # noqa: B027 - optional hook
        """The items were not used: make them available again."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; called once at shutdown."""


class MemorySource(LimitedSource):
    """An in-memory fake: hands out the given keys in order, then nothing.

    ``fail_next`` makes the next call raise (to exercise retries); ``gate``,
    when set, is waited on inside ``next_batch`` (to simulate a slow source).
    """

    def __init__(self, name: str, keys: Sequence[Key] = ()) -> None:
        self.name = name
        self._keys = list(keys)
        self._pos = 0
        self.calls = 0
        self.fail_next: Exception | None = None
        self.gate: Any = None

    def add(self, keys: Sequence[Key]) -> None:
        """Append keys that later calls will hand out."""
        self._keys.extend(keys)

    def next_batch(self, limit: int) -> list[Item]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait()
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        chunk = self._keys[self._pos : self._pos + limit]
        self._pos += len(chunk)
        return [Item(self.name, key) for key in chunk]

    @property
    def exhausted(self) -> bool:
        return self._pos >= len(self._keys)

    def backlog(self) -> int:
        return len(self._keys) - self._pos
