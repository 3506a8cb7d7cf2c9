"""The databases' bulk paths for a batch's rows: which one a target has, and whether a
batch may go straight into its table.

PostgreSQL's binary COPY through psycopg (:mod:`spark_jobs.engines.postgresql.copyin`),
MySQL's and MariaDB's ``LOAD DATA LOCAL INFILE`` through PyMySQL
(:mod:`spark_jobs.engines.mysql.load_data`); Spark's JDBC writer where neither is.
"""

from __future__ import annotations

import sqlalchemy as sa

from config.models import JdbcTargetConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import dialect_traits
from spark_jobs.engines.bulk import BulkLoad
from spark_jobs.load.target import TargetTable

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
    bulk = dialect_traits(engine.dialect).bulk_load(engine)
    return None if bulk is None or str(engine.url) in unavailable else bulk


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
