"""A table's existing rows loaded beside its change stream, without locks: DBLog's watermarks.

A full load reads the table in key chunks while the stream runs. Each chunk
is read between two marks written into the stream itself, a low watermark
before the ``SELECT`` and a high one after it. In the stream's (commit)
order, a change between a chunk's low and high watermarks may or may not be
in what the ``SELECT`` saw, so the chunk's row of every key such a change
touches is dropped: the change itself brings that key's state, in order.
The chunk's other rows did not change while it was read; they are handed out
at the high watermark, where they belong in the stream's order, and every
later change applies on top of them. Nothing is locked or paused; no row is
lost, and none goes back to an older state (Netflix's DBLog; Debezium's
incremental snapshots use the same rule).

:class:`Reconciler` does the merging for any stream whose changes have
``key(columns)`` and ``old_key(columns)``: the caller writes the low mark,
reads the chunk, hands it over with :meth:`Reconciler.chunk`, writes the high
mark, and feeds every transaction of the stream, in order, to
:meth:`Reconciler.feed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spark_jobs.changes.change_batches import ChunkRow, CopyRows, Key

PREFIX = "sluice.watermark"
"""The prefix of sluice's watermark messages in a change stream."""


class RowChange(Protocol):
    """What the reconciler needs of a change: the row's key, and its key before an update
    that changed it."""

    def key(self, columns: Iterable[str]) -> Key: ...

    def old_key(self, columns: Iterable[str]) -> Key | None: ...


_WHOLE: dict[str, Any] = {}
"""The row of each key of a chunk read whole (:class:`CopyRows`): its lines hold them."""


@dataclass
class _Window:
    rows: dict[Key, dict[str, Any]] | None = None  # None until the chunk was read
    changed: set[Key] = field(default_factory=set)
    open: bool = False  # the low watermark was seen in the stream
    block: CopyRows | None = None  # a chunk read whole (rows: its keys, each to _WHOLE)


def low(chunk: str) -> str:
    """The content of ``chunk``'s low watermark message."""
    return f"low:{chunk}"


def high(chunk: str) -> str:
    """The content of ``chunk``'s high watermark message."""
    return f"high:{chunk}"


class Reconciler:
    """Merges chunks read between watermarks into a change stream's order.

    ``key_columns``: the table's key. The output of :meth:`feed` is the stream's
    changes, as they come, and at each chunk's high watermark that chunk's rows
    that no change touched between its watermarks (:class:`ChunkRow`, or one
    :class:`CopyRows` of a chunk read whole).
    """

    def __init__(self, key_columns: Sequence[str]) -> None:
        self.key_columns = tuple(key_columns)
        self._windows: dict[str, _Window] = {}

    def chunk(self, chunk: str, rows: Iterable[dict[str, Any]] | CopyRows) -> None:
        """The rows ``chunk`` read between its watermarks (each a mapping with the key's
        columns, or a whole chunk, handed out whole). Call it before the high watermark is
        written."""
        window = self._windows.setdefault(chunk, _Window())
        if isinstance(rows, CopyRows):
            # Its keys, for holds_back and the changes in its window; the rows stay whole.
            window.block, window.rows = rows, dict.fromkeys(rows.keys, _WHOLE)
            return
        window.rows = {tuple(row[c] for c in self.key_columns): dict(row) for row in rows}

    def holds_back(self, key: Key) -> bool:
        """Whether a chunk whose window is open read ``key``: a change of it now drops that
        row, and the change alone must bring the row's every value."""
        return any(w.open and w.rows is not None and key in w.rows for w in self._windows.values())

    @property
    def pending(self) -> list[str]:
        """Chunks whose high watermark the stream has not brought yet."""
        return list(self._windows)

    def feed(self, marks: Sequence[str], changes: Sequence[RowChange]) -> list[Any]:
        """One transaction of the stream: its watermark messages (``low:…``/``high:…``, see
        :func:`low`, :func:`high`) and its changes. The changes, then the rows of every chunk
        it closes.

        A watermark is a transaction of its own, so no transaction holds both.
        Raises ValueError for a high watermark whose chunk was never handed over, or
        whose low watermark the stream did not bring before it.
        """
        out: list[Any] = list(changes)
        touched: set[Key] = set()
        for change in changes:
            if getattr(change, "op", None) == "truncate":
                # Every row the chunk read may be gone: none of them is handed out.
                for window in self._windows.values():
                    if window.open and window.rows is not None:
                        window.rows = {}
                        if window.block is not None:
                            window.block = CopyRows(window.block.columns, "", 0)
                continue
            touched.add(change.key(self.key_columns))
            before = change.old_key(self.key_columns)
            if before is not None:
                touched.add(before)
        if touched:
            for window in self._windows.values():
                if window.open:
                    window.changed |= touched
        for mark in marks:
            kind, _, chunk = mark.partition(":")
            if kind == "low":
                self._windows.setdefault(chunk, _Window()).open = True
            elif kind == "high":
                window = self._windows.pop(chunk, _Window())
                if window.rows is None or not window.open:
                    raise ValueError(f"high watermark of chunk {chunk!r} without its low "
                                     "watermark before it, or never read")  # fmt: skip
                if window.block is not None:
                    kept = window.block.without(window.changed)
                    if kept.rows:
                        out.append(kept)
                    continue
                out.extend(ChunkRow(key, row) for key, row in window.rows.items()
                           if key not in window.changed)  # fmt: skip
        return out
