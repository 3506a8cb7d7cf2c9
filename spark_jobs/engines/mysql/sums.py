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


def table_sums(url: str, query: str) -> Sums:
    """Run a sums query on the database at ``url``, on a connection of its own, closed after.

    Errors come as SQLAlchemy's, as a statement's would.
    """
    from spark_jobs.jdbc import looker_engine

    with looker_engine(url).connect() as conn:
        conn.exec_driver_sql(SESSION)
        # The driver's own cursor, without arguments: PyMySQL reads % as a placeholder else.
        cursor = conn.connection.cursor()
        try:
            cursor.execute(query)
            found = cursor.fetchone()
        except Exception as error:  # a driver's error, as SQLAlchemy raises a statement's
            dialect = conn.dialect
            if isinstance(error, dialect.loaded_dbapi.Error):
                raise sa.exc.DBAPIError.instance(
                    query, None, error, dialect.loaded_dbapi.Error
                ) from error
            raise
        finally:
            cursor.close()
    assert found is not None  # an aggregate without GROUP BY gives one row
    return Sums(*(int(v) for v in found))
