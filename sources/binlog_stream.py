"""A MariaDB/MySQL table's change stream and chunks, for :class:`~sources.stream.StreamSource`.

Changes come from the row binary log read by GTID (:mod:`sources.binlog_changes`;
one replication domain), chunks are read by PyMySQL in UTC and handed out whole
as text COPY lines; values are put in PostgreSQL's text by the catalogue's mapping
(:mod:`spark_jobs.engines.mysql.stream_text`);
a position is a GTID's sequence number. The binary log has no slot: nothing to
acknowledge.

The full load is handed out as key ranges (:class:`LoadRange`) at the position the
stream starts from, each read by its importer natively as the table is then
(:mod:`spark_jobs.changes.load_ranges`): MariaDB exports no snapshot another
session could read in. The changes made meanwhile go in after the last range as
each row's last state (:mod:`sources.stream_catchup`), then one by one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SqlSourceConfig
from sources.sqldb import SourceDatabase
from sources.stream_backends import Txn
from sources.watermarks import PREFIX
from spark_jobs.changes.change_batches import CopyRows, Key, LoadRange
from spark_jobs.engines.postgresql.textcopy import lines_of


class MariaBackend:
    """A MariaDB/MySQL table's stream: the row binary log by GTID, in one replication domain;
    values in PostgreSQL's text by the catalogue's mapping."""

    whole_chunks = True
    live_ranges = True  # ranges are read as the table is when read (see the module)

    def __init__(self, name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> None:
        from sources.binlog_changes import WATERMARKS, BinlogChangeStream
        from sources.binlog_hub import take_binlog

        self._db = db
        self._label = f"source {name}"
        self._stream = BinlogChangeStream(db.engine.url, [cfg.table], self._label)
        self._table = cfg.table
        # A tables: group's tables read the log once for all of them.
        self._group = cfg.group
        self._shared = None if cfg.group is None else take_binlog(db.engine.url, cfg.group,
                                                                  f"group {cfg.group}")  # fmt: skip
        if self._shared is not None:
            self._shared.join(cfg.table)
        database = db.engine.url.database or ""
        self._qualified = cfg.table if "." in cfg.table else f"{database}.{cfg.table}"
        self._key = cfg.key_columns
        self._columns: dict[str, Any] | None = None
        self._gtid = ""  # "domain-server-": a position is its sequence number
        self._start = 0
        self.what = f"table {WATERMARKS}"
        self.shared = False  # no slot: each table says nothing of how far the log may go
        self.made_slot = False  # the server keeps its binary log, whoever reads it
        self.at_end = False
        self.reached = 0
        self._loaded = False

    @property
    def snapshot(self) -> tuple[str, int] | None:
        """No snapshot (``""``: its ranges are read as the table is then) and the position
        the stream starts at, until the full load is done."""
        return None if self._loaded else ("", self._start)

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
        from sources.binlog_changes import RowChange, reached, sequence
        from spark_jobs.engines.mysql.stream_text import from_binlog, postgres_row

        columns = self._described()

        def text(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else postgres_row(from_binlog(row, columns), columns)

        after = after or self._start
        position = f"{self._gtid}{after}" if after else ""
        if self._shared is not None:
            found, reached_at, self.at_end = self._shared.changes(
                position, max(2_000, messages), self._db.guard
            )
        else:
            # Caught up when the read got as far as the server was when it began.
            end = self._db.guard(self._stream.source_position)
            # Each read is a replica connection of its own: it reads as far as it may.
            read = self._db.guard(lambda: self._stream.changes(position, max(2_000, messages)))
            found, reached_at = read.transactions, read.position
            self.at_end = reached(read.position, end) if read.position else not end
        self.reached = sequence(reached_at)
        return [Txn(sequence(t.gtid), t.committed_at.timestamp(),
                    [RowChange(c.op, c.table, text(c.new), text(c.old)) for c in t.changes
                     if c.table == self._qualified],
                    [m.decode() for p, m in t.messages if p == PREFIX])
                for t in found]  # fmt: skip

    def acknowledge(self, end: int) -> None:
        """Nothing: the binary log is the server's to keep (a purged position is an error
        that names the way out)."""

    def mark(self, content: str) -> None:
        # One row per chunk's mark: the table holds one row per prefix.
        self._db.guard(lambda: self._stream.mark(f"{PREFIX}", content))

    def chunk(self, after: list[Any] | None, rows: int, snapshot: str | None = None) -> CopyRows:
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

        # Whole, as COPY text: it goes into the target by COPY, with no event per row.
        found = self._db.guard(read)
        read_keys: list[Key] = [tuple(row[k] for k in self._key) for row in found]
        return CopyRows(tuple(columns), lines_of([tuple(row.values()) for row in found]),
                        len(found), tuple(read_keys),
                        (read_keys[0], read_keys[-1]) if read_keys else None)  # fmt: skip

    def current(self, keys: list[Key], columns: list[str]) -> dict[Key, dict[str, Any]]:
        """Never asked: the binary log's full row images carry every value."""
        return {}

    def retained_bytes(self) -> int | None:
        return None

    def drop(self) -> bool:
        return bool(self._db.guard(self._stream.drop))


    def loaded(self) -> None:
        """The full load needs no more ranges."""
        self._loaded = True

    def position(self) -> int:
        """The server's position now: the last transaction's sequence number."""
        from sources.binlog_changes import sequence

        found = self._db.guard(self._stream.source_position)
        return sequence(found.split(",")[0].strip()) if found else 0

    def load_range(self, after: list[Any] | None, rows: int, snapshot: str) -> LoadRange:
        """The next range of the full load: the ``rows`` rows after key ``after``, or, where
        fewer are left, all of them (its ``upto`` None). Only its end is read (an index's
        ``rows`` keys); its importer reads the rows (:mod:`spark_jobs.changes.load_ranges`).
        Keys are in PostgreSQL's text, as a chunk's are."""
        from spark_jobs.common.keyorder import key_types, row_compare, typed_key
        from spark_jobs.engines.mysql.stream_text import postgres_row

        columns = self._described()
        engine = self._db.engine
        keys: list[sa.ColumnClause[Any]] = [sa.column(k) for k in self._key]
        schema, _, name = self._table.rpartition(".")
        table = sa.table(name, schema=schema or None)
        where = []
        if after is not None:
            # As the key's types: a bigint past 2^53 compared as text would be a double.
            typed = typed_key(after, self._db.guard(lambda: key_types(engine, self._table,
                                                                      self._key)))  # fmt: skip
            where = [row_compare(keys, typed, ">", engine.dialect.name)]
        end = (sa.select(*keys).select_from(table).where(*where).order_by(*keys)
               .offset(max(0, rows - 1)).limit(1))  # fmt: skip
        rest = sa.select(sa.func.count()).select_from(table).where(*where)

        def read() -> tuple[Key | None, int]:
            with engine.connect() as conn:
                found = conn.execute(end).first()
                if found is not None:
                    return tuple(found), rows
                return None, int(conn.execute(rest).scalar_one())

        found, count = self._db.guard(read)
        upto = None if found is None else tuple(postgres_row(
            dict(zip(self._key, found, strict=True)), {k: columns[k] for k in self._key}
        ).values())  # fmt: skip
        return LoadRange(None if after is None else tuple(after), upto, snapshot, count,
                         tuple(columns), tuple(c.type for c in columns.values()))  # fmt: skip

    def undo(self) -> list[str]:
        """Nothing to undo: the binary log has no slot, the watermark table holds nothing."""
        return []

    def close(self) -> None:
        """Let go of the group's reader (each read is a replica connection of its own)."""
        if self._shared is not None and self._group is not None:
            from sources.binlog_hub import give_back

            give_back(self._shared, self._db.engine.url, self._group)

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
