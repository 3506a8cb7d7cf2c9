"""What the rooms above the data plane ask of an engine: how sluice's own sessions on a
database of it are opened and bounded (every connection, a read-only look, a probe), how
the ledger kept in it is locked and its lost commits settled, how a source's key queries
estimate and compare, and how its change stream is shown.

Each is an attribute or a method with the answer of a database sluice has no engine for
(the defaults), which an engine's class overrides where it differs
(:mod:`.postgresql.sessions`, :mod:`.mysql.sessions`, :mod:`.sqlite`), so that no module
outside the engines wing asks for an engine by its name (``tests/test_engine_names.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement


def one_connection(url: sa.URL) -> sa.Engine:
    """An engine on ``url`` of one connection, pinged before use (a look: ``plan``,
    ``status``, ``verify``)."""
    return sa.create_engine(url, pool_size=1, max_overflow=0, pool_pre_ping=True)


class Sessions:
    """An engine's answers to the questions of sluice's own sessions (see the module)."""

    label: str

    # -- its connections (spark_jobs/engines/connections.py, scheduler/) ---------------------

    def connect_params(self, dialect: Any, params: dict[str, Any]) -> None:
        """Add to ``params`` (the keywords a new DB-API connection of SQLAlchemy ``dialect``
        is opened with, its URL's own among them, which stay) what every connection of
        sluice's takes beyond its URL; nothing by default."""
        return None

    def bound_waits(
        self, engine: sa.Engine, lock_wait: float, query_timeout: Callable[[], float | None]
    ) -> None:
        """Make each connection SQLAlchemy ``engine`` opens wait ``lock_wait`` s at most for
        a lock another session holds, and run no statement past ``query_timeout()``
        seconds (None: no bound), unless its URL sets its own; nothing where the engine has
        no such settings."""
        return None

    def readonly_engine(self, url: sa.URL) -> sa.Engine | None:
        """An engine on ``url`` that only looks (``plan``, ``status``, ``verify``): one
        connection, pinged before use; None where looking would make the database."""
        return one_connection(url)

    def timed_connect_args(self, seconds: int) -> dict[str, object]:
        """What a connection that gives up after ``seconds`` (to open, and per statement,
        where its driver can bound them) connects with; nothing by default."""
        return {}

    # -- the ledger kept in it (scheduler/ledger/) --------------------------------------------

    @contextmanager
    def held_lock(self, conn: sa.Connection, number: int, name: str) -> Iterator[None]:
        """On ``conn``'s transaction: hold the lock every session asking for it waits for
        (``number`` where the engine's locks are numbers, ``name`` where they are named)
        until the body ends. Nothing by default: a database that takes one writer at a
        time holds it for the transaction already."""
        yield

    def transaction_session(self, conn: sa.Connection) -> tuple[int, int] | None:
        """What identifies ``conn``'s transaction, asked before its ``COMMIT``, so that
        :meth:`commit_outcome` may tell whether a commit whose answer was lost went
        through; None where the server cannot be asked."""
        return None

    def commit_outcome(
        self, conn: sa.Connection, session: tuple[int, int], pause: Callable[[float], None]
    ) -> str | None:
        """Whether the transaction :meth:`transaction_session` said ``session`` committed:
        ``committed``, ``aborted`` or None (unknown), asked on the autocommit ``conn``
        (``pause(seconds)`` between two asks)."""
        raise NotImplementedError(f"{self.label} cannot say whether a transaction committed")

    # -- a source's key queries (sources/keyqueries.py, scheduler/observe/record_keys.py) -----

    plans_key_ranges = False
    """Whether the server's planner estimates a key range's rows from its statistics
    (PostgreSQL's histogram), which :meth:`planned_rows` asks."""

    def planned_rows(
        self, conn: sa.Connection, query: sa.Select[Any], table_sql: str
    ) -> int | None:
        """The rows the planner expects ``query`` (of the quoted ``table_sql``) to return;
        None for a table it has no statistics of."""
        raise NotImplementedError(f"{self.label} plans no key ranges for sluice")

    def counted_rows_query(self, dialect: Any, table: sa.TableClause) -> sa.Select[Any] | None:
        """The query of the rows the server's statistics count in ``table`` (of the
        connection's database when it names no schema), which a range's estimate takes a
        single integer key's share of where the planner's estimate says nothing (MySQL's
        is half the table whatever the range); None where there is none (SQLAlchemy's
        ``dialect`` the source is read with)."""
        return None

    def row_width_sql(self, table_sql: str, sample: int) -> str | None:
        """SQL the server measures the average width of ``sample`` rows of ``table_sql`` by,
        as text, in bytes; None where the rows are measured as they come."""
        return None

    def bound_text(self, value: str, collation: str | None) -> ColumnElement[Any]:
        """``value`` bound as text that compares as a key column of ``collation`` does."""
        return sa.cast(sa.literal(value), sa.Text)

    def key_collations(
        self, conn: sa.Connection, table: str, schema: str | None, names: Sequence[str],
        found: dict[str, Any],
    ) -> dict[str, str]:  # fmt: skip
        """The collation each of the text key columns ``names`` of ``table`` sorts by, where
        a bound value's would differ (``found``: SQLAlchemy's reflected columns by name)."""
        # A column's own collation; without one, the database's default applies to the
        # column and to a bound value alike.
        return {n: c for n in names if (c := getattr(found[n], "collation", None))}

    # -- its change stream (sources/stream*.py, scheduler/observe/, sluice status) ------------

    reads_change_streams = False
    """Whether a ``mode: stream`` source of it is read from its change stream."""

    stream_slots = False
    """Whether its change stream is read through a replication slot and a publication on
    the source's server (PostgreSQL's), which sluice names, shows and keeps apart."""

    rereads_changes = False
    """Whether its change stream can be read again from an earlier position by anyone (a
    slot's changes are gone once confirmed): a verify of a live stream lists the rows
    changed since it read (:mod:`scheduler.verify_marks`)."""

    def stream_position_text(self, position: Sequence[Any]) -> str:
        """A claimed stream position (``[where, event]``) as the operator reads it."""
        raise NotImplementedError(f"{self.label} has no change stream of sluice's")
