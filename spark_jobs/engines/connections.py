"""Every connection of sluice's bounded, each engine's own way (:mod:`config.connections`
says why and how long).

:func:`bound_connections` gives every database connection the process opens from then
on (SQLAlchemy's, whoever makes the engine) a connect timeout and TCP keepalives: the
command line calls it first thing, and so do the load tasks' processes
(:func:`spark_jobs.common.jdbc.sql_engine`), on this machine or on a cluster's executors.
A connection's keepalives are set where its engine's driver takes them
(:meth:`~spark_jobs.engines.sessions.Sessions.connect_params`: libpq's parameters), or
on its socket (:func:`config.connections.keep_alive`: PyMySQL's).
:func:`bound_waits` bounds what one engine's sessions wait for.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from config.connections import CONNECT_TIMEOUT, LOCK_WAIT, keep_alive
from spark_jobs.engines import dialect_traits

_installed = False
_lock = threading.Lock()


def bound_connections() -> None:
    """Bound every connection this process opens from now on (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        # libpq's own, read by every PostgreSQL connection (psql's too), where neither the
        # environment nor the URL sets one: libpq would wait for the OS's TCP timeout.
        os.environ.setdefault("PGCONNECT_TIMEOUT", str(CONNECT_TIMEOUT))
        sa.event.listen(sa.engine.Engine, "do_connect", _connect_params)
        sa.event.listen(sa.engine.Engine, "connect", lambda conn, _record: keep_alive(conn))
        _installed = True


def _connect_params(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
    dialect_traits(dialect).connect_params(dialect, cparams)


def bound_waits(
    engine: sa.Engine, query_timeout: Callable[[], float | None] = lambda: None
) -> None:
    """Make each connection ``engine`` opens wait :data:`~config.connections.LOCK_WAIT` s at
    most for a lock an application holds (then its statement is cancelled, to be tried
    again later), and run no statement past ``query_timeout()`` seconds (None: no bound),
    unless the URL sets its own: PostgreSQL's ``lock_timeout`` and ``statement_timeout``,
    MariaDB's ``lock_wait_timeout`` and ``max_statement_time`` (MySQL's
    ``max_execution_time``)."""
    dialect_traits(engine.dialect).bound_waits(engine, LOCK_WAIT, query_timeout)
