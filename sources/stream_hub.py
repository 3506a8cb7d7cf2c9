"""One logical slot and one publication read for every table of a ``tables:`` group.

A slot per table does not scale: a server has ``max_replication_slots`` (10 by
default), and each slot decodes the whole WAL again. The tables of a group share
one :class:`SharedSlot` (publication and slot named after the group), and the
stream sources of its tables read it through this process's one instance
(:func:`take_slot`): the slot is peeked once for all of them, and what it
decoded is kept (:attr:`SharedSlot.cached`) until every table has read past it,
so that a table asking within :data:`REFRESH` seconds of the last peek for what it
brought costs no decoding.

The slot moves on only as far as every table allows (:meth:`SharedSlot.acknowledge`):
each says the position before which it needs nothing again, and the slot goes to
the least of them. A table of the group that has said nothing yet holds it where
it is.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Generic, TypeVar, cast

import sqlalchemy as sa

from config.errors import SourceError
from sources.pg_changes import PgChangeStream, StreamNames
from spark_jobs.engines.postgresql.pgoutput import Transaction

T = TypeVar("T")
S = TypeVar("S")
Guard = Callable[[Callable[[], T]], T]
"""Runs a call to the database under a permit of its budget, its errors as SourceError."""

REFRESH = 0.1
"""Seconds a read that reached the slot's end answers other tables of the group before
the slot is peeked again."""

_BUSY_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 0.0)
"""A slot serves one session at a time: while another daemon's read holds it (hot-hot),
a read waits its turn a little, these many seconds between tries."""


def _messages(txn: Transaction) -> int:
    """About how many of the slot's messages a transaction took (begin, relations, commit)."""
    return len(txn.changes) + len(txn.messages) + 3


