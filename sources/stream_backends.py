"""What a stream source needs of its database: changes, watermarks, chunks of the table.

:class:`~sources.stream.StreamSource` merges a table's chunks and its change
stream the same way on every engine; a backend gives it, in the target's
terms (PostgreSQL's text of each value):

- :class:`PgBackend`: a logical slot and a publication (:mod:`sources.pg_changes`),
  chunks read as ``col::text``; a position is a transaction's end LSN.
- :class:`MariaBackend`: the row binary log read by GTID
  (:mod:`sources.binlog_changes`; one replication domain), chunks read by
  PyMySQL in UTC; values put in PostgreSQL's text by the catalogue's mapping
  (:mod:`spark_jobs.engines.mysql.stream_text`); a position is a GTID's
  sequence number. The binary log has no slot: nothing to acknowledge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa

from config.errors import ConfigError, SourceError
from config.models import SqlSourceConfig
from sources.pg_changes import PgChangeStream, StreamNames, stream_names
from sources.sqldb import SourceDatabase
from sources.watermarks import PREFIX
from spark_jobs.change_batches import Key
from spark_jobs.engines.postgresql.read import pin

Guard = Callable[[Callable[[], Any]], Any]


def names_of(name: str, cfg: SqlSourceConfig) -> StreamNames:
    """The publication and slot of a PostgreSQL stream source: the config's, or sluice's own."""
    if cfg.stream is not None and cfg.stream.slot is not None:
        assert cfg.stream.publication is not None  # the config checks both or neither
        return StreamNames(cfg.stream.publication, cfg.stream.slot, owned=False)
    return stream_names(name)


def check_distinct(sources: Mapping[str, SqlSourceConfig]) -> None:
    """Raise :class:`ConfigError` when two PostgreSQL stream sources of one server would use
    one slot, or two of one database one publication (a name the config gave twice, or
    sluice's own names of two sources that differ only in case or punctuation, or past
    63 characters): each would move the other's slot on past changes it never read."""
    held: dict[tuple[str, ...], str] = {}
    for name, cfg in sources.items():
        if cfg.mode != "stream" or sa.make_url(cfg.url).get_backend_name() != "postgresql":
            continue
        url = sa.make_url(cfg.url)
        names = names_of(name, cfg)
        server = (url.host or "", str(url.port or 5432))
        for what, key in (("slot", (*server, "slot", names.slot)),
                          ("publication", (*server, url.database or "", "pub",
                                           names.publication))):  # fmt: skip
            other = held.setdefault(key, name)
            if other != name:
                raise ConfigError(
                    f"sources {other} and {name} would share the {what} {key[-1]!r} on "
                    f"{url.host}: a stream needs its own; name them with stream: "
                    "{publication: P, slot: S} on one of them"
                )


@dataclass
class Txn:
    """A committed transaction of the stream: its position (``end``), commit time, changes
    of the table (``op``, ``new``, ``key(columns)``, ``old_key(columns)``, values as text)
    and the contents of the watermarks written in it."""

    end: int
    committed_at: float
    changes: list[Any] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)


class Backend(Protocol):
    """One engine's change stream and table, as a :class:`~sources.stream.StreamSource` reads
    them; every call may raise :class:`SourceError`."""

    what: str  # what it keeps on the source: "slot X and publication Y", "table Z"
    at_end: bool  # the last read reached what was committed when it began
    reached: int  # the position the last read got to (past transactions of other tables)

    def open(self) -> None: ...
    def columns(self) -> list[str]: ...
    def read(self, after: int, messages: int) -> list[Txn]: ...
    def acknowledge(self, end: int) -> None: ...
    def mark(self, content: str) -> None: ...
    def chunk(self, after: list[Any] | None, rows: int) -> list[dict[str, Any]]: ...
    def current(self, keys: list[Key], columns: list[str]) -> dict[Key, dict[str, Any]]: ...
    def retained_bytes(self) -> int | None: ...
    def drop(self) -> bool: ...
    def undo(self) -> list[str]: ...


