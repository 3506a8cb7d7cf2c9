"""MySQL's and MariaDB's answers to the questions of sluice's own sessions
(:class:`~spark_jobs.engines.sessions.Sessions`): their session timeouts, the ledger's
named lock, their row statistics, their key columns' collations and the stream's
positions by GTID."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.sql.elements import ColumnElement

from spark_jobs.engines.sessions import Sessions

_DIALECT = "mysql"
"""SQLAlchemy's dialect of ``mysql+…://`` URLs. A ``mariadb+…://`` URL's dialect is
``mariadb``: what only this one has had so far is kept so (see where it is used)."""


class MySQLSessions(Sessions):
    """What sluice's own sessions on a MySQL or MariaDB database need (see the module)."""

    reads_change_streams = True  # the row binary log, by GTID (sources/binlog_changes.py)
    rereads_changes = True  # the binary log is the server's to keep, whoever reads it

    def bound_waits(
        self, engine: sa.Engine, lock_wait: float, query_timeout: Callable[[], float | None]
    ) -> None:
        # As before the engines answered: a mariadb+…:// URL's engine is left unbounded.
        if engine.dialect.name != _DIALECT:
            return

        def session(dbapi_connection: Any, record: Any) -> None:
            seconds = query_timeout()
            # The dialect knows its server once the first connection is made.
            mariadb = getattr(engine.dialect, "is_mariadb", False)
            settings = [f"lock_wait_timeout = {lock_wait:g}"]  # metadata locks: DDL's
            if seconds is not None:
                settings.append(f"max_statement_time = {seconds:g}" if mariadb
                                else f"max_execution_time = {int(seconds * 1000)}")  # fmt: skip
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"SET SESSION {', '.join(settings)}")
            finally:
                cursor.close()

        sa.event.listen(engine, "connect", session)

    def timed_connect_args(self, seconds: int) -> dict[str, object]:
        return {"connect_timeout": seconds, "read_timeout": seconds}

    @contextmanager
    def held_lock(self, conn: sa.Connection, number: int, name: str) -> Iterator[None]:
        # A named lock is the session's, not the transaction's: given back by name.
        conn.execute(sa.text("SELECT GET_LOCK(:k, 600)"), {"k": name})
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK(:k)"), {"k": name})

    def counted_rows_query(self, dialect: Any, table: sa.TableClause) -> sa.Select[Any] | None:
        # As before the engines answered: a mariadb+…:// URL's source has no estimate.
        if dialect.name != _DIALECT:
            return None
        info = sa.table("TABLES", sa.column("table_rows"), sa.column("table_schema"),
                        sa.column("table_name"), schema="information_schema")  # fmt: skip
        schema = table.schema
        return sa.select(info.c.table_rows).where(
            info.c.table_schema == (sa.literal(schema) if schema else sa.func.database()),
            info.c.table_name == table.name,
        )

    def bound_text(self, value: str, collation: str | None) -> ColumnElement[Any]:
        if not collation:
            return super().bound_text(value, collation)
        # A literal is of the connection's character set: in the column's, it compares
        # under the column's collation.
        charset = collation.split("_", 1)[0]
        return sa.cast(sa.literal(value), mysql.CHAR(charset=charset))

    def key_collations(
        self, conn: sa.Connection, table: str, schema: str | None, names: Sequence[str],
        found: dict[str, Any],
    ) -> dict[str, str]:  # fmt: skip
        # Every MySQL column has one (the table's default when none is declared),
        # and the connection's may differ: ask the catalog.
        rows = conn.execute(
            sa.text("SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE()) AND TABLE_NAME = :table"),
            {"schema": schema, "table": table},
        ).all()  # fmt: skip
        return {name: coll for name, coll in rows if name in names and coll}

    def stream_position_text(self, position: Sequence[Any]) -> str:
        # A GTID's sequence number (one replication domain), and the event in it.
        return f"GTID sequence {position[0]}, event {position[1]}"
