"""The databases' bulk paths for a batch's rows: which one a target has, and whether a
batch may go straight into its table.

PostgreSQL's binary COPY through psycopg (:mod:`spark_jobs.engines.postgresql.copyin`),
MySQL's and MariaDB's ``LOAD DATA LOCAL INFILE`` through PyMySQL
(:mod:`spark_jobs.engines.mysql.load_data`); Spark's JDBC writer where neither is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from config.models import JdbcTargetConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.mysql.load_data import load_capable, load_data
from spark_jobs.engines.mysql.load_data import quoted as mysql_quoted
from spark_jobs.engines.postgresql.binarycopy import quoted
from spark_jobs.engines.postgresql.copyin import copy_in
from spark_jobs.load.target import TargetTable

Load = Callable[[Any, str, Sequence[str], Iterable[pa.RecordBatch]], int]


@dataclass(frozen=True)
class BulkLoad:
    """How one kind of database takes a batch's rows in bulk.

    ``load(cursor, table_sql, names, batches)`` writes the rows of
    ``batches`` (Arrow, columns ``names``) into the quoted ``table_sql`` on
    the DBAPI ``cursor``, in the caller's transaction, and returns how many.
    It raises :class:`~spark_jobs.engines.postgresql.binarycopy.CannotEncode` for values it cannot
    write exactly (before committing anything) and
    :class:`sqlalchemy.exc.DBAPIError` as the database refuses.
    """

    method: str
    quote: Callable[..., str]
    load: Load


PG_COPY = BulkLoad("copy", quoted, copy_in)
MYSQL_LOAD_DATA = BulkLoad("load data", mysql_quoted, load_data)

unavailable: set[str] = set()
"""Target URLs whose server refused ``LOAD DATA LOCAL`` in this process."""


def mark_unavailable(engine: sa.Engine) -> None:
    """``engine``'s server refused ``LOAD DATA LOCAL``: Spark's JDBC writer from now on."""
    unavailable.add(str(engine.url))


def bulk_load(engine: sa.Engine) -> BulkLoad | None:
    """The bulk path into ``engine``'s database, or None (Spark's JDBC writer then).

    PostgreSQL through psycopg 3 (whose cursors COPY); MySQL and MariaDB
    through PyMySQL, unless the server refused ``LOAD DATA LOCAL`` before.
    """
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        return PG_COPY
    if load_capable(engine) and str(engine.url) not in unavailable:
        return MYSQL_LOAD_DATA
    return None


def may_copy_straight_in(target: TargetTable, manifest: Manifest) -> bool:
    """Whether the batch may be loaded straight into its table, as far as is known before
    its rows are read: a keyset range, of a source without a cursor, into a database
    with a bulk path. (Values the table would change still send it to the staged path.)"""
    cfg = target.config
    return (
        manifest.kind == "range"
        and target.cursor is None
        and isinstance(cfg, JdbcTargetConfig)
        and bulk_load(sql_engine(cfg.url)) is not None
    )
