"""Write one batch into PostgreSQL, MySQL or MariaDB in bulk: direct, or staged then upserted.

The batch's rows go in through the database's bulk path (:class:`BulkLoad`):
PostgreSQL's binary COPY through psycopg (:mod:`spark_jobs.engines.postgresql.binarycopy`), or
``LOAD DATA LOCAL INFILE`` through PyMySQL (:mod:`spark_jobs.engines.mysql.load_data`),
in one of two shapes, both keeping the invariant of
:mod:`spark_jobs.load.commit_jdbc`: the rows and the batch's commit record reach
the target in one transaction, fenced by the batch's token.

- *direct*: one Spark task reads the batch and streams its rows straight
  into the target inside the commit transaction. Only where no row of the
  batch can be in the table yet: a keyset range (its keys are this batch's
  alone) of a source without a cursor, and no row of the table in that key
  range when the transaction looks. Anything else there (a re-run, another
  writer) makes the load fail on a duplicate key; the transaction is rolled
  back and the batch staged.
- *staged*: the rows come to the driver as Arrow (one Spark job: the read),
  are loaded into a staging table of the attempt's own, then
  :func:`~spark_jobs.load.commit_jdbc.commit_staged` upserts them, with the
  rejects path (rows the table refuses or would change are set aside).

A row the table refuses during a direct load (too long, a constraint) sends
the batch to the staged path too, never straight to the rejects.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from pyspark.sql import DataFrame

from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.mysql.load_data import LoadRefusedRows, LoadUnavailable
from spark_jobs.engines.transforms import count_zeros
from spark_jobs.load.bulk_paths import BulkLoad, bulk_load, mark_unavailable, may_copy_straight_in
from spark_jobs.load.commit_jdbc import commit_staged
from spark_jobs.load.jdbc_tables import ROW_COLUMN, TargetFit
from spark_jobs.load.staging import drop_staging, staging_table
from spark_jobs.load.target import TargetTable, Written
from spark_jobs.load.write_direct import direct_in_task

log = logging.getLogger(__name__)


def write_bulk(
    df: DataFrame,
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    columns: Sequence[sa.Column],
    fit: TargetFit,
) -> Written | None:
    """Import the batch by the database's bulk path; None when its values cannot all go that way.

    A batch that may go straight in is loaded by one Spark task (see
    :func:`~spark_jobs.load.write_direct.direct_in_task`); when it may not, or the task
    finds its range taken or a row refused, the batch is staged. The staging table has the
    batch's own column types, which the encoders always write; None comes
    from a value one cannot write exactly (a decimal of more than 18 digits
    for COPY, a NaN for MySQL), before anything is committed, or from a
    MySQL server that refuses ``LOAD DATA LOCAL``. The caller then writes
    the batch through Spark's JDBC writer. Raises what the commit raises
    otherwise.
    """
    bulk = bulk_load(engine)
    if bulk is None:
        return None
    names = [c.name for c in columns]
    if may_copy_straight_in(target, manifest) and not fit.narrowings:
        written = direct_in_task(df, engine, target, manifest, bulk, names)
        if written is not None:
            return written
    rows = df.toArrow()
    written = _staged(engine, target, manifest, columns, fit, rows.select(names), bulk)
    zeros = count_zeros(rows, rows.column_names)
    return written if written is None or not zeros else replace(written, zero_dates=zeros)


def _staged(
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    columns: Sequence[sa.Column],
    fit: TargetFit,
    rows: pa.Table,
    bulk: BulkLoad,
) -> Written | None:
    """Load the rows into a staging table of this attempt, then upsert them."""
    staging = staging_table(manifest, columns, engine.dialect.name)
    names = [c.name for c in columns]
    numbered = rows.append_column(ROW_COLUMN, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    try:
        with engine.begin() as conn:
            staging.create(conn)
            cursor = conn.connection.cursor()
            try:
                into = bulk.quote(staging.name)
                bulk.load(cursor, into, [*names, ROW_COLUMN], numbered.to_batches())
            except (CannotEncode, LoadRefusedRows) as error:
                # A staging table has the batch's own types: what it refuses
                # (a MySQL TEXT value over 64 KB), Spark's writer reports by name.
                if isinstance(error, LoadUnavailable):
                    mark_unavailable(engine)
                    log.warning("%s: written by Spark's JDBC writer from now on: %s",
                                target.label, error)  # fmt: skip
                else:
                    log.info("batch %s: written by Spark JDBC, not %s: %s",
                             manifest.batch_id, bulk.method, error)  # fmt: skip
                conn.rollback()
                return None
            finally:
                cursor.close()
        written = commit_staged(engine, target, staging, names, manifest, fit)
        return replace(written, method=f"staged {bulk.method}")
    finally:
        drop_staging(engine, staging)
