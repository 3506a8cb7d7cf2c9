"""How long a connection of sluice's waits on a network that went quiet.

:func:`bound_connections` gives every database connection the process opens
from then on (SQLAlchemy's, whoever makes the engine) a connect timeout and
TCP keepalives: the command line calls it first thing, and so do the load
tasks' processes (:func:`spark_jobs.common.jdbc.sql_engine`), on this machine or on a
cluster's executors. The connections made without SQLAlchemy take the same
settings where they are made: a PostgreSQL read's (:func:`libpq_keepalives`),
a PyMySQL read's and the binary-log reader's (:func:`keep_alive`), connectorx's
(in its URL: :func:`spark_jobs.engines.mysql.read.connectorx_url`).

- **Connect timeout**: a PostgreSQL connection gives up after
  :data:`CONNECT_TIMEOUT` seconds (libpq's ``PGCONNECT_TIMEOUT``, unless the
  environment sets it; libpq waits for the operating system's TCP timeout,
  about 130 s, by default). PyMySQL's own default is the same. A database's
  URL may set its own (``?connect_timeout=N``).
- **Keepalives**: an idle connection is probed after :data:`KEEPALIVES`'s
  ``keepalives_idle`` seconds, every ``keepalives_interval``, and dropped
  after ``keepalives_count`` probes go unanswered: a query waiting for the
  answer of a database that went away without a word (a dropped route, a
  dead load balancer, a host that lost power) fails within about a minute,
  and its batch or refill is retried with backoff, instead of waiting for
  the operating system's two hours. (Data still being sent to such a peer
  is given up on by the kernel's retransmissions, ~15 minutes.) A
  PostgreSQL URL may set its own (``?keepalives_idle=N`` and the others,
  libpq's names); a MySQL/MariaDB connection's socket is set so.

A database that answers slowly is never cut off by these: the server's
kernel answers the probes while it works.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

CONNECT_TIMEOUT = 10
"""Seconds a connection may take to open, where neither the environment nor its URL says."""

LOCK_WAIT = 5
"""Seconds sluice's own queries on a source (key queries, checks, counts, the start's
catalogue reads) wait for a lock an application holds (``lock_timeout``,
``lock_wait_timeout``): then they are cancelled and tried again later, and the start,
the loop and the other sources never wait on an application's migration."""

KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
              "keepalives_count": 3}  # fmt: skip
"""TCP keepalives of every connection, as libpq names them: a silent peer is given up on
after about a minute (30 s idle, then 3 probes 10 s apart)."""

_installed = False
_lock = threading.Lock()


def bound_connections() -> None:
    """Bound every connection this process opens from now on (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        os.environ.setdefault("PGCONNECT_TIMEOUT", str(CONNECT_TIMEOUT))
        sa.event.listen(sa.engine.Engine, "do_connect", _libpq_keepalives)
        sa.event.listen(sa.engine.Engine, "connect", lambda conn, _record: keep_alive(conn))
        _installed = True


def libpq_keepalives(conninfo: str) -> dict[str, Any]:
    """:data:`KEEPALIVES` that the libpq ``conninfo`` does not set itself, as keywords of
    ``psycopg.connect`` (whose keywords would override the conninfo's)."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(conninfo)
    return {name: value for name, value in KEEPALIVES.items() if name not in given}


def _libpq_keepalives(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
    # libpq takes them as connection parameters; a URL's own (in cparams) stay as they are.
    if dialect.name == "postgresql" and dialect.driver in ("psycopg", "psycopg2"):
        for name, value in KEEPALIVES.items():
            cparams.setdefault(name, value)


def keep_alive(dbapi_connection: Any) -> None:
    """Set :data:`KEEPALIVES` on a PyMySQL connection's socket (PyMySQL takes no keepalive
    setting); nothing for a connection of another driver."""
    sock = getattr(dbapi_connection, "_sock", None)
    if not isinstance(sock, socket.socket) or sock.family not in (socket.AF_INET,
                                                                  socket.AF_INET6):  # fmt: skip
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, name in (("TCP_KEEPIDLE", "keepalives_idle"),
                         ("TCP_KEEPINTVL", "keepalives_interval"),
                         ("TCP_KEEPCNT", "keepalives_count")):  # fmt: skip
        if hasattr(socket, option):  # Linux's names; others keep the system's
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), KEEPALIVES[name])


def bound_waits(
    engine: sa.Engine, query_timeout: Callable[[], float | None] = lambda: None
) -> None:
    """Make each connection ``engine`` opens wait :data:`LOCK_WAIT` s at most for a lock an
    application holds (then its statement is cancelled, to be tried again later), and run
    no statement past ``query_timeout()`` seconds (None: no bound), unless the URL sets its
    own: PostgreSQL's ``lock_timeout`` and ``statement_timeout``, MariaDB's
    ``lock_wait_timeout`` and ``max_statement_time`` (MySQL's ``max_execution_time``)."""
    if engine.dialect.name == "postgresql" and engine.dialect.driver in ("psycopg", "psycopg2"):

        def options(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
            seconds = query_timeout()
            given = str(cparams.get("options", ""))
            if seconds is not None and "statement_timeout" not in given:
                given = f"{given} -c statement_timeout={int(seconds * 1000)}"
            if "lock_timeout" not in given:
                given = f"{given} -c lock_timeout={int(LOCK_WAIT * 1000)}"
            cparams["options"] = given.strip()

        sa.event.listen(engine, "do_connect", options)
    elif engine.dialect.name == "mysql":

        def session(dbapi_connection: Any, record: Any) -> None:
            seconds = query_timeout()
            # The dialect knows its server once the first connection is made.
            mariadb = getattr(engine.dialect, "is_mariadb", False)
            settings = [f"lock_wait_timeout = {LOCK_WAIT:g}"]  # metadata locks: DDL's
            if seconds is not None:
                settings.append(f"max_statement_time = {seconds:g}" if mariadb
                                else f"max_execution_time = {int(seconds * 1000)}")  # fmt: skip
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"SET SESSION {', '.join(settings)}")
            finally:
                cursor.close()

        sa.event.listen(engine, "connect", session)
