"""A PostgreSQL database's row changes, read from a logical replication slot with SQL.

The change stream of a ``mode: stream`` source on PostgreSQL: a publication
of the source's tables and a logical replication slot with the built-in
``pgoutput`` plugin. Changes are read with
``pg_logical_slot_peek_binary_changes``, one query on an ordinary connection
(no replication connection, no plugin to install), and decoded by
:mod:`spark_jobs.engines.postgresql.pgoutput`: whole transactions, in commit
order. Peeking does not consume: the slot keeps every change (and the WAL
behind it) until :meth:`PgChangeStream.acknowledge` moves it past them, which
the caller does only up to what every target has committed.

sluice names its own publication and slot after the source
(:func:`stream_names`) and drops them (:meth:`PgChangeStream.drop`); a
publication and slot the config names are used as they are and never
dropped.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.errors import ConfigError, SourceError, cause_line
from config.secrets import redact_url
from spark_jobs.engines.postgresql.pgoutput import Decoder, Transaction, lsn_int, lsn_text
from spark_jobs.engines.postgresql.read import conninfo, pin
from spark_jobs.engines.postgresql.sessions import libpq_keepalives

log = logging.getLogger(__name__)

_NAME_LIMIT = 63  # PostgreSQL's identifiers, slot names included


@dataclass(frozen=True)
class StreamNames:
    """A stream's publication and slot, and whether sluice made them (and may drop them)."""

    publication: str
    slot: str
    owned: bool = True


def stream_names(source: str) -> StreamNames:
    """sluice's own publication and slot for ``source``: ``sluice_<source>``, in the
    characters a slot name may hold (lower-case letters, digits, ``_``)."""
    name = "sluice_" + re.sub(r"[^a-z0-9_]", "_", source.lower())
    return StreamNames(name[:_NAME_LIMIT], name[:_NAME_LIMIT])