class PgBackend:
    """A PostgreSQL table's stream: a slot with ``pgoutput``, its values the server's text."""

    def __init__(self, name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> None:
        self.names = names_of(name, cfg)
        self._db = db
        self._stream = PgChangeStream(db.engine, [cfg.table], self.names, f"source {name}")
        self._label = f"source {name}"
        self._table = cfg.table if "." in cfg.table else f"public.{cfg.table}"
        self._key = cfg.key_columns
        self._types: dict[str, str] | None = None
        self.what = f"slot {self.names.slot} and publication {self.names.publication}"
        self.at_end = False
        self.reached = 0

    def open(self) -> None:
        # Before the publication: publishing a table that has no replica identity makes
        # the application's own UPDATEs and DELETEs of it fail.
        self._db.guard(self._check_identity)
        self._db.guard(self._stream.open)

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
        # A slot serves one session at a time: while another daemon's read holds it
        # (hot-hot), this one waits its turn a little.
        for pause in (0.05, 0.1, 0.2, 0.4, 0.8, 0):
            try:
                found = self._db.guard(lambda: self._stream.changes(after, messages))
                break
            except SourceError as error:
                if "is active for PID" not in str(error) or not pause:
                    raise
                time.sleep(pause)
        self.at_end = self._stream.at_end
        return [Txn(t.end_lsn, t.committed_at.timestamp(),
                    [c for c in t.changes if c.relation.qualified == self._table],
                    [m.decode() for p, m in t.messages if p == PREFIX])
                for t in found]  # fmt: skip

    def acknowledge(self, end: int) -> None:
        self._db.guard(lambda: self._stream.acknowledge(end))

    def mark(self, content: str) -> None:
        self._db.guard(lambda: self._stream.mark(PREFIX, content))

    def chunk(self, after: list[Any] | None, rows: int) -> list[dict[str, Any]]:
        self.columns()
        assert self._types is not None
        quote = self._db.engine.dialect.identifier_preparer.quote
        # Qualified: ORDER BY "id" would sort by the output column "id", the text.
        keys = ", ".join(f"c.{quote(k)}" for k in self._key)
        where, params = "", {"n": rows}
        if after is not None:
            bounds = ", ".join(f"CAST(:k{i} AS {self._types[k]})" for i, k in enumerate(self._key))
            where = f"WHERE ({keys}) > ({bounds})"
            params.update({f"k{i}": v for i, v in enumerate(after)})
        select = ", ".join(f"{quote(c)}::text" for c in self._types)
        query = sa.text(f"SELECT {select} FROM {self._quoted()} AS c {where} "
                        f"ORDER BY {keys} LIMIT :n")  # fmt: skip

        def read() -> list[dict[str, Any]]:
            with self._db.engine.connect() as conn:
                pin(conn)  # the text forms the stream's values take
                return [dict(zip(self._types or {}, r, strict=True))
                        for r in conn.execute(query, params)]  # fmt: skip

        return self._db.guard(read)

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
        return self._db.guard(self._stream.retained_bytes)

    def drop(self) -> bool:
        return self._db.guard(self._stream.drop)

    def undo(self) -> list[str]:
        return self._db.guard(self._stream.undo)

    def _quoted(self) -> str:
        quote = self._db.engine.dialect.identifier_preparer.quote
        return ".".join(quote(part) for part in self._table.split(".", 1))


class MariaBackend:
    """A MariaDB/MySQL table's stream: the row binary log by GTID, in one replication domain;
    values in PostgreSQL's text by the catalogue's mapping."""

    def __init__(self, name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> None:
        from sources.binlog_changes import WATERMARKS, BinlogChangeStream

        self._db = db
        self._label = f"source {name}"
        self._stream = BinlogChangeStream(db.engine.url, [cfg.table], self._label)
        self._table = cfg.table
        self._key = cfg.key_columns
        self._columns: dict[str, Any] | None = None
        self._gtid = ""  # "domain-server-": a position is its sequence number
        self._start = 0
        self.what = f"table {WATERMARKS}"
        self.at_end = False
        self.reached = 0

    def open(self) -> None:
        position = self._db.guard(self._stream.check)
        domains = [p for p in str(position).split(",") if p.strip()]
        if len(domains) > 1:
            raise ConfigError(f"{self._label}: the server's binary log has {len(domains)} "
                              "replication domains; a stream follows one")  # fmt: skip
        domain, server, sequence = (domains[0].split("-") if domains else ("0", "1", "0"))
        self._gtid = f"{domain}-{server}-"
        # A stream that has claimed nothing yet starts here: what the log holds before
        # is in the table the full load reads.
        self._start = int(sequence)

    def columns(self) -> list[str]:
        return list(self._described())

    def read(self, after: int, messages: int) -> list[Txn]:
        from sources.binlog_changes import RowChange, reached
        from spark_jobs.engines.mysql.stream_text import from_binlog, postgres_row

        columns = self._described()

        def text(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else postgres_row(from_binlog(row, columns), columns)

        after = after or self._start
        position = f"{self._gtid}{after}" if after else ""
        # Caught up when the read got as far as the server was when it began.
        end = self._db.guard(self._stream.source_position)
        # Each read is a replica connection of its own: it reads as far as it may.
        found = self._db.guard(lambda: self._stream.changes(position, max(2_000, messages)))
        self.at_end = reached(found.position, end) if found.position else not end
        self.reached = int(found.position.rsplit("-", 1)[1]) if found.position else 0
        return [Txn(int(t.gtid.rsplit("-", 1)[1]), t.committed_at.timestamp(),
                    [RowChange(c.op, c.table, text(c.new), text(c.old)) for c in t.changes],
                    [m.decode() for p, m in t.messages if p == PREFIX])
                for t in found.transactions]  # fmt: skip

    def acknowledge(self, end: int) -> None:
        """Nothing: the binary log is the server's to keep (a purged position is an error
        that names the way out)."""

    def mark(self, content: str) -> None:
        # One row per chunk's mark: the table holds one row per prefix.
        self._db.guard(lambda: self._stream.mark(f"{PREFIX}", content))

    def chunk(self, after: list[Any] | None, rows: int) -> list[dict[str, Any]]:
        from spark_jobs.engines.mysql.stream_text import (
            SESSION_TIME_ZONE,
            postgres_row,
            select_list,
        )

        columns = self._described()
        quote = self._db.engine.dialect.identifier_preparer.quote
        keys = ", ".join(f"c.{quote(k)}" for k in self._key)
        where, params = "", {"n": rows}
        if after is not None:
            where = f"WHERE ({keys}) > ({', '.join(f':k{i}' for i in range(len(after)))})"
            params.update({f"k{i}": v for i, v in enumerate(after)})
        query = sa.text(f"SELECT {select_list(list(columns.values()), quote)} "
                        f"FROM {quote(self._table)} AS c {where} ORDER BY {keys} LIMIT :n")

        def read() -> list[dict[str, Any]]:
            with self._db.engine.connect() as conn:
                # TIMESTAMP values as the instants they are (see stream_text).
                conn.exec_driver_sql(f"SET time_zone = '{SESSION_TIME_ZONE}'")
                return [postgres_row(dict(r._mapping), columns)
                        for r in conn.execute(query, params)]  # fmt: skip

        return self._db.guard(read)

    def current(self, keys: list[Key], columns: list[str]) -> dict[Key, dict[str, Any]]:
        """Never asked: the binary log's full row images carry every value."""
        return {}

    def retained_bytes(self) -> int | None:
        return None

    def drop(self) -> bool:
        return bool(self._db.guard(self._stream.drop))

    def undo(self) -> list[str]:
        """Nothing to undo: the binary log has no slot, the watermark table holds nothing."""
        return []

    def _described(self) -> dict[str, Any]:
        if self._columns is None:
            from spark_jobs.engines.mysql.catalog import describe

            def read() -> dict[str, Any]:
                with self._db.engine.connect() as conn:
                    # Generated columns: the target computes them, or has none.
                    return {c.name: c for c in describe(conn, None, self._table)
                            if not c.generated}  # fmt: skip

            self._columns = self._db.guard(read)
        return self._columns


def backend_of(name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> Backend:
    """The backend of ``cfg``'s database engine."""
    if sa.make_url(cfg.url).get_backend_name() == "postgresql":
        return PgBackend(name, cfg, db)
    return MariaBackend(name, cfg, db)
