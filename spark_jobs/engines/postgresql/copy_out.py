"""A ``COPY … TO STDOUT``'s output in large chunks, read through a ``psql`` process.

psycopg hands a COPY's output over one CopyData message, one row, at a time:
~3 µs of the Spark task's Python a row, read and relayed, as much CPU as the
target spends storing it, on cores the databases share. Measured here, 2 M
rows of four narrow columns relayed into a target's COPY: 5.9 s of the
task's CPU through psycopg; 0.4 s of the task's and 0.4 s of ``psql``'s
through a pipe. Where ``psql`` is on the worker's PATH, the task reads its
standard output in chunks; elsewhere psycopg's rows, joined into chunks.

``psql`` runs with the connection's settings (:data:`.read.SESSION`, as
``PGOPTIONS``), its password in its environment, never on its command line.
An error it prints comes back as psycopg's exception of that SQLSTATE, in
SQLAlchemy's wrapper, as a statement's would: whoever catches it tells a
lost server from a bad query as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

PIPE_BYTES = 1 << 20
"""The pipe's buffer (Linux's default 64 KiB lets ``psql`` wait on the task more often)."""

PSQL_ROWS = 50_000
"""The fewest rows a read goes through ``psql`` for: starting it costs ~45 ms of CPU
against ~3 ms for a psycopg connection (measured here, 200 reads of 1,000 rows), and
psycopg's rows ~3 µs each: below ~15,000 rows psycopg is the cheaper (a schema of
many small tables, verify's buckets)."""

_SQLSTATE = re.compile(r"(?:ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}):\s*(.*)")
_F_SETPIPE_SZ = 1031


def psql() -> str | None:
    """The ``psql`` this worker runs COPY through; None: psycopg reads it.

    ``SLUICE_PSQL`` names another one, or ``none`` for psycopg always.
    """
    chosen = os.environ.get("SLUICE_PSQL", "")
    if chosen.lower() == "none":
        return None
    return shutil.which(chosen or "psql")


def copy_out(info: str, statement: str, options: str, rows: int | None = None) -> Iterator[bytes]:
    """The output of ``statement`` (a ``COPY … TO STDOUT``) on ``info``, in chunks that
    follow no row boundary, the session set by ``options`` (``-c name=value …``);
    ``rows``: about how many rows it gives (fewer than :data:`PSQL_ROWS`: through
    psycopg), None when unknown (through ``psql`` where there is one).

    Errors come as SQLAlchemy's (``DBAPIError`` and its kinds), raised only once
    the output has ended short: a consumer that raises while reading stops the read.
    """
    program = psql() if rows is None or rows >= PSQL_ROWS else None
    if program is None:
        yield from _through_psycopg(info, statement, options)
    else:
        yield from _through_psql(program, info, statement, options)


def _through_psycopg(info: str, statement: str, options: str) -> Iterator[bytes]:
    import psycopg

    conn: Any = None
    done = False
    try:
        conn, reused = _connection(info, options)
        given = False
        try:
            for chunk in _copied(conn, statement):
                given = True
                yield chunk
        except psycopg.OperationalError:
            if given or not reused or not conn.broken:
                raise  # a refusal or a timeout of the read itself: not retried
            # The idle connection was lost meanwhile (the server restarted, a timeout):
            # nothing was handed over yet, so a new one reads it all again.
            conn.close()
            conn, _ = _connection(info, options, fresh=True)
            yield from _copied(conn, statement)
        done = True
    except psycopg.Error as error:
        raise sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error) from error
    finally:
        if done and getattr(_reusing, "on", False):
            _keep(info, options, conn)
        elif conn is not None:
            conn.close()  # a read that failed or was given up: its session's state is unknown


def _copied(conn: Any, statement: str) -> Iterator[bytes]:
    """``statement``'s output on ``conn``, its rows joined into chunks."""
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        chunk = bytearray()
        for row in copy:  # libpq hands over one row per message
            chunk += row
            if len(chunk) >= PIPE_BYTES:
                yield bytes(chunk)
                chunk.clear()
        if chunk:
            yield bytes(chunk)


