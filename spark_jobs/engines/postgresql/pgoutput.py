"""PostgreSQL's logical replication messages (``pgoutput``, protocol version 1), decoded.

What a logical slot with the built-in ``pgoutput`` plugin hands out, one
message per row of ``pg_logical_slot_peek_binary_changes``: a transaction's
begin, the relations it touches, its inserts, updates, deletes and truncates
in commit order, the messages written into it (``pg_logical_emit_message``),
and its commit. Values come as PostgreSQL's text output of
their type, the very text ``col::text`` prints: nothing is converted here.

:class:`Decoder` keeps the relations it has seen (a relation message comes
before a relation's first change in each decoding session) and turns the
messages into :class:`Transaction` objects, each complete: a transaction is
handed out at its commit.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here
UNCHANGED = object()
"""A TOASTed value an update did not change and the message does not carry."""


class DecodeError(ValueError):
    """A message this decoder cannot read: its kind and where it stopped."""


@dataclass(frozen=True)
class Column:
    """A column of a relation: its name, type OID and modifier, and whether it is in the
    replica identity (the primary key, by default)."""

    name: str
    type_oid: int
    typmod: int
    key: bool


@dataclass(frozen=True)
class Relation:
    """A table as the publication describes it."""

    oid: int
    schema: str
    name: str
    identity: str  # d: default (the key), f: full, i: an index, n: nothing
    columns: tuple[Column, ...]

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The replica identity's columns, in the table's order."""
        return tuple(c.name for c in self.columns if c.key)

    @property
    def qualified(self) -> str:
        """``schema.name``."""
        return f"{self.schema}.{self.name}"


Value = str | None | object  # text, NULL, or UNCHANGED


@dataclass(frozen=True)
class Change:
    """One row change: ``new``, the row after an insert or update; ``old``, what the message
    carries of the row before (an update that changed the replica identity's columns, a
    delete: those columns, or every column with ``REPLICA IDENTITY FULL``; None otherwise).
    Each maps a column's name to its text, None for NULL, or :data:`UNCHANGED`. A truncate
    has neither."""

    op: str  # insert, update, delete, truncate
    relation: Relation
    new: dict[str, Value] | None = None
    old: dict[str, Value] | None = None

    def key(self, columns: Iterable[str]) -> tuple[Value, ...]:
        """The row's values of ``columns``: after the change, or before a delete."""
        row = self.new if self.new is not None else self.old
        if row is None:
            raise DecodeError(f"{self.relation.qualified}: a {self.op} carries no row")
        return tuple(row[c] for c in columns)

    def old_key(self, columns: Iterable[str]) -> tuple[Value, ...] | None:
        """The values of ``columns`` before an update that changed them; None otherwise."""
        if self.op != "update" or self.old is None or self.new is None:
            return None
        before = tuple(self.old.get(c) for c in columns)
        return None if before == self.key(columns) else before


