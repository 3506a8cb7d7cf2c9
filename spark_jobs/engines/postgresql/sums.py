"""A PostgreSQL table's rows counted and hashed by the server itself, for ``sluice verify``.

Between two PostgreSQL tables a value arrives as it was when the server
prints it the same on both sides (``col::text``, DESIGN's contract for one
engine). So each server can prove its half without sending a row: it prints
each row as one record text (``ROW(a, b, …)::text``: every column in its own
type's output, NULL apart from an empty string, quotes where they matter),
hashes it (``hashtextextended``, 64 bits) and sums the hashes; a sum does not
depend on the order rows are read in. Equal counts and sums on both sides
mean equal rows (a difference slips through with the odds of a 64-bit
collision); any other outcome says nothing about which rows differ, and the
caller compares the table row by row.

Every connection prints in the same fixed forms (:data:`.read.SESSION`) and
runs its query in its own backend only (no parallel workers): the
connections a verify may open are the connections it uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from spark_jobs.engines.postgresql.read import SESSION
from spark_jobs.engines.postgresql.sessions import libpq_keepalives

OPTIONS = f"{SESSION} -c max_parallel_workers_per_gather=0"
"""The session of a sums query: the forms values print in, one process per query."""


@dataclass(frozen=True)
class Sums:
    """Rows counted and the sum of their record texts' 64-bit hashes."""

    rows: int
    hashes: int
    lost: int = 0
    """Rows the server could not print whole (:func:`spark_jobs.engines.neutral_sql.sums_sql`)."""


def sums_sql(table_sql: str, columns: Sequence[str], where: str) -> str:
    """The query counting ``table_sql``'s rows that match ``where`` and summing the hashes of
    their ``columns`` (quoted names, in the order both sides list them)."""
    record = f"ROW({', '.join(columns)})::text"
    # sum(bigint) is exact (a numeric), summed in 128 bits by the server.
    return (f"SELECT count(*), coalesce(sum(hashtextextended({record}, 0)), 0) "
            f"FROM {table_sql} WHERE {where}")  # fmt: skip


def table_sums(info: str, query: str) -> Sums:
    """Run a :func:`sums_sql` query on ``info``, on a connection of its own, closed after.

    Errors come as SQLAlchemy's (``DBAPIError`` and its kinds), as a statement's would.
    """
    import psycopg

    try:
        with psycopg.connect(info, options=OPTIONS, autocommit=True,
                             **libpq_keepalives(info)) as conn:  # fmt: skip
            found = conn.execute(query).fetchone()
    except psycopg.Error as error:
        raise sa.exc.DBAPIError.instance(query, None, error, psycopg.Error) from error
    assert found is not None  # an aggregate without GROUP BY gives one row
    return Sums(*(int(v) for v in found))
