"""A MySQL/MariaDB table's rows counted and hashed by the server, for ``sluice verify``
(:func:`spark_jobs.engines.neutral_sql.sums_sql` writes the query).

Each query runs on a connection of its own in a session of fixed forms:
timestamps printed in UTC (PostgreSQL's side prints them so), text as
UTF-8. Its literals hold no backslash, so any ``sql_mode`` reads them alike.
"""

from __future__ import annotations

import sqlalchemy as sa

from spark_jobs.engines.postgresql.sums import Sums

SESSION = "SET time_zone = '+00:00', NAMES utf8mb4"
"""The session of a sums query: the forms values print in (its ``sql_mode`` is the server's,
as a Spark read's: the source's ``where:`` means the same)."""


def table_sums(engine: sa.Engine, query: str) -> Sums:
    """Run a sums query on a connection of ``engine``'s of its own, closed after.

    Errors come as SQLAlchemy's, as a statement's would.
    """
    with engine.connect() as conn:
        conn.exec_driver_sql(SESSION)
        # PyMySQL reads % as a placeholder: %% is one, as the query means it.
        found = conn.exec_driver_sql(query.replace("%", "%%")).one()
    return Sums(*(int(v) for v in found))