class SharedSlot:
    """The publication and slot ``names`` on ``engine``'s database, for the tables that
    :meth:`join` (``schema.table``); ``label`` names it in errors."""

    def __init__(self, engine: sa.Engine, names: StreamNames, label: str) -> None:
        self.names = names
        self._stream = PgChangeStream(engine, [], names, label)
        self._lock = threading.Lock()
        self._members: dict[str, int | None] = {}  # table → where it lets the slot go
        self._opened: set[str] = set()
        self.cached: list[Transaction] = []  # decoded past the slot's position, in order
        self._ends: list[int] = []  # each cached transaction's end LSN
        self._counts: list[int] = []  # the slot's messages up to and with each
        self._cached_at_end = False
        self._read_at = -1e9  # time.monotonic() of the last peek
        self._acked = 0
        self._dropped = False
        self._ready: dict[str, Callable[[], object]] = {}  # table → its check before publishing
        self._snapshot_tables: set[str] = set()  # whose full loads read the exported snapshot
        self._consistent = 0  # the slot's consistent point, where a slot made here starts

    # -- the tables ----------------------------------------------------------------

    def join(self, table: str, ready: Callable[[], object] | None = None) -> None:
        """``table`` reads this slot from now on (before :meth:`open`); ``ready``: its check
        before it is published (raises for a table whose changes would not carry its key)."""
        with self._lock:
            self._members.setdefault(table, None)
            if ready is not None:
                self._ready[table] = ready

    def open(self, table: str, guard: Guard[object]) -> None:
        """Make the publication (with ``table`` in it) and the slot, where missing.

        The first table opened here opens every table that joined by then, each checked
        before any is published, and the publication holds them all before the slot is
        made: a slot made here exports its snapshot, and their full loads read it
        (:meth:`snapshot_of`). A table published after the slot was made has its changes
        from then on only: its load reads between watermarks instead.
        """
        with self._lock:
            if table in self._opened:
                return
            tables = [table] if self._opened else list(dict.fromkeys([*self._members, table]))
            for member in tables:
                if member in self._ready:
                    self._ready[member]()
            if not self._opened:
                self._stream.tables = tables
                self._consistent = cast(int, guard(lambda: self._stream.open(export=True)))
                if self._stream.snapshot is not None:
                    self._snapshot_tables = set(tables)
            for member in tables:
                guard(lambda member=member: self._stream.publish(member))  # type: ignore[misc]
                self._opened.add(member)
            self._dropped = False

    def snapshot_of(self, table: str) -> tuple[str, int] | None:
        """The snapshot ``table``'s full load reads and the position the slot starts at (its
        changes come after it); None: no snapshot serves it (a slot made before this
        process, a table published after the slot was made, its load done)."""
        with self._lock:
            if table in self._snapshot_tables and self._stream.snapshot is not None:
                return self._stream.snapshot, self._consistent
            return None

    def loaded(self, table: str) -> None:
        """``table`` needs the snapshot no more; once no table does, it is let go."""
        with self._lock:
            self._snapshot_tables.discard(table)
            if not self._snapshot_tables:
                self._stream.release_snapshot()

    @property
    def made_slot(self) -> bool:
        """Whether this process made the slot (it holds nothing from before it)."""
        return "slot" in self._stream.made

    # -- reading ----------------------------------------------------------------------

    def changes(
        self, after: int, wanted: int, guard: Guard[list[Transaction]]
    ) -> tuple[list[Transaction], bool]:
        """The transactions that end past ``after``, about ``wanted`` messages of them where
        the slot has them; and whether they reach the slot's end.

        Of a group, what was peeked less than :data:`REFRESH` seconds ago answers as long
        as it holds something past ``after`` (or it reached the end): a backlog is decoded
        once for the group, not once per table."""
        with self._lock:
            start = bisect_right(self._ends, after)
            fresh = time.monotonic() - self._read_at <= REFRESH and len(self._members) > 1
            if not fresh or (start == len(self.cached) and not self._cached_at_end):
                behind = self._counts[start - 1] if start else 0
                self._peek(max(behind + wanted, self._counts[-1] if self._counts else 0), guard)
                start = bisect_right(self._ends, after)
            return self.cached[start:], self._cached_at_end

    def _peek(self, messages: int, guard: Guard[list[Transaction]]) -> None:
        for pause in _BUSY_PAUSES:
            try:
                found = guard(lambda: self._stream.changes(self._acked, messages))
                break
            except SourceError as error:
                if "is active for PID" not in str(error) or not pause:
                    raise
                time.sleep(pause)
        self._cache(found)
        self._cached_at_end = self._stream.at_end
        self._read_at = time.monotonic()

    def _cache(self, transactions: list[Transaction]) -> None:
        """Keep ``transactions``, with their ends and the messages up to each, for bisecting."""
        self.cached = transactions
        self._ends = [t.end_lsn for t in transactions]
        self._counts = list(accumulate(map(_messages, transactions)))

    def acknowledge(self, table: str, lsn: int, guard: Guard[None]) -> None:
        """``table`` needs nothing before ``lsn`` again; the slot moves to the least position
        every table of the group allows."""
        with self._lock:
            self._members[table] = max(lsn, self._members.get(table) or 0)
            allowed = list(self._members.values())
            if None in allowed:
                return
            least = min(at for at in allowed if at is not None)
            if least <= self._acked:
                return
            guard(lambda: self._stream.acknowledge(least))
            self._acked = least
            self._cache(self.cached[bisect_right(self._ends, least) :])

    # -- the server's side --------------------------------------------------------------

    def mark(self, prefix: str, content: str, guard: Guard[int]) -> int:
        """A watermark into the slot's stream (see :meth:`PgChangeStream.mark`)."""
        return guard(lambda: self._stream.mark(prefix, content))

    def retained_bytes(self, guard: Guard[int | None]) -> int | None:
        return guard(self._stream.retained_bytes)

    def drop(self, guard: Guard[bool]) -> bool:
        """Drop sluice's own slot and publication, once for the group."""
        with self._lock:
            if self._dropped:
                return False
            self._dropped = True
            self._opened.clear()
            return guard(self._stream.drop)

    def undo(self, guard: Guard[list[str]]) -> list[str]:
        """Drop what this process's :meth:`open` made (a start that failed)."""
        with self._lock:
            self._opened.clear()
            return guard(self._stream.undo)


class Shared(Generic[S]):
    """This process's one instance per key of something several sources read (a slot, a
    binary-log reader), counted: the last source to give it back forgets it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], tuple[S, int]] = {}

    def take(self, key: tuple[str, str], make: Callable[[], S]) -> S:
        """The instance of ``key``, made by ``make`` when there is none."""
        with self._lock:
            found, users = self._held.get(key, (None, 0))
            if found is None:
                found = make()
            self._held[key] = (found, users + 1)
            return found

    def give_back(self, key: tuple[str, str], instance: S) -> None:
        """One source less reads ``instance``."""
        with self._lock:
            found, users = self._held.get(key, (None, 0))
            if found is not instance:
                return
            if users <= 1:
                del self._held[key]
            else:
                self._held[key] = (found, users - 1)


_slots: Shared[SharedSlot] = Shared()


def _slot_key(engine: sa.Engine, slot: str) -> tuple[str, str]:
    return engine.url.render_as_string(hide_password=True), slot


def take_slot(engine: sa.Engine, names: StreamNames, label: str) -> SharedSlot:
    """This process's :class:`SharedSlot` of ``names`` on ``engine``'s database, for one of
    its tables; :func:`give_back` when done with it."""
    return _slots.take(_slot_key(engine, names.slot), lambda: SharedSlot(engine, names, label))


def give_back(slot: SharedSlot, engine: sa.Engine) -> None:
    """One table less reads ``slot``."""
    _slots.give_back(_slot_key(engine, slot.names.slot), slot)