_idle: dict[tuple[str, str], tuple[Any, float]] = {}
"""One idle connection per database and session settings, kept by this process for its next
read inside :func:`one_session` (a load's task, whose permits count it), with when it was
kept: a schema of 1,000 small tables read each table on a new connection, and each new
PostgreSQL session is a process the server forks and warms up (~1,100 of them a run)."""
_idle_lock = threading.Lock()

KEPT_FOR = 30.0
"""Seconds a connection is kept idle for the next read at most: long enough for a task's
small tables, short enough that a session a firewall forgot is not waited on."""

# A worker process forked from another holds copies of its connections: never its own.
os.register_at_fork(after_in_child=_idle.clear)


def _connection(info: str, options: str, fresh: bool = False) -> tuple[Any, bool]:
    """A connection to ``info`` in autocommit, its session set by ``options``: the one kept
    idle, unless ``fresh`` or kept too long; and whether it was."""
    import psycopg

    with _idle_lock:
        kept, since = (None, 0.0) if fresh else _idle.pop((info, options), (None, 0.0))
    if kept is not None and not kept.closed and time.monotonic() - since <= KEPT_FOR:
        return kept, True
    if kept is not None:
        kept.close()
    return psycopg.connect(info, options=options, autocommit=True), False


_reusing = threading.local()


@contextlib.contextmanager
def one_session() -> Iterator[None]:
    """Inside, this thread's small reads keep their connection for the next read of the same
    database; at the end, every connection kept is closed (a task's permits counted them:
    none may stay open after it). Outside, each read has a connection of its own."""
    _reusing.on = True
    try:
        yield
    finally:
        _reusing.on = False
        with _idle_lock:
            kept = [conn for conn, _ in _idle.values()]
            _idle.clear()
        for conn in kept:
            with contextlib.suppress(Exception):
                conn.close()


def _keep(info: str, options: str, conn: Any) -> None:
    """Keep ``conn`` for the next read of its database if it is idle and sound, closing the
    one kept before."""
    from psycopg.pq import TransactionStatus

    if conn.broken or conn.info.transaction_status != TransactionStatus.IDLE:
        conn.close()
        return
    with _idle_lock:
        before = _idle.get((info, options))
        _idle[(info, options)] = (conn, time.monotonic())
    if before is not None and before[0] is not conn:
        before[0].close()


def _through_psql(program: str, info: str, statement: str, options: str) -> Iterator[bytes]:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(info)
    env = {**os.environ, "PGOPTIONS": options}
    password = params.pop("password", None)
    if password is not None:
        env["PGPASSWORD"] = str(password)
    command = [program, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
               "-d", make_conninfo("", **params), "-c", statement]  # fmt: skip
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, bufsize=0,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(OSError):  # a smaller pipe only costs wake-ups
        fcntl.fcntl(proc.stdout.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
    try:
        while chunk := proc.stdout.read(PIPE_BYTES):
            yield chunk
        said = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            raise _error(statement, said, proc.returncode)
    finally:
        if proc.poll() is None:  # the consumer stopped reading: so does psql
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _error(statement: str, said: str, code: int) -> sa.exc.DBAPIError:
    """What ``psql`` printed as psycopg's exception of its SQLSTATE, wrapped as
    SQLAlchemy wraps it; a connection lost or refused (no SQLSTATE) as
    ``OperationalError``."""
    import psycopg
    from psycopg import errors

    found = _SQLSTATE.search(said)
    message = said.strip() or f"psql exited with {code}"
    kind: type[Any] = psycopg.OperationalError
    if found is not None:
        with contextlib.suppress(KeyError):
            kind = errors.lookup(found.group(1))
        message = found.group(2).strip()
    error = kind(message)
    return sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error)
