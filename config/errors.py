"""The one exception root of sluice and its families.

Each subclass also inherits the matching builtin so callers that only know
Python's exceptions still catch them. ``transient`` says whether retrying with
backoff can help (a dead database) or not (a bad column).
"""

from __future__ import annotations

import sqlalchemy as sa


class SluiceError(Exception):
    """Root of every error sluice raises on purpose.

    ``permanent``: no retry can ever help (a column type the target cannot hold):
    a batch that fails so is dead at its first attempt, not retried with backoff.
    """

    transient: bool = False
    permanent: bool = False
    exit_code: int = 1


class ConfigError(SluiceError, ValueError):
    """The configuration is wrong; the message names file, line, key and fix."""

    exit_code = 2


class SourceError(SluiceError, RuntimeError):
    """A source could not be read; usually transient (network, restart)."""

    transient = True


class TargetError(SluiceError, RuntimeError):
    """A target refused a write; terminal unless the cause is fixed."""


class SinkUnavailable(SluiceError, RuntimeError):
    """The sink cannot run any import (Spark's JVM did not start): the daemon stops,
    rather than fail every batch it has into backoff and then into the dead."""


class LedgerError(SluiceError, RuntimeError):
    """The ledger could not record a state change."""


class ClaimConflict(LedgerError):
    """A compare-and-set lost: another writer changed the row first."""

    transient = True


class FingerprintMismatch(ConfigError):
    """A source's definition changed since the ledger recorded its progress."""


# SQL errors of the query itself: the database will answer the same way on
# every retry (a dropped column, a ``where:`` that divides by zero on some row).
_QUERY_ERRORS = (
    sa.exc.DataError, sa.exc.ProgrammingError, sa.exc.IntegrityError, sa.exc.NotSupportedError,
)
# Some drivers file errors of the query under OperationalError, the class they
# also use for lost connections, deadlocks and lock timeouts; their codes tell.
_MYSQL_QUERY_ERRNOS = frozenset({1054, 1365})  # PyMySQL: unknown column, division by zero
_SQLITE_ERROR = 1  # sqlite3's SQLITE_ERROR: no such table or column, syntax (not BUSY, LOCKED)


def waits_for_other_rows(exc: sa.exc.DBAPIError) -> bool:
    """Whether a write was refused for another row of the table, not for its own values: a
    foreign key's parent row that is not there yet (PostgreSQL's 23503, MySQL's 1452), or a
    unique value another row holds (23505; an upsert settles its key's own conflicts, so
    this is a secondary unique index). While that row's batch may still be importing (a
    table's later passes are not ordered by its keys or values), it is a retry, not a
    reject."""
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in ("23503", "23505"):
        return True
    args: tuple[object, ...] = tuple(getattr(orig, "args", ()) or ())
    return isinstance(exc, sa.exc.IntegrityError) and bool(args) and args[0] == 1452


def is_transient(exc: sa.exc.DBAPIError) -> bool:
    """Whether retrying a database error later may succeed: the one rule for sources and jobs.

    Transient: the connection was lost or refused, a timeout, a deadlock, a
    serialization failure, a server shutting down (``OperationalError``,
    ``InterfaceError``, an invalidated connection) and anything not known to be
    the query's own fault. Not transient: the database refused the query or a
    row itself (``DataError``, ``IntegrityError``, ``ProgrammingError``…, or a
    driver's code for such an error under ``OperationalError``), which it will
    do again on every retry.
    """
    if exc.connection_invalidated:
        return True
    if isinstance(exc, _QUERY_ERRORS):
        return False
    if not isinstance(exc, sa.exc.OperationalError):
        return True
    orig = exc.orig
    if getattr(orig, "sqlite_errorcode", None) == _SQLITE_ERROR:
        return False
    errno = orig.args[0] if orig is not None and orig.args else None
    return errno not in _MYSQL_QUERY_ERRNOS


def write_is_transient(exc: sa.exc.DBAPIError) -> bool:
    """Whether retrying a batch's write into a target may succeed: :func:`is_transient`, and
    a row refused for another row's sake (:func:`waits_for_other_rows`), which may be in a
    batch still importing. Only for target writes: the ledger's own unique keys are how
    two daemons find out they raced, never something to wait out."""
    return waits_for_other_rows(exc) or is_transient(exc)


# Connection failures every retry meets again: what the config names is wrong (a password,
# a user, a database, a host name), not where it is. PostgreSQL's come without a SQLSTATE.
_CONFIG_REFUSALS = (
    "password authentication failed", "does not exist", "no pg_hba.conf entry",
    "failed to resolve host", "could not translate host name", "name or service not known",
    "nodename nor servname", "unknown mysql server host",
)  # fmt: skip
_MYSQL_CONFIG_ERRNOS = frozenset({1044, 1045, 1049, 1698, 2005})  # denied, unknown db or host


def cause_line(error: BaseException) -> str:
    """The first line of what the driver said (a database error's ``orig``), or of
    ``error`` itself; its repr when it says nothing."""
    cause = getattr(error, "orig", None) or error
    text = str(cause).strip()
    return text.splitlines()[0] if text else repr(cause)


def refused_by_config(exc: BaseException) -> bool:
    """Whether a failed connection names something that is not there or not allowed: a
    wrong password or user, a database that does not exist, a host name that does not
    resolve. A server that is down, refuses connections or does not answer is not."""
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ()) or ()
    if args and args[0] in _MYSQL_CONFIG_ERRNOS:
        return True
    text = str(orig).lower()
    return any(refusal in text for refusal in _CONFIG_REFUSALS)
