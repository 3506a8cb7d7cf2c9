"""A MariaDB or MySQL database's row changes, read from its binary log by GTID.

The change stream of a ``mode: stream`` source on MariaDB: the row-based
binary log read as a replica would (``mysql-replication``, over PyMySQL),
from a GTID position, until it has caught up. Changes come as whole
transactions in commit order, each with its GTID, so that a reader resumes
exactly after the last transaction it applied. The server needs ``log_bin``,
``binlog_format=ROW`` and ``binlog_row_metadata=FULL`` (the column names
travel with the rows), and the reader a user with replication rights
(``REPLICATION SLAVE``, ``BINLOG MONITOR``). Watermarks (:mod:`sources.watermarks`)
are rows of a table sluice makes in the source's database, :data:`WATERMARKS`.

A position is the server's own text: ``@@gtid_binlog_pos``, one
``domain-server-sequence`` per replication domain, comma-separated.
"""

from __future__ import annotations

import random
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

import sqlalchemy as sa

from config.connections import CONNECT_TIMEOUT, keep_alive
from config.errors import ConfigError, SourceError
from config.secrets import redact_url

WATERMARKS = "sluice_watermarks"
"""The table of the source's database whose rows are the stream's watermark messages:
MySQL has no message of its own to write into its binary log."""
READ_TIMEOUT = 60.0
"""Seconds a read of the binary log may take to reach the server's position."""
_PURGED = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG: the position's log is gone
_NEEDED = {"log_bin": "1", "binlog_format": "ROW", "binlog_row_metadata": "FULL"}


@dataclass(frozen=True)
class RowChange:
    """One row change of ``table`` (``schema.table``): ``new``, the row after an insert or
    update; ``old``, the row before an update or a delete (column name → value)."""

    op: str  # insert, update, delete
    table: str
    new: dict[str, Any] | None = None
    old: dict[str, Any] | None = None

    def key(self, columns: Iterable[str]) -> tuple[Any, ...]:
        """The row's values of ``columns``: after the change, or before a delete."""
        row = self.new if self.new is not None else self.old
        assert row is not None
        return tuple(row[c] for c in columns)

    def old_key(self, columns: Iterable[str]) -> tuple[Any, ...] | None:
        """The values of ``columns`` before an update that changed them; None otherwise."""
        if self.op != "update" or self.old is None:
            return None
        before = tuple(self.old[c] for c in columns)
        return None if before == self.key(columns) else before


@dataclass
class BinlogTransaction:
    """A committed transaction's changes of the stream's tables, in commit order."""

    gtid: str
    committed_at: datetime
    changes: list[RowChange] = field(default_factory=list)
    # Watermark messages written into the transaction (:meth:`BinlogChangeStream.mark`):
    # (prefix, content), in order.
    messages: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class BinlogRead:
    """What one read found: its transactions that changed the stream's tables, and the
    position after the last transaction it read (whatever that one changed)."""

    transactions: list[BinlogTransaction]
    position: str


def _domains(position: str) -> dict[str, int]:
    """A position's sequence number per replication domain."""
    found = {}
    for part in position.split(","):
        if part.strip():
            domain, _server, sequence = part.strip().split("-")
            found[domain] = int(sequence)
    return found


def sequence(position: str) -> int:
    """A one-domain position's (or GTID's) sequence number; 0 for none."""
    return int(position.rsplit("-", 1)[1]) if position else 0


def reached(position: str, target: str) -> bool:
    """Whether ``position`` is at or past ``target`` (a position or a GTID) in every domain
    ``target`` names."""
    have = _domains(position)
    return all(have.get(domain, -1) >= seq for domain, seq in _domains(target).items())


def advanced(position: str, gtid: str) -> str:
    """``position`` moved past ``gtid`` in its replication domain."""
    domains = dict(part.split("-", 1) for part in position.split(",") if part.strip())
    domain, rest = gtid.split("-", 1)
    domains[domain] = rest
    return ",".join(f"{d}-{domains[d]}" for d in sorted(domains, key=int))


