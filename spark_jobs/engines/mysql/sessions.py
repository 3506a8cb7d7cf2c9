"""MySQL's and MariaDB's answers to the questions of sluice's own sessions
(:class:`~spark_jobs.engines.sessions.Sessions`): their session timeouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.sessions import Sessions

_DIALECT = "mysql"
"""SQLAlchemy's dialect of ``mysql+…://`` URLs. A ``mariadb+…://`` URL's dialect is
``mariadb``: what only this one has had so far is kept so (see where it is used)."""


class MySQLSessions(Sessions):
    """What sluice's own sessions on a MySQL or MariaDB database need (see the module)."""

    reads_change_streams = True  # the row binary log, by GTID (sources/binlog_changes.py)

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
