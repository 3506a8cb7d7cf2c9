"""Ledger schema versions: every change of the ``sluice_*`` tables is an Alembic migration.

The migrations live in ``migrations/versions``; the revision a ledger is at
is in its ``sluice_schema_version`` table (a ledger made before schemas had
versions has none: it is revision ``0001`` without the table). Every writer
(:class:`~scheduler.ledger.Ledger`: ``sluice run``, ``reset``, ``retry``, the
import job) calls :func:`upgrade` on opening, which costs one query when
there is nothing to do; read-only commands (``status``, ``plan``) never do.

An upgrade runs in one transaction under a lock that every other upgrader
waits for (PostgreSQL: an advisory lock; SQLite: its write lock; MySQL:
``GET_LOCK``), and refuses while a daemon of an older schema is live on the
ledger: its next write could fail or, worse, write what the new schema means
otherwise. Stopped daemons drain first; then the upgrade goes ahead.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from config.errors import LedgerError
from config.processes import pid_alive
from scheduler.ledger.owners import DEAD_AFTER
from scheduler.ledger.schema import SCHEMA, WRITE_OPTION, open_engine
from spark_jobs.engines import dialect_traits

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006")
"""Every revision of the ledger schema, oldest first (``migrations/versions``)."""
HEAD = SCHEMA
VERSION_TABLE = "sluice_schema_version"
MIGRATIONS = Path(__file__).with_name("migrations")
_LOCK_NUMBER = 0x51_0CE_1ED6E5
"""The lock upgraders take, where an engine's locks are numbers (PostgreSQL's advisory
locks): any fixed number."""
_LOCK_NAME = "sluice_ledger_upgrade"
"""The lock upgraders take, where an engine's locks are named (MySQL's ``GET_LOCK``)."""


def revision(conn: sa.Connection) -> str | None:
    """The ledger's schema revision: None when it has no ``sluice_*`` table at all."""
    inspector = sa.inspect(conn)
    if inspector.has_table(VERSION_TABLE):
        return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    return "0001" if inspector.has_table("sluice_batches") else None


def open_upgraded(url: str, clock: Callable[[], float] = time.time) -> sa.Engine:
    """An engine on the ledger at ``url``, its schema brought to :data:`HEAD` (:func:`upgrade`).

    Raises :class:`LedgerError`, naming the ledger, when it cannot be reached or upgraded.
    """
    engine = open_engine(url)
    try:
        upgrade(engine, clock)
    except sa.exc.SQLAlchemyError as error:
        engine.dispose()
        raise LedgerError(
            f"cannot open the ledger {_shown(engine)}: {getattr(error, 'orig', None) or error}"
        ) from error
    except BaseException:
        engine.dispose()
        raise
    return engine


def upgrade(engine: sa.Engine, clock: Callable[[], float] = time.time) -> str | None:
    """Bring the ledger to :data:`HEAD`; returns the revision it was at (None: a new ledger).

    Raises :class:`LedgerError` when the ledger is newer than this sluice,
    or when a daemon of the older schema is still live on it.
    """
    with engine.connect() as conn:
        found = revision(conn)
    if found == HEAD:
        return found
    _check_known(engine, found)
    with _upgrade_lock(engine) as conn:
        found = revision(conn)  # another upgrader may have finished while we waited
        if found == HEAD:
            return found
        if found is not None:
            _refuse_if_live(conn, engine, found, clock())
        _run_migrations(conn)
    return found


def _check_known(engine: sa.Engine, found: str | None) -> None:
    if found is not None and found not in REVISIONS:
        raise LedgerError(
            f"the ledger {_shown(engine)} is at schema {found}, newer than this sluice "
            f"knows (up to {HEAD}): a later sluice upgraded it; run that version"
        )


@contextmanager
def _upgrade_lock(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection in a transaction that holds the ledger's upgrade lock."""
    with engine.connect() as conn:
        # A SQLite ledger's write lock, taken by BEGIN IMMEDIATE, is its upgraders' lock
        # (the option is read by nothing else); a server's is the engine's own.
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin(), dialect_traits(engine.dialect).held_lock(conn, _LOCK_NUMBER,
                                                                     _LOCK_NAME):  # fmt: skip
            yield conn


def _refuse_if_live(conn: sa.Connection, engine: sa.Engine, found: str, now: float) -> None:
    """Raise when a daemon that runs schema ``found`` (older than HEAD) is live on the ledger."""
    if not sa.inspect(conn).has_table("sluice_owners"):
        return
    host = socket.gethostname()
    rows = conn.execute(
        sa.text("SELECT owner, host, pid, heartbeat_at FROM sluice_owners "
                "WHERE heartbeat_at >= :since ORDER BY owner"),
        {"since": now - DEAD_AFTER},
    ).all()  # fmt: skip
    # Every daemon live on a ledger of an older schema runs that schema: one
    # of this schema would have upgraded the ledger before registering.
    live = [row for row in rows if row.host != host or pid_alive(row.pid)]
    if live:
        shown = ", ".join(f"{row.owner} (heartbeat {now - row.heartbeat_at:.0f} s ago)"
                          for row in live)  # fmt: skip
        raise LedgerError(
            f"the ledger {_shown(engine)} is at schema {found} and this sluice needs "
            f"{HEAD}; it upgrades the ledger once no daemon of the older sluice runs on it, "
            f"but these do: {shown}. Stop them (they drain and exit), then start again"
        )


def _run_migrations(conn: sa.Connection) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    command.upgrade(config, HEAD)


def _shown(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