class BinlogChangeStream:
    """The changes of ``tables`` (``table`` or ``schema.table``) in the server of ``url``.

    :meth:`check` says whether the server can stream and gives its current
    position; :meth:`changes` reads from a position until it has caught up
    (or ``max_transactions`` were read). ``label`` names the stream in errors.
    A server that cannot be reached raises :class:`SourceError` (transient);
    one without a row binary log raises :class:`ConfigError`; a position
    whose binary log the server has purged raises a :class:`SourceError`
    that is permanent and names the way out.
    """

    def __init__(self, url: str | sa.URL, tables: Sequence[str], label: str) -> None:
        self._url = sa.make_url(url)
        database = self._url.database or ""
        self._tables = {t if "." in t else f"{database}.{t}" for t in tables}
        self._watermarks = f"{database}.{WATERMARKS}"
        self.label = label
        # A replica's id: two readers with one id would disconnect each other.
        self.server_id = random.randint(10_000, 2**31 - 1)

    def add(self, table: str) -> None:
        """Read the changes of ``table`` too."""
        database = self._url.database or ""
        self._tables.add(table if "." in table else f"{database}.{table}")

    def check(self) -> str:
        """Raise :class:`ConfigError` unless the server writes a row binary log with column
        names; the server's current position."""
        *found, position = self._one_row(
            f"SELECT {', '.join(f'@@{name}' for name in _NEEDED)}, @@gtid_binlog_pos"
        )
        wrong = [f"{n}={v}" for n, v in zip(_NEEDED, found, strict=True)
                 if str(v).upper() != _NEEDED[n].upper()]  # fmt: skip
        if wrong:
            needed = ", ".join(f"{n}={'ON' if n == 'log_bin' else v}" for n, v in _NEEDED.items())
            raise ConfigError(
                f"{self.label}: {redact_url(self._url.render_as_string())} runs with "
                f"{', '.join(wrong).replace('log_bin=0', 'log_bin=OFF')}: a change stream needs "
                f"{needed} (set them in the server's configuration and restart it)"
            )
        return str(position or "")

    def source_position(self) -> str:
        """The server's current position (``@@gtid_binlog_pos``)."""
        return str(self._one_row("SELECT @@gtid_binlog_pos")[0] or "")

    def changes(self, after: str, max_transactions: int = 1_000,
                timeout: float = READ_TIMEOUT) -> BinlogRead:  # fmt: skip
        """Transactions committed after ``after`` (a position) and by the time of the call,
        in commit order; at most ``max_transactions`` read (those of other tables count).

        The log is read as a blocking replica does, up to the server's position when the
        call began (MariaDB resets a non-blocking dump's connection under load, and the
        library's reconnect would start over). A read that has not reached it after
        ``timeout`` seconds raises a transient :class:`SourceError`.
        """
        import pymysql
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        end = self.source_position()
        position, read = after, 0
        done: list[BinlogTransaction] = []
        if reached(position, end):
            return BinlogRead(done, position)
        reader = BinLogStreamReader(
            connection_settings=self._settings(), server_id=self.server_id, blocking=True,
            pymysql_wrapper=_kept_alive,
            is_mariadb=True, auto_position=after or "0-0-0", slave_heartbeat=1.0,
            only_events=[MariadbGtidEvent, XidEvent, QueryEvent, WriteRowsEvent,
                         UpdateRowsEvent, DeleteRowsEvent, HeartbeatLogEvent],
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        open_txn: BinlogTransaction | None = None
        try:
            for event in reader:
                if time.monotonic() > deadline:
                    raise SourceError(f"{self.label}: the binary log did not reach {end} from "
                                      f"{after} in {timeout:.0f} s (at {position})")  # fmt: skip
                if isinstance(event, MariadbGtidEvent):
                    gtid = str(event.gtid)
                    # Read before (a reconnect starts over): skipped.
                    past = not reached(position, gtid)
                    at = datetime.fromtimestamp(event.timestamp, UTC)
                    open_txn = BinlogTransaction(gtid, at) if past else None
                elif open_txn is None or isinstance(event, HeartbeatLogEvent):
                    continue
                elif isinstance(event, XidEvent) or (
                        isinstance(event, QueryEvent) and event.query.strip().upper() == "COMMIT"):
                    position, read = advanced(position, open_txn.gtid), read + 1  # fmt: skip
                    if open_txn.changes or open_txn.messages:
                        done.append(open_txn)
                    open_txn = None
                    if read >= max_transactions or reached(position, end):
                        break
                elif isinstance(event, QueryEvent):  # DDL: a transaction of its own
                    position, open_txn = advanced(position, open_txn.gtid), None
                    if reached(position, end):
                        break
                elif f"{event.schema}.{event.table}" in self._tables:
                    open_txn.changes.extend(_row_changes(event))
                elif f"{event.schema}.{event.table}" == self._watermarks:
                    open_txn.messages.extend(
                        (str(c.new["prefix"]), str(c.new["content"]).encode())
                        for c in _row_changes(event) if c.new is not None
                    )  # fmt: skip
        except pymysql.err.OperationalError as error:
            raise self._read_error(error, after) from error
        finally:
            reader.close()
        return BinlogRead(done, position)

    def mark(self, prefix: str, content: str) -> str:
        """Write a watermark message into the binary log, in a transaction of its own (a row
        of :data:`WATERMARKS`, made on first use); the position after it."""
        table = f"`{WATERMARKS}`"
        self._run(f"CREATE TABLE IF NOT EXISTS {table} (prefix varchar(64) PRIMARY KEY, "
                  "content varchar(255) NOT NULL)",
                  (f"INSERT INTO {table} VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
                   "content = VALUES(content)", (prefix, content)))  # fmt: skip
        return self.source_position()

    def drop(self) -> bool:
        """Drop the watermark table sluice made in the source's database; whether it was there."""
        there = self._one_row(f"SHOW TABLES LIKE '{WATERMARKS}'") != ()
        self._run(f"DROP TABLE IF EXISTS `{WATERMARKS}`")
        return there

    def _read_error(self, error: Exception, after: str) -> SourceError:
        code = error.args[0] if error.args else None
        if code == _PURGED:
            failed = SourceError(
                f"{self.label}: the binary log at position {after} is no longer on the server "
                f"(purged: {error.args[1]}); the changes since cannot be read: a new snapshot "
                "of the tables is the way out (sluice reset, then run)"
            )
            failed.transient, failed.permanent = False, True
            return failed
        return SourceError(f"{self.label}: reading the binary log failed: {error}")

    def _settings(self) -> dict[str, Any]:
        url = self._url
        return {"host": url.host or "127.0.0.1", "port": url.port or 3306,
                "user": url.username or "root", "password": url.password or "",
                "connect_timeout": CONNECT_TIMEOUT}  # fmt: skip

    def _one_row(self, sql: str) -> tuple[Any, ...]:
        connection = self._connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return tuple(cursor.fetchone() or ())
        finally:
            connection.close()

    def _run(self, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
        """Run ``statements`` (each SQL, or SQL and its arguments), each committed."""
        connection = self._connect()
        try:
            with connection.cursor() as cursor:
                for statement in statements:
                    sql, args = (statement, None) if isinstance(statement, str) else statement
                    cursor.execute(sql, args)
                    connection.commit()
        finally:
            connection.close()

    def _connect(self) -> Any:
        import pymysql  # the mysql extra: sluice imports without it

        database = self._url.database or None
        try:
            return _kept_alive(**self._settings(), database=database)
        except pymysql.err.OperationalError as error:
            raise SourceError(f"{self.label}: cannot reach the database: {error}") from error


def _kept_alive(**settings: Any) -> Any:
    """A PyMySQL connection with sluice's TCP keepalives (:mod:`config.connections`): a
    replica read from a server that went away without a word fails within about a minute
    instead of waiting for the operating system's two hours."""
    connection = _connection_class()(**settings)
    keep_alive(connection)
    return connection


@cache
def _connection_class() -> type:
    """PyMySQL's connection, its "preferred" TLS context made once for all (see below)."""
    import pymysql  # the mysql extra: sluice imports without it

    preferred = ssl.create_default_context()
    preferred.check_hostname, preferred.verify_mode = False, ssl.CERT_NONE

    class Connection(pymysql.connections.Connection):
        # With no TLS settings PyMySQL tries TLS unverified, and made a new context for it
        # each time, loading the system's CA files to verify nothing: ~30 ms a connection,
        # a third of a MariaDB stream's full load (each watermark, position and log read
        # connects). The same context, once.
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            return preferred if sslp == {} else super()._create_ssl_ctx(sslp)

    return Connection


def _row_changes(event: Any) -> list[RowChange]:
    """The changes of one rows event (mysql-replication's), as :class:`RowChange` objects."""
    table = f"{event.schema}.{event.table}"
    kind = type(event).__name__
    if kind == "WriteRowsEvent":
        return [RowChange("insert", table, _values(r, "")) for r in event.rows]
    if kind == "DeleteRowsEvent":
        return [RowChange("delete", table, None, _values(r, "")) for r in event.rows]
    return [RowChange("update", table, _values(r, "after_"), _values(r, "before_"))
            for r in event.rows]  # fmt: skip


def _values(row: dict[str, Any], side: str) -> dict[str, Any]:
    """One side of a row (``""``, ``before_``, ``after_``): the library gives an empty SET as
    None, telling it from NULL only in the row's ``none_sources``."""
    values = dict(row[f"{side}values"])
    for column, why in (row.get(f"{side}none_sources") or {}).items():
        if why == "empty set":
            values[column] = set()
    return values
