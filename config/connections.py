"""How long a connection of sluice's waits on a network that went quiet.

Every database connection the process opens is bounded so
(:func:`spark_jobs.engines.connections.bound_connections`, each engine its own way:
libpq's parameters, a PyMySQL connection's socket by :func:`keep_alive`); the
connections made without SQLAlchemy take the same settings where they are made: a
PostgreSQL read's (:func:`spark_jobs.engines.postgresql.sessions.libpq_keepalives`), a
PyMySQL read's and the binary-log reader's (:func:`keep_alive`), connectorx's (in its
URL: :func:`spark_jobs.engines.mysql.read.connectorx_url`).

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
- **Lock waits**: sluice's own queries on a source wait :data:`LOCK_WAIT` s at most
  for a lock (:func:`spark_jobs.engines.connections.bound_waits`).

A database that answers slowly is never cut off by these: the server's
kernel answers the probes while it works.
"""

from __future__ import annotations

import socket
from typing import Any

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


def keep_alive(dbapi_connection: Any) -> None:
    """Set :data:`KEEPALIVES` on a DB-API connection's TCP socket where the driver shows it
    (PyMySQL's, which takes no keepalive setting); nothing for another connection."""
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

