"""The changes made while a full load was read as the table then was, put in as each row's
last state.

A source that exports no snapshot (MariaDB, MySQL) has its full load's key
ranges read by their importers as the table is when each is read: some moment
after the stream's start. A change made between the start and that moment is
in the range's rows already; applied again after them, in order, it would take
its row back to an older state until the changes after it came (and a unique
index of the target might refuse that older state for a while). So once the
target holds every range, the changes from the stream's start up to then are
read at once and handed out as each row's last state: a delete, or the whole
row, which the binary log's row images carry. That state is at least as new as
any range's read of the row, so no row goes back; the changes after follow one
by one, as always. What this holds in memory is one row image per row changed
during the load.

The load's progress says where it stands (a span's ``version``,
:meth:`~sources.stream_spans.LoadProgress.catching_up`): ``catch up after P``
once every range is handed out, ``P`` the stream's start, so that a daemon
started again mid-way reads the same changes again (their last states again, or
newer ones) rather than one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sources.stream_backends import Backend, Txn
from sources.stream_spans import DONE, LoadProgress, Position
from spark_jobs.changes.change_batches import Key, StreamEvent

READ = 20_000
"""Messages of the binary log read at a time while catching up."""


def read_since(
    stream: Backend, key: Sequence[str], start: int
) -> tuple[LastStates, int, Txn | None]:
    """The last states of ``stream``'s rows changed after position ``start`` up to the
    source's position now (or past it: whole reads), where the reads got to, and the last
    transaction read (None: none)."""
    states = LastStates(tuple(key))
    read_to, last = _read_after(stream, start, states.feed)
    return states, read_to, last


def touched_since(stream: Backend, key: Sequence[str], start: int) -> tuple[Touched, int]:
    """The keys of ``stream``'s rows changed after position ``start`` up to the source's
    position now (or past it), and where the reads got to: keys only, no row kept."""
    touched = Touched(tuple(key))
    read_to, _ = _read_after(stream, start, touched.feed)
    return touched, read_to


def _read_after(
    stream: Backend, start: int, feed: Callable[[list[Txn]], None]
) -> tuple[int, Txn | None]:
    """Read ``stream`` after ``start`` up to its position now, each read's transactions
    fed to ``feed``; where the reads got to, and the last transaction read."""
    read_to, until, last = start, stream.position(), None
    while read_to < until:
        found = stream.read(read_to, READ)
        feed(found)
        if found:
            last = found[-1]
        reached = max(read_to, stream.reached, *(t.end for t in found))
        stalled = reached == read_to
        read_to = reached
        if stalled or stream.at_end:
            break
    return read_to, last


@dataclass
class _Fed:
    """What the changes of the transactions fed leave (see :class:`Touched`,
    :class:`LastStates`): ``key``, the table's key columns; ``changes``, how many were fed;
    ``truncated``, whether one truncated the table."""

    key: tuple[str, ...]
    truncated: bool = False
    changes: int = 0

    def feed(self, transactions: Iterable[Txn]) -> None:
        """Take in ``transactions``' changes, in commit order."""
        for txn in transactions:
            for change in txn.changes:
                self.changes += 1
                event = StreamEvent.of(change, self.key)
                if event.op == "truncate":
                    self.truncated = True
                    self._truncate()
                else:
                    self._take(event)

    def _truncate(self) -> None:
        """A truncate was fed (after what was fed before it)."""

    def _take(self, event: StreamEvent) -> None:
        raise NotImplementedError


@dataclass
class Touched(_Fed):
    """The keys of the rows the transactions fed changed (a moved row's old key too), and
    whether one truncated the table."""

    keys: set[Key] = field(default_factory=set)

    def _take(self, event: StreamEvent) -> None:
        if event.moved_from is not None:
            self.keys.add(event.moved_from)
        self.keys.add(event.key_values)


@dataclass(frozen=True)
class CaughtUp:
    """What catching up hands out: ``out``, each event at its position with the load's
    progress after it; ``read_to``, where the reads got to; ``last``, the last transaction
    read (None: none); ``changes``, how many were read."""

    out: list[tuple[Position, StreamEvent, LoadProgress]]
    read_to: int
    last: Txn | None
    changes: int


def catch_up(stream: Backend, key: Sequence[str], start: int, after: Position | None,
             progress: LoadProgress) -> CaughtUp:  # fmt: skip
    """The changes of ``stream`` since ``start`` as each row's last state, at the position of
    the last one read, past ``after`` (a restart's claims); ``progress`` (the load's, catching
    up) on all but the last, which says the load is done."""
    states, read_to, last = read_since(stream, key, start)
    events = states.events()
    out = [((read_to, n), event, LoadProgress(DONE) if n == len(events) else progress)
           for n, event in enumerate(events, 1)
           if after is None or (read_to, n) > after]  # fmt: skip
    return CaughtUp(out, read_to, last, states.changes)


@dataclass
class LastStates(_Fed):
    """Each row's last state over the transactions fed, in the order of the rows' last changes.

    ``key``: the table's key columns. A change that moves a row's key leaves a delete
    at the old key; a truncate forgets every row before it and goes first.
    """

    _last: dict[Key, StreamEvent] = field(default_factory=dict)

    def _truncate(self) -> None:
        self._last.clear()

    def _take(self, event: StreamEvent) -> None:
        if event.moved_from is not None:
            self._put(event.moved_from, StreamEvent("delete", event.moved_from))
            event = StreamEvent(event.op, event.key_values, None, event.new)
        self._put(event.key_values, event)

    def events(self) -> list[StreamEvent]:
        """What the changes fed leave: a truncate where there was one, then each row's last
        state."""
        return [StreamEvent("truncate")] * self.truncated + list(self._last.values())

    def _put(self, key: Key, event: StreamEvent) -> None:
        # Moved to the end: the events come in the order of each row's last change.
        self._last.pop(key, None)
        self._last[key] = event