class PgChangeStream:
    """The changes of ``tables`` (``schema.table`` or ``table``) in the database of ``engine``.

    :meth:`open` makes the publication and the slot where they are missing
    (sluice's own: with names the config gave, they must exist);
    :meth:`changes` peeks at committed transactions past a position;
    :meth:`acknowledge` lets the server forget what is before a position;
    :meth:`drop` removes sluice's own publication and slot. ``label`` names
    the stream in errors. A database that cannot be reached raises
    :class:`SourceError` (transient); one that cannot stream (``wal_level``
    not ``logical``, a missing table, a named slot that does not exist)
    raises :class:`ConfigError`.
    """

    def __init__(
        self, engine: sa.Engine, tables: Sequence[str], names: StreamNames, label: str
    ) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.tables = list(tables)  # the publication's, when it is made
        self.names = names
        self.label = label
        self.at_end = False  # the last :meth:`changes` read every change committed then
        self.made: list[str] = []  # what :meth:`open` created: "publication", "slot"
        # The snapshot a slot made here exported (see open): its name while it is held.
        self.snapshot: str | None = None
        self._exporter: Any = None  # the replication connection that holds it

    def open(self, export: bool = False) -> int:
        """Make sure the publication and the slot exist; the slot's position (an LSN).

        What it creates is remembered in :attr:`made`, for :meth:`undo`. ``export``: a
        slot made here exports its snapshot, the database as it was at the slot's
        start, named by :attr:`snapshot` until :meth:`release_snapshot` (a table read
        in it and then every change of the slot is the table, once)."""
        with self._connect() as conn:
            level = conn.exec_driver_sql("SHOW wal_level").scalar()
            if level != "logical":
                raise ConfigError(
                    f"{self.label}: {redact_url(str(self._engine.url))} runs with "
                    f"wal_level={level}: a change stream needs wal_level=logical (set it in "
                    "postgresql.conf and restart the server)"
                )
            if not self._has_publication(conn):
                if not self.names.owned:
                    raise ConfigError(f"{self.label}: publication {self.names.publication!r} "
                                      "does not exist")  # fmt: skip
                tables = ", ".join(self._quoted_table(t) for t in self.tables)
                conn.exec_driver_sql(
                    f"CREATE PUBLICATION {self._quoted(self.names.publication)} FOR TABLE {tables}"
                )
                self.made.append("publication")
            position = self._slot_position(conn)
            if position is None:
                if not self.names.owned:
                    raise ConfigError(f"{self.label}: replication slot {self.names.slot!r} "
                                      "does not exist")  # fmt: skip
                # Not in a transaction that wrote: the publication's own is committed.
                position = self._make_exporting_slot() if export else None
                if position is None:
                    position = self._slot_position(conn)
                    if position is not None:  # another daemon's start made it just now
                        return position
                    made = conn.execute(
                        sa.text("SELECT lsn::text FROM pg_create_logical_replication_slot(:s, "
                                "'pgoutput')"), {"s": self.names.slot},
                    ).scalar_one()  # fmt: skip
                    position = lsn_int(made)
                self.made.append("slot")
        return position

    def _make_exporting_slot(self) -> int | None:
        """Make the slot with its snapshot exported (:func:`export_slot`); its consistent
        point, None where that cannot be had."""
        made = export_slot(self._engine.url, self.names.slot, self.label)
        if made is None:
            return None
        self._exporter, self.snapshot, position = made
        return position

    def release_snapshot(self) -> None:
        """Let the exported snapshot go (its replication connection closes); the slot stays."""
        exporter, self._exporter, self.snapshot = self._exporter, None, None
        if exporter is not None:
            with contextlib.suppress(Exception):  # a connection already gone holds nothing
                exporter.close()

    def publish(self, table: str) -> None:
        """Make sure the publication publishes ``table`` (``schema.table``): sluice's own gets
        it added; one the config named must have it."""
        schema, _, name = table.rpartition(".")
        with self._connect() as conn:
            found = conn.execute(
                sa.text("SELECT 1 FROM pg_publication_tables WHERE pubname = :p "
                        "AND schemaname = :s AND tablename = :t"),
                {"p": self.names.publication, "s": schema or "public", "t": name},
            ).scalar()  # fmt: skip
            if found:
                return
            if not self.names.owned:
                raise ConfigError(f"{self.label}: publication {self.names.publication!r} does "
                                  f"not publish table {table}")  # fmt: skip
            conn.exec_driver_sql(f"ALTER PUBLICATION {self._quoted(self.names.publication)} "
                                 f"ADD TABLE {self._quoted_table(table)}")  # fmt: skip

    def undo(self) -> list[str]:
        """Drop what :meth:`open` created in this process (a start that failed must not leave
        a slot holding the server's WAL); what was dropped, as "slot X", "publication Y".
        Errors are logged by the caller: an undo never hides why the start failed."""
        dropped: list[str] = []
        self.release_snapshot()
        with self._connect() as conn:
            if "slot" in self.made and self._slot_exists(conn):
                conn.execute(sa.text("SELECT pg_drop_replication_slot(:s)"),
                             {"s": self.names.slot})  # fmt: skip
                dropped.append(f"slot {self.names.slot}")
            if "publication" in self.made and self._has_publication(conn):
                conn.exec_driver_sql(f"DROP PUBLICATION {self._quoted(self.names.publication)}")
                dropped.append(f"publication {self.names.publication}")
        self.made = []
        return dropped

    def changes(self, after: int = 0, max_changes: int = 10_000) -> list[Transaction]:
        """Committed transactions that end past ``after`` (an LSN), in commit order.

        About ``max_changes`` messages are read (the server finishes the
        transaction it is in). Nothing is consumed: the same transactions come
        again until :meth:`acknowledge` passes them.
        """
        query = sa.text(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(:s, NULL, :n, "
            "'proto_version', '1', 'publication_names', :p, 'messages', 'true')"
        )
        with self._connect() as conn:
            rows = conn.execute(query, {"s": self.names.slot, "n": max_changes,
                                        "p": self.names.publication}).scalars().all()  # fmt: skip
        # Fewer messages than asked: the decoding reached the end of the WAL written so far.
        self.at_end = len(rows) < max_changes
        # Each call is a decoding session of its own: relations are described again.
        return [t for t in Decoder().feed(rows) if t.end_lsn > after]

    def acknowledge(self, lsn: int) -> None:
        """The server may forget the changes before ``lsn``: the slot moves there (never back)."""
        with self._connect() as conn:
            current = self._slot_position(conn)
            if current is not None and lsn > current:
                conn.execute(sa.text("SELECT pg_replication_slot_advance(:s, CAST(:l AS pg_lsn))"),
                             {"s": self.names.slot, "l": lsn_text(lsn)})  # fmt: skip

    def mark(self, prefix: str, content: str) -> int:
        """Write a message into the change stream in a transaction of its own (a watermark);
        its LSN. It reaches :meth:`changes` in commit order, in ``Transaction.messages``."""
        with self._connect() as conn:
            found = conn.execute(sa.text("SELECT pg_logical_emit_message(true, :p, :c)::text"),
                                 {"p": prefix, "c": content}).scalar_one()  # fmt: skip
        return lsn_int(found)

    def source_position(self) -> int:
        """The database's current write position (``pg_current_wal_lsn()``)."""
        with self._connect() as conn:
            return lsn_int(conn.exec_driver_sql("SELECT pg_current_wal_lsn()::text").scalar_one())

    def retained_bytes(self) -> int | None:
        """The WAL the slot keeps on the server, in bytes; None when there is no slot."""
        with self._connect() as conn:
            found = conn.execute(
                sa.text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) "
                        "FROM pg_replication_slots WHERE slot_name = :s"), {"s": self.names.slot},
            ).scalar()  # fmt: skip
        return None if found is None else int(found)

    def drop(self) -> bool:
        """Drop sluice's own slot and publication (never ones the config named).

        Returns whether there was anything to drop. A slot in use by another
        connection cannot be dropped: the server's error is raised.
        """
        self.release_snapshot()
        if not self.names.owned:
            return False
        with self._connect() as conn:
            had_slot = self._slot_exists(conn)
            if had_slot:
                conn.execute(sa.text("SELECT pg_drop_replication_slot(:s)"),
                             {"s": self.names.slot})  # fmt: skip
            had_publication = self._has_publication(conn)
            publication = self._quoted(self.names.publication)
            conn.exec_driver_sql(f"DROP PUBLICATION IF EXISTS {publication}")
        return had_slot or had_publication

    # -- the catalogue ---------------------------------------------------------

    def _connect(self) -> sa.Connection:
        """A connection in the settings a keyset read has: ``pgoutput`` prints each value
        with the session's output functions (dates by ``DateStyle``, times by ``TimeZone``)."""
        try:
            conn = self._engine.connect()
        except sa.exc.OperationalError as error:
            raise SourceError(f"{self.label}: cannot reach the database: {error.orig}") from error
        try:
            pin(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _has_publication(self, conn: sa.Connection) -> bool:
        return bool(conn.execute(sa.text("SELECT 1 FROM pg_publication WHERE pubname = :p"),
                                 {"p": self.names.publication}).scalar())  # fmt: skip

    def _slot_exists(self, conn: sa.Connection) -> bool:
        return bool(conn.execute(sa.text("SELECT 1 FROM pg_replication_slots WHERE slot_name = :s"
                                         " AND database = current_database()"),
                                 {"s": self.names.slot}).scalar())  # fmt: skip

    def _slot_position(self, conn: sa.Connection) -> int | None:
        """The slot's confirmed position; None when there is no such slot (or it has none)."""
        found = conn.execute(
            sa.text("SELECT confirmed_flush_lsn::text, database = current_database() "
                    "FROM pg_replication_slots WHERE slot_name = :s"), {"s": self.names.slot},
        ).first()  # fmt: skip
        if found is not None and not found[1]:
            # Slot names are the server's, not a database's: another database's stream has it.
            raise ConfigError(f"{self.label}: replication slot {self.names.slot!r} belongs to "
                              "another database of the server; name this stream's own with "
                              "stream: {publication: P, slot: S}")  # fmt: skip
        return None if found is None or found[0] is None else lsn_int(found[0])

    def _quoted(self, name: str) -> str:
        return self._engine.dialect.identifier_preparer.quote(name)

    def _quoted_table(self, table: str) -> str:
        schema, _, name = table.rpartition(".")
        return ".".join(self._quoted(part) for part in (schema, name) if part)


def export_slot(url: sa.URL, slot: str, label: str) -> tuple[Any, str | None, int] | None:
    """Make logical slot ``slot`` (``pgoutput``) on a replication connection to ``url`` that
    exports its snapshot (as pg_dump's and pgcopydb's consistent copies do): the
    connection, the snapshot's name and the slot's consistent point. The snapshot
    lives while that connection stays open and idle (until
    :meth:`PgChangeStream.release_snapshot` closes it). None where it cannot be had (a
    server that takes no replication connection, ``max_wal_senders`` used up, a slot
    another start made meanwhile): the caller makes the slot with SQL, and the full
    load reads between watermarks (the reason is logged)."""
    import psycopg

    info = conninfo(url)
    try:
        conn = psycopg.connect(info, autocommit=True, replication="database",
                               **libpq_keepalives(info))  # fmt: skip
    except psycopg.OperationalError as error:
        log.warning("%s: no replication connection (%s); the full load reads between "
                    "watermarks", label, cause_line(error))  # fmt: skip
        return None
    option = ("(SNAPSHOT 'export')" if conn.info.server_version >= 150000
              else "EXPORT_SNAPSHOT")  # the syntax before PostgreSQL 15  # fmt: skip
    command = f"CREATE_REPLICATION_SLOT {slot} LOGICAL pgoutput {option}"
    result = conn.pgconn.exec_(command.encode())
    if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
        message = (result.error_message or b"").decode(errors="replace").strip()
        conn.close()
        log.warning("%s: slot %s not made with a snapshot (%s); the full load reads "
                    "between watermarks", label, slot, message)  # fmt: skip
        return None
    snapshot = (result.get_value(0, 2) or b"").decode() or None
    return conn, snapshot, lsn_int((result.get_value(0, 1) or b"0/0").decode())
