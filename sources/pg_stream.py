"""A PostgreSQL table's change stream and chunks, for :class:`~sources.stream.StreamSource`.

Changes come from a logical slot with ``pgoutput`` (:mod:`sources.stream_hub`:
the table's own slot, or its ``tables:`` group's); a chunk is read whole by
``COPY (SELECT …) TO STDOUT`` in the keyset read's output settings (the
values as the stream prints them, no Python per row) and goes into its
target by COPY; a position is a transaction's end LSN.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SqlSourceConfig
from sources.sqldb import SourceDatabase
from sources.stream_backends import Txn, names_of
from sources.stream_hub import give_back, take_slot
from sources.watermarks import PREFIX
from spark_jobs.changes.change_batches import CopyRows, Key, LoadRange
from spark_jobs.engines.postgresql.read import pin
from spark_jobs.engines.postgresql.textcopy import line_keys


class PgBackend:
    """A PostgreSQL table's stream: a slot with ``pgoutput``, its values the server's text.

    The slot is a :class:`~sources.stream_hub.SharedSlot`: the table's own, or, for a
    table of a ``tables:`` group, the group's (``shared``)."""

    whole_chunks = True
    live_ranges = False  # read in the slot's exported snapshot

    def __init__(self, name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> None:
        self.names = names_of(name, cfg)
        self.shared = cfg.group is not None
        self._db = db
        self._label = f"source {name}"
        self._slot = take_slot(db.engine, self.names, self._label)
        self._table = cfg.table if "." in cfg.table else f"public.{cfg.table}"
        # Before the publication: publishing a table that has no replica identity makes
        # the application's own UPDATEs and DELETEs of it fail.
        self._slot.join(self._table, lambda: db.guard(self._check_identity))
        self._key = cfg.key_columns
        self._types: dict[str, str] | None = None
        self.what = f"slot {self.names.slot} and publication {self.names.publication}"
        self.at_end = False
        self.reached = 0

    def open(self) -> None:
        self._slot.open(self._table, self._db.guard)

    @property
    def snapshot(self) -> tuple[str, int] | None:
        """The exported snapshot the table's full load reads, and the position the stream
        starts at (see :meth:`SharedSlot.snapshot_of`)."""
        return self._slot.snapshot_of(self._table)

    def loaded(self) -> None:
        """The table's full load needs the snapshot no more."""
        self._slot.loaded(self._table)

    def _check_identity(self) -> None:
        """Refuse, by name, a table whose changes would not carry the key they change: its
        replica identity (``REPLICA IDENTITY``) must hold every key column."""
        query = sa.text(
            "SELECT c.relreplident, ARRAY(SELECT a.attname::text FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = c.oid AND CASE c.relreplident WHEN 'd' THEN i.indisprimary "
            "WHEN 'i' THEN i.indisreplident ELSE false END) "
            "FROM pg_class c WHERE c.oid = to_regclass(:t)"
        )
        with self._db.engine.connect() as conn:
            found = conn.execute(query, {"t": self._quoted()}).first()
        if found is None:
            return  # no such table: the check after names it
        identity, held = found
        if identity == "f":
            return
        missing = [k for k in self._key if k not in held]
        if not missing:
            return
        what = {"n": "REPLICA IDENTITY NOTHING",
                "d": f"a primary key of {list(held)}" if held else "no primary key",
                "i": f"REPLICA IDENTITY USING INDEX of {list(held)}"}[identity]  # fmt: skip
        raise ConfigError(
            f"{self._label}: table {self._table} has {what}, so its updates and deletes "
            f"would not carry the key column(s) {missing} in the change stream; give it a "
            f"primary key on the key, or ALTER TABLE {self._quoted()} REPLICA IDENTITY FULL"
        )

    def columns(self) -> list[str]:
        if self._types is None:
            query = sa.text(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 AND NOT attisdropped "
                "AND attgenerated = '' ORDER BY attnum"  # generated: the target computes them
            )

            def read() -> dict[str, str]:
                with self._db.engine.connect() as conn:
                    return {r[0]: r[1] for r in conn.execute(query, {"t": self._quoted()})}

            self._types = self._db.guard(read)
        return list(self._types)

    def read(self, after: int, messages: int) -> list[Txn]:
        found, self.at_end = self._slot.changes(after, messages, self._db.guard)
        return [Txn(t.end_lsn, t.committed_at.timestamp(),
                    [c for c in t.changes if c.relation.qualified == self._table],
                    [m.decode() for p, m in t.messages if p == PREFIX], t.commit_lsn)
                for t in found]  # fmt: skip

    def acknowledge(self, end: int) -> None:
        self._slot.acknowledge(self._table, end, self._db.guard)

    def mark(self, content: str) -> None:
        self._slot.mark(PREFIX, content, self._db.guard)

    def chunk(self, after: list[Any] | None, rows: int, snapshot: str | None = None) -> CopyRows:
        """The next ``rows`` rows after key ``after``, whole; in ``snapshot`` (see
        :attr:`snapshot`) when given, else as the table is now."""
        self.columns()
        assert self._types is not None
        types = self._types
        quote = self._db.engine.dialect.identifier_preparer.quote
        # Qualified: ORDER BY "id" would sort by an output column of that name.
        keys = ", ".join(f"c.{quote(k)}" for k in self._key)
        where, params = "", {"n": rows}
        if after is not None:
            bounds = ", ".join(f"CAST(%(k{i})s AS {types[k]})" for i, k in enumerate(self._key))
            where = f"WHERE ({keys}) > ({bounds})"
            params.update({f"k{i}": v for i, v in enumerate(after)})
        select = ", ".join(f"c.{quote(c)}" for c in types)
        statement = (f"COPY (SELECT {select} FROM {self._quoted()} AS c {where} "
                     f"ORDER BY {keys} LIMIT %(n)s) TO STDOUT")  # fmt: skip

        def read() -> bytes:
            with self._db.engine.connect() as conn:
                if snapshot is not None:  # the first statement of its transaction
                    conn = conn.execution_options(isolation_level="REPEATABLE READ")
                    conn.exec_driver_sql("SET TRANSACTION SNAPSHOT '"
                                         + snapshot.replace("'", "''") + "'")  # fmt: skip
                pin(conn)  # the text forms the stream's values take
                cursor = conn.connection.cursor()
                try:
                    with cursor.copy(statement, params) as copy:
                        return b"".join(copy)
                finally:
                    cursor.close()

        text = self._db.guard(read).decode()
        positions = [list(types).index(k) for k in self._key]
        if snapshot is not None:
            # No change overlaps a snapshot's chunk: no line's key is asked for, only its ends'.
            ends = line_keys(_first_and_last(text), positions)
            return CopyRows(tuple(types), text, text.count("\n"), (),
                            (ends[0], ends[-1]) if ends else None)  # fmt: skip
        found = line_keys(text, positions)
        return CopyRows(tuple(types), text, len(found), tuple(found),
                        (found[0], found[-1]) if found else None)  # fmt: skip

    def position(self) -> int:
        """Never asked: the full load is read in the slot's snapshot, with no catching up."""
        raise AssertionError(f"{self.what}: a load read in a snapshot needs no catching up")

    def load_range(self, after: list[Any] | None, rows: int, snapshot: str) -> LoadRange:
        """The next range of the full load in ``snapshot``: the ``rows`` rows after key
        ``after``, or, where fewer are left, all of them (its ``upto`` None). Only its end is
        read (an index's ``rows`` keys); its importer reads the rows
        (:mod:`spark_jobs.changes.load_ranges`)."""
        self.columns()
        assert self._types is not None
        types = self._types
        quote = self._db.engine.dialect.identifier_preparer.quote
        keys = ", ".join(f"c.{quote(k)}" for k in self._key)
        where, params = "", {"skip": max(0, rows - 1)}
        if after is not None:
            bounds = ", ".join(f"CAST(:k{i} AS {types[k]})" for i, k in enumerate(self._key))
            where = f"WHERE ({keys}) > ({bounds})"
            params.update({f"k{i}": v for i, v in enumerate(after)})
        texts = ", ".join(f"c.{quote(k)}::text" for k in self._key)
        end = sa.text(f"SELECT {texts} FROM {self._quoted()} AS c {where} "
                      f"ORDER BY {keys} OFFSET :skip LIMIT 1")  # fmt: skip
        rest = sa.text(f"SELECT count(*) FROM {self._quoted()} AS c {where}")

        def read() -> tuple[Key | None, int]:
            with self._db.engine.connect() as conn:
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
                conn.exec_driver_sql("SET TRANSACTION SNAPSHOT '"
                                     + snapshot.replace("'", "''") + "'")  # fmt: skip
                pin(conn)  # the keys' text as the stream prints them
                found = conn.execute(end, params).first()
                if found is not None:
                    return tuple(found), rows
                return None, int(conn.execute(rest, params).scalar_one())

        upto, count = self._db.guard(read)
        return LoadRange(None if after is None else tuple(after), upto, snapshot, count,
                         tuple(types), tuple(types.values()))  # fmt: skip

    def current(self, keys: list[Key], columns: list[str]) -> dict[Key, dict[str, Any]]:
        """The values of ``columns`` the rows of ``keys`` (as the stream prints them) hold
        now, by key; a key no row has is left out."""
        self.columns()
        assert self._types is not None
        quote = self._db.engine.dialect.identifier_preparer.quote
        found: dict[Key, dict[str, Any]] = {}
        names = [*self._key, *columns]
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = ", ".join(
                "(" + ", ".join(f"CAST(:k{n}_{i} AS {self._types[k]})"
                                for i, k in enumerate(self._key)) + ")"
                for n in range(len(part))
            )  # fmt: skip
            params = {f"k{n}_{i}": v for n, key in enumerate(part) for i, v in enumerate(key)}
            query = sa.text(
                f"SELECT {', '.join(f'{quote(c)}::text' for c in names)} FROM {self._quoted()} "
                f"WHERE ({', '.join(quote(k) for k in self._key)}) IN ({rows})"
            )

            def read(query: sa.TextClause = query, params: dict[str, Any] = params) -> list[Any]:
                with self._db.engine.connect() as conn:
                    pin(conn)
                    return list(conn.execute(query, params))

            for row in self._db.guard(read):
                width = len(self._key)
                found[tuple(row[:width])] = dict(zip(columns, row[width:], strict=True))
        return found

    def retained_bytes(self) -> int | None:
        return self._slot.retained_bytes(self._db.guard)

    def drop(self) -> bool:
        return self._slot.drop(self._db.guard)

    def undo(self) -> list[str]:
        return self._slot.undo(self._db.guard)

    def close(self) -> None:
        self._slot.loaded(self._table)  # the last table closed lets the snapshot go
        give_back(self._slot, self._db.engine)

    @property
    def made_slot(self) -> bool:
        return self._slot.made_slot

    def _quoted(self) -> str:
        quote = self._db.engine.dialect.identifier_preparer.quote
        return ".".join(quote(part) for part in self._table.split(".", 1))


def _first_and_last(text: str) -> str:
    """The first and the last line of whole lines of text COPY (one line: it alone)."""
    first = text.find("\n") + 1
    if first in (0, len(text)):
        return text
    return text[:first] + text[text.rfind("\n", 0, len(text) - 1) + 1 :]
