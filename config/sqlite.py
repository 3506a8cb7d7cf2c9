"""How sluice opens a SQLite database it writes to: the one set-up for the ledger and targets.

pysqlite begins transactions lazily and its own way, which breaks SAVEPOINT
and lets a read turn into a write too late to take the lock; so the driver's
transaction handling is switched off and SQLAlchemy emits ``BEGIN`` itself,
``BEGIN IMMEDIATE`` where the transaction will write (the write lock up front:
a read that upgrades later would fail at once with ``SQLITE_BUSY_SNAPSHOT``
when another process wrote in between). A busy database is waited for.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

BUSY_TIMEOUT_MS = 30_000
_WAL_RETRY = 0.01  # seconds between two tries to switch a new file to WAL


def sqlite_engine(
    url: str | sa.URL,
    *,
    wal: bool = False,
    writes: Callable[[sa.Connection], bool] = lambda _conn: True,
    **engine_args: Any,
) -> sa.Engine:
    """An engine on a SQLite file with sluice's set-up.

    ``wal``: write-ahead logging, so that readers (``status``, other threads)
    run beside the writer. ``writes(conn)`` says whether a transaction about
    to begin will write (``BEGIN IMMEDIATE``) or only read (``BEGIN``).
    The file's folder is created if missing.
    """
    parsed = sa.make_url(url)
    if parsed.database and parsed.database != ":memory:" and not parsed.database.startswith(
        "file:"
    ):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(parsed, **engine_args)

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if wal:
            _into_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()
        dbapi_conn.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes(conn) else "BEGIN")

    return engine


def _into_wal(cursor: Any) -> None:
    """Put the file in WAL mode (it stays so), once.

    Switching answers "database is locked" at once, without waiting as the
    busy timeout would, while another connection switches the same new file
    (four daemons started together on a new ledger): it is tried again.
    """
    waited = 0.0
    while True:
        try:
            # A file already in WAL, or an in-memory database, answers at once.
            cursor.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or waited >= BUSY_TIMEOUT_MS / 1000:
                raise
            time.sleep(_WAL_RETRY)  # at connect: no stop to watch for
            waited += _WAL_RETRY
