"""A batch of a change stream reduced to what its target must do: each key's last state.

A key changed several times in one batch is written once, with its last state;
a deleted key is removed (and one deleted then inserted again is written); a
key that moved (an update of the key's columns) is removed under its old key
and written under its new one. A truncate voids what came before it in the
batch and empties the table first. Rows from a full load's chunks
(:class:`ChunkRow`) are written like inserts, where the stream's order put them;
a PostgreSQL chunk comes whole (:class:`CopyRows`, its rows as COPY prints them)
and goes in by COPY, with no Python per row: a batch is applied as
:func:`segments`, in order. A full load read in the slot's snapshot travels as
key ranges (:class:`LoadRange`): the target's importer reads each range itself,
in that snapshot, and COPYs it in; such batches hold no change and apply side by
side (:mod:`spark_jobs.changes.load_ranges`).

A batch travels in its manifest as :class:`StreamEvent` JSON texts, one per
change, chunk row or whole chunk, in the stream's order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.engines.postgresql.pgoutput import UNCHANGED

Key = tuple[Any, ...]


@dataclass(frozen=True)
class ChunkRow:
    """A row of a full load's chunk, handed out at the chunk's high watermark: ``row`` as
    read (see :mod:`sources.watermarks`)."""

    key: Key
    row: dict[str, Any]


@dataclass(frozen=True)
class CopyRows:
    """A full load's chunk as PostgreSQL's text COPY prints it, handed out whole at the
    chunk's high watermark (one event): ``columns`` in the lines' order, ``text`` the
    lines (each ending in a newline), ``rows`` how many, ``keys`` each line's key as the
    stream prints it (empty once read back from a batch: its target needs none), ``bounds``
    its first and last key (every line's key lies between)."""

    columns: tuple[str, ...]
    text: str
    rows: int
    keys: tuple[Key, ...] = ()
    bounds: tuple[Key, Key] | None = None

    def without(self, changed: set[Key]) -> CopyRows:
        """The chunk without the rows of ``changed`` keys (a change between its watermarks
        brings those, in order)."""
        if not changed.intersection(self.keys):
            return self
        kept = [(line, key) for line, key in zip(self.text.split("\n"), self.keys, strict=False)
                if key not in changed]  # fmt: skip
        return CopyRows(self.columns, "".join(f"{line}\n" for line, _ in kept), len(kept),
                        tuple(key for _, key in kept), self.bounds)  # fmt: skip


@dataclass(frozen=True)
class LoadRange:
    """A key range of a full load read in the slot's exported snapshot: the rows whose key
    lies after ``after`` (None: from the first) up to ``upto`` (None: to the last), as the
    snapshot ``snapshot`` holds them, ``rows`` of them; keys as the stream prints them,
    ``columns`` the table's in the order read, ``types`` theirs as the source's catalogue
    spells them. Its
    importer reads it from the source (:mod:`spark_jobs.changes.load_ranges`): a batch of ranges
    carries no row."""

    after: Key | None
    upto: Key | None
    snapshot: str
    rows: int
    columns: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamEvent:
    """One change of a stream source as a batch carries it, its key already taken out.

    ``op``: ``insert``, ``update``, ``delete``, ``truncate``, or ``row`` (a
    full load's row, written like an insert). ``key_values``: the row's key
    (before a delete); ``moved_from``: the key before an update that changed
    it; ``new``: the row after an insert, update or load, each value as the
    stream gave it (PostgreSQL: the type's text output; None for NULL), or
    :data:`UNCHANGED` for a value the stream did not send (a TOASTed value an
    update left alone). ``op`` ``copy``: a whole chunk, ``block``; ``range``: a key range
    of the full load, ``span``.
    """

    op: str
    key_values: Key = ()
    moved_from: Key | None = None
    new: dict[str, Any] | None = None
    block: CopyRows | None = None
    span: LoadRange | None = None

    @property
    def rows(self) -> int:
        """The rows the event writes: a chunk's or a range's, or one."""
        if self.span is not None:
            return self.span.rows
        return 1 if self.block is None else self.block.rows

    def key(self, columns: Iterable[str] = ()) -> Key:
        """The row's key (the columns were taken out when the event was made)."""
        return self.key_values

    def old_key(self, columns: Iterable[str] = ()) -> Key | None:
        """The key before an update that changed it; None otherwise."""
        return self.moved_from

    def to_json(self) -> str:
        """JSON text: ``op``, ``key``, and where there are, ``from``, ``new``, ``unchanged``;
        a chunk's ``columns``, ``text`` and ``rows``; a range's ``after``, ``upto``,
        ``snapshot`` and ``rows``."""
        if self.span is not None:
            r = self.span
            ends = {"op": self.op, "after": None if r.after is None else list(r.after),
                    "upto": None if r.upto is None else list(r.upto), "snapshot": r.snapshot,
                    "rows": r.rows, "columns": list(r.columns), "types": list(r.types)}
            return json.dumps(ends, separators=(",", ":"), default=str)
        if self.block is not None:
            b = self.block
            whole = {"op": self.op, "columns": list(b.columns), "text": b.text, "rows": b.rows,
                     "bounds": b.bounds}  # fmt: skip
            return json.dumps(whole, separators=(",", ":"))
        out: dict[str, Any] = {"op": self.op, "key": list(self.key_values)}
        if self.moved_from is not None:
            out["from"] = list(self.moved_from)
        if self.new is not None:
            out["new"] = {c: v for c, v in self.new.items() if v is not UNCHANGED}
            unchanged = [c for c, v in self.new.items() if v is UNCHANGED]
            if unchanged:
                out["unchanged"] = unchanged
        return json.dumps(out, separators=(",", ":"), default=str)

    @classmethod
    def from_json(cls, text: str) -> StreamEvent:
        """Read back what :meth:`to_json` wrote (the columns in their order, unsent ones
        :data:`UNCHANGED` again)."""
        data = json.loads(text)
        if data["op"] == "range":
            after, upto = data["after"], data["upto"]
            return cls("range", span=LoadRange(None if after is None else tuple(after),
                                               None if upto is None else tuple(upto),
                                               data["snapshot"], data["rows"],
                                               tuple(data["columns"]),
                                               tuple(data["types"])))  # fmt: skip
        if data["op"] == "copy":
            ends = data.get("bounds")
            bounds = None if ends is None else (tuple(ends[0]), tuple(ends[1]))
            return cls("copy", block=CopyRows(tuple(data["columns"]), data["text"], data["rows"],
                                              bounds=bounds))  # fmt: skip
        new = data.get("new")
        if new is not None:
            new.update(dict.fromkeys(data.get("unchanged", ()), UNCHANGED))
        moved = data.get("from")
        return cls(data["op"], tuple(data["key"]), None if moved is None else tuple(moved), new)

    @classmethod
    def of(cls, change: Any, key_columns: Sequence[str]) -> StreamEvent:
        """The event of a stream's change (anything with ``op``, ``new``, ``key(columns)``
        and ``old_key(columns)``, such as a decoded ``pgoutput`` change) or of a
        :class:`ChunkRow` or :class:`CopyRows`."""
        if isinstance(change, ChunkRow):
            return cls("row", tuple(change.key), None, dict(change.row))
        if isinstance(change, CopyRows):
            return cls("copy", block=change)
        if isinstance(change, LoadRange):
            return cls("range", span=change)
        if change.op == "truncate":
            return cls("truncate")
        return cls(
            change.op,
            tuple(change.key(key_columns)),
            change.old_key(key_columns),
            change.new if change.op != "delete" else None,
        )


@dataclass
class NetBatch:
    """What a batch of changes does to its target, in one transaction.

    ``truncate``: empty the table first. ``deletes``: keys to remove. ``upserts``:
    key → the row's last state; a column whose value is the stream's unchanged marker
    keeps the value the target holds (an update that did not touch a TOASTed value).
    """

    truncate: bool = False
    deletes: set[Key] = field(default_factory=set)
    upserts: dict[Key, dict[str, Any]] = field(default_factory=dict)


def segments(
    events: Iterable[StreamEvent], key_columns: Sequence[str], unchanged: object | None = None
) -> Iterator[NetBatch | CopyRows | LoadRange]:
    """What ``events`` (a batch, in the stream's order) do, in order: the net effect of the
    changes between two whole chunks or ranges (see :func:`net_effect`), and each of those."""
    pending: list[StreamEvent] = []
    for event in events:
        whole = event.block if event.block is not None else event.span
        if whole is None:
            pending.append(event)
            continue
        if pending:
            yield net_effect(pending, key_columns, unchanged)
            pending = []
        yield whole
    if pending:
        yield net_effect(pending, key_columns, unchanged)


def only_ranges(payloads: Sequence[str]) -> bool:
    """Whether a batch's events (``payloads``, JSON texts) are all ranges of a full load
    read in a snapshot (:class:`LoadRange`): such a batch needs none before it applied."""
    return bool(payloads) and all(p.startswith('{"op":"range"') for p in payloads)


def net_effect(
    events: Iterable[Any], key_columns: Sequence[str], unchanged: object | None = None
) -> NetBatch:
    """The net effect of ``events`` (stream changes and chunk rows, in the stream's order)
    on a table keyed by ``key_columns``. ``unchanged``: the stream's marker of a value it
    did not send."""
    net = NetBatch()
    for event in events:
        if isinstance(event, ChunkRow):
            _put(net, event.key, event.row, unchanged)
        elif event.op == "row":
            _put(net, event.key(key_columns), event.new, unchanged)
        elif event.op == "truncate":
            net.truncate, net.deletes, net.upserts = True, set(), {}
        elif event.op == "delete":
            key = event.key(key_columns)
            net.upserts.pop(key, None)
            net.deletes.add(key)
        else:
            before = event.old_key(key_columns)
            if before is not None:  # the key moved: the old one goes
                net.upserts.pop(before, None)
                net.deletes.add(before)
            _put(net, event.key(key_columns), event.new, unchanged)
    return net


def _put(net: NetBatch, key: Key, row: dict[str, Any], unchanged: object | None) -> None:
    """``key``'s new state: ``row``, with a value not sent taken from the state before
    in this batch, where there is one."""
    held = net.upserts.get(key)
    if unchanged is not None and held is not None:
        row = {c: held.get(c, v) if v is unchanged else v for c, v in row.items()}
    net.upserts[key] = dict(row)
    net.deletes.discard(key)
