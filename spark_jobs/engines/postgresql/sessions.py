"""PostgreSQL's answers to the questions of sluice's own sessions
(:class:`~spark_jobs.engines.sessions.Sessions`): libpq's keepalives and timeouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from config.connections import KEEPALIVES
from spark_jobs.engines.sessions import Sessions

_LIBPQ_DRIVERS = ("psycopg", "psycopg2")
"""The SQLAlchemy drivers that connect through libpq, which takes its settings as
connection parameters."""


def libpq_keepalives(conninfo: str) -> dict[str, Any]:
    """:data:`~config.connections.KEEPALIVES` that the libpq ``conninfo`` does not set itself,
    as keywords of ``psycopg.connect`` (whose keywords would override the conninfo's)."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(conninfo)
    return {name: value for name, value in KEEPALIVES.items() if name not in given}


class PostgreSQLSessions(Sessions):
    """What sluice's own sessions on a PostgreSQL database need (see the module)."""

    reads_change_streams = True  # logical decoding (sources/pg_changes.py)
    stream_slots = True

    def connect_params(self, dialect: Any, params: dict[str, Any]) -> None:
        # libpq takes them as connection parameters; a URL's own (in params) stay as they are.
        if dialect.driver in _LIBPQ_DRIVERS:
            for name, value in KEEPALIVES.items():
                params.setdefault(name, value)

    def bound_waits(
        self, engine: sa.Engine, lock_wait: float, query_timeout: Callable[[], float | None]
    ) -> None:
        if engine.dialect.driver not in _LIBPQ_DRIVERS:
            return

        def options(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
            seconds = query_timeout()
            given = str(cparams.get("options", ""))
            if seconds is not None and "statement_timeout" not in given:
                given = f"{given} -c statement_timeout={int(seconds * 1000)}"
            if "lock_timeout" not in given:
                given = f"{given} -c lock_timeout={int(lock_wait * 1000)}"
            cparams["options"] = given.strip()

        sa.event.listen(engine, "do_connect", options)