@dataclass
class Transaction:
    """A committed transaction's changes in commit order, with its LSNs and commit time."""

    xid: int
    commit_lsn: int
    end_lsn: int
    committed_at: datetime
    changes: list[Change] = field(default_factory=list)
    # Logical decoding messages written in the transaction (pg_logical_emit_message):
    # (prefix, content), in order; sluice's watermarks are such messages.
    messages: list[tuple[str, bytes]] = field(default_factory=list)


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL prints it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    """An LSN printed by PostgreSQL as a number."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise DecodeError(f"message ends at byte {len(self.data)}, {size} more expected")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return int(value)

    def byte(self) -> str:
        return chr(self.take("!B"))

    def string(self) -> str:
        end = self.data.find(b"\0", self.at)
        if end < 0:
            raise DecodeError(f"unterminated string at byte {self.at}")
        text = self.data[self.at : end].decode("utf-8")
        self.at = end + 1
        return text

    def tuple_data(self) -> list[Value]:
        values: list[Value] = []
        for _ in range(self.take("!H")):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED)
            elif kind == "t":
                size = self.take("!I")
                values.append(self.data[self.at : self.at + size].decode("utf-8"))
                self.at += size
            else:
                raise DecodeError(f"column value of kind {kind!r} at byte {self.at - 1}")
        return values


class Decoder:
    """Turns ``pgoutput`` messages into complete transactions, keeping the relations seen."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self._open: Transaction | None = None

    def feed(self, messages: Iterable[bytes]) -> list[Transaction]:
        """Decode ``messages`` in order; the transactions they commit, in commit order.

        A transaction whose commit is not among them stays open until a later
        call brings it. Raises :class:`DecodeError` for a message it cannot read.
        """
        done: list[Transaction] = []
        for message in messages:
            committed = self._one(bytes(message))
            if committed is not None:
                done.append(committed)
        return done

    def _one(self, message: bytes) -> Transaction | None:
        reader = _Reader(message)
        kind = reader.byte()
        if kind == "B":
            reader.take("!Q")  # the final LSN, given again at the commit
            committed_at = _EPOCH + timedelta(microseconds=reader.take("!q"))
            self._open = Transaction(reader.take("!I"), 0, 0, committed_at)
        elif kind == "C":
            reader.take("!B")  # flags, none defined
            txn = self._current(kind)
            txn.commit_lsn, txn.end_lsn = reader.take("!Q"), reader.take("!Q")
            txn.committed_at = _EPOCH + timedelta(microseconds=reader.take("!q"))
            self._open = None
            return txn
        elif kind == "R":
            self._relation(reader)
        elif kind in "IUD":
            self._current(kind).changes.append(self._change(kind, reader))
        elif kind == "T":
            count = reader.take("!I")
            reader.take("!B")  # CASCADE / RESTART IDENTITY
            txn = self._current(kind)
            for _ in range(count):
                txn.changes.append(Change("truncate", self._known(reader.take("!I"))))
        elif kind == "M":
            transactional = reader.take("!B") & 1
            reader.take("!Q")  # the message's LSN
            prefix, size = reader.string(), reader.take("!I")
            content = message[reader.at : reader.at + size]
            if transactional:  # one outside a transaction has no place in commit order
                self._current(kind).messages.append((prefix, content))
        elif kind not in "OY":  # an origin, a type: nothing a change needs
            raise DecodeError(f"unknown message kind {kind!r}")
        return None

    def _current(self, kind: str) -> Transaction:
        if self._open is None:
            raise DecodeError(f"message {kind!r} outside a transaction")
        return self._open

    def _known(self, oid: int) -> Relation:
        relation = self.relations.get(oid)
        if relation is None:
            raise DecodeError(f"a change of relation {oid} before its description")
        return relation

    def _relation(self, reader: _Reader) -> None:
        oid = reader.take("!I")
        schema, name, identity = reader.string(), reader.string(), reader.byte()
        columns = []
        for _ in range(reader.take("!H")):
            flags = reader.take("!B")
            columns.append(Column(reader.string(), reader.take("!I"), reader.take("!i"),
                                  bool(flags & 1)))  # fmt: skip
        self.relations[oid] = Relation(oid, schema, name, identity, tuple(columns))

    def _change(self, kind: str, reader: _Reader) -> Change:
        relation = self._known(reader.take("!I"))
        names = [c.name for c in relation.columns]
        marker = reader.byte()
        old: dict[str, Value] | None = None
        if marker in "KO":
            old = dict(zip(names, reader.tuple_data(), strict=True))
            if kind == "D":
                return Change("delete", relation, None, old)
            marker = reader.byte()
        if marker != "N":
            raise DecodeError(f"{relation.qualified}: tuple marker {marker!r} in {kind!r}")
        new = dict(zip(names, reader.tuple_data(), strict=True))
        return Change("insert" if kind == "I" else "update", relation, new, old)
