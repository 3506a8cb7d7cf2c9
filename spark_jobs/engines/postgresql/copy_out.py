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
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.postgresql.sessions import libpq_keepalives

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
        if conn is not None and not (done and _keep(info, options, conn)):
            conn.close()  # not in a session, or failed or given up: its state is unknown


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


_session = threading.local()
"""Inside :func:`one_session`, ``kept``: this thread's idle connection per database and
session settings, for its next read (a schema of 1,000 small tables read each table on a new
connection, and each new PostgreSQL session is a process the server forks and warms up:
~1,100 of them a run)."""


@contextlib.contextmanager
def one_session() -> Iterator[None]:
    """Inside, this thread's small reads keep their connection for the next read of the same
    database; at the end, every connection kept is closed (a load's task: its permits
    counted them, none may stay open after it). Outside, each read has a connection of its
    own."""
    _session.kept = {}
    try:
        yield
    finally:
        kept, _session.kept = _session.kept, None
        for conn in kept.values():
            with contextlib.suppress(Exception):
                conn.close()


def _connection(info: str, options: str, fresh: bool = False) -> tuple[Any, bool]:
    """A connection to ``info`` in autocommit, its session set by ``options``: the one this
    thread's session kept, unless ``fresh``; and whether it was."""
    import psycopg

    kept = getattr(_session, "kept", None)
    conn = None if kept is None or fresh else kept.pop((info, options), None)
    if conn is not None and not conn.closed:
        return conn, True
    keepalives = libpq_keepalives(info)
    return psycopg.connect(info, options=options, autocommit=True, **keepalives), False


def _keep(info: str, options: str, conn: Any) -> bool:
    """Keep ``conn`` for this thread's next read of its database, inside a session and if it
    is idle and sound; whether it was kept (the one kept before is closed)."""
    from psycopg.pq import TransactionStatus

    kept = getattr(_session, "kept", None)
    if kept is None or conn.broken or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    before = kept.get((info, options))
    kept[(info, options)] = conn
    if before is not None and before is not conn:
        before.close()
    return True


def _through_psql(program: str, info: str, statement: str, options: str) -> Iterator[bytes]:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = {**conninfo_to_dict(info), **libpq_keepalives(info)}
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
