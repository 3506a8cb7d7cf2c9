"""PostgreSQL's answers to the questions of sluice's own sessions
(:class:`~spark_jobs.engines.sessions.Sessions`): libpq's keepalives and timeouts,
read-only transactions, the ledger's advisory lock and its lost commits settled by the
server, the planner's estimates and the server's measures a source's key queries take,
and the stream's positions as LSNs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import sqlalchemy as sa

from config.connections import KEEPALIVES
from spark_jobs.engines.sessions import Sessions, one_connection

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

    def readonly_engine(self, url: sa.URL) -> sa.Engine | None:
        engine = one_connection(url)
        with suppress(sa.exc.ArgumentError):  # a driver that cannot: only SELECTs are sent
            engine = engine.execution_options(postgresql_readonly=True)
        return engine

    def timed_connect_args(self, seconds: int) -> dict[str, object]:
        return {"connect_timeout": seconds, "options": f"-c statement_timeout={seconds * 1000}"}

    @contextmanager
    def held_lock(self, conn: sa.Connection, number: int, name: str) -> Iterator[None]:
        # An advisory lock of the transaction: released by its COMMIT or ROLLBACK.
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": number})
        yield

    def transaction_session(self, conn: sa.Connection) -> tuple[int, int] | None:
        row = conn.execute(sa.text("SELECT txid_current(), pg_backend_pid()")).one()
        return int(row[0]), int(row[1])

    def commit_outcome(
        self, conn: sa.Connection, session: tuple[int, int], pause: Callable[[float], None]
    ) -> str | None:
        # While its server process has not yet seen its connection go, the transaction is
        # still in progress: that process (our own session, found by its transaction) is
        # ended first, which aborts it.
        xid, pid = session
        status = sa.text("SELECT txid_status(:x)")
        state = conn.scalar(status, {"x": xid})
        if state == "in progress":
            conn.execute(sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid = :p AND backend_xid::text::bigint = :x % 4294967296"
            ), {"p": pid, "x": xid})  # fmt: skip
            for _ in range(100):  # the process exits within moments of the signal
                state = conn.scalar(status, {"x": xid})
                if state != "in progress":
                    break
                pause(0.05)
        return None if state == "in progress" else state

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

    def stream_position_text(self, position: Sequence[Any]) -> str:
        from spark_jobs.engines.postgresql.pgoutput import lsn_text

        return f"LSN {lsn_text(int(position[0]))}, event {position[1]}"
