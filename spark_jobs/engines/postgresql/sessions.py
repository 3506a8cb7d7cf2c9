"""PostgreSQL's answers to the questions of sluice's own sessions
(:class:`~spark_jobs.engines.sessions.Sessions`): libpq's keepalives and timeouts, and
the planner's estimates and the server's measures a source's key queries take."""

from __future__ import annotations

import json
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

    plans_key_ranges = True

    def planned_rows(
        self, conn: sa.Connection, query: sa.Select[Any], table_sql: str
    ) -> int | None:
        pg_class = sa.table("pg_class", sa.column("oid"), sa.column("reltuples"))
        reltuples = sa.select(pg_class.c.reltuples).where(
            pg_class.c.oid == sa.func.to_regclass(table_sql)
        )
        analyzed = conn.scalar(reltuples)
        if analyzed is None or analyzed < 0:  # never analyzed: a guess from its size
            return None
        compiled = query.compile(dialect=conn.dialect)
        found: Any = conn.exec_driver_sql(
            f"EXPLAIN (FORMAT JSON) {compiled}", compiled.params
        ).scalar()
        plan = json.loads(found) if isinstance(found, str) else found  # psycopg parses it
        return int(plan[0]["Plan"]["Plan Rows"])

    def row_width_sql(self, table_sql: str, sample: int) -> str | None:
        # The server measures its rows' record text: no row comes over (a schema of
        # 1,000 tables spent half a minute converting samples).
        return (f"SELECT avg(octet_length(s::text)) FROM (SELECT * FROM {table_sql} "
                f"LIMIT {int(sample)}) s")  # fmt: skip
