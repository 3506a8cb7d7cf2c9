"""Write one batch into a PostgreSQL table by binary COPY: direct, or staged then upserted.

The batch's rows come to the driver as Arrow (one Spark job: the read) and
go to PostgreSQL as binary COPY (:mod:`spark_jobs.pgcopy`), in one of two
shapes, both keeping the invariant of :mod:`spark_jobs.commit_jdbc`: the
rows and the batch's commit record reach the target in one transaction,
fenced by the batch's token.

- *direct*: the rows are COPYed straight into the target inside the commit
  transaction. Only where no row of the batch can be in the table yet: a
  keyset range (its keys are this batch's alone) of a source without a
  cursor, and no row of the table in that key range when the transaction
  looks. Anything else there (a re-run, another writer) makes the COPY fail
  on a duplicate key; the transaction is rolled back and the batch staged.
- *staged*: the rows are COPYed into a staging table of the attempt's own,
  then :func:`~spark_jobs.commit_jdbc.commit_staged` upserts them, with the
  rejects path (rows the table refuses or would change are set aside).

A row the table refuses during a direct COPY (too long, a constraint) sends
the batch to the staged path too, never straight to the rejects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import sqlalchemy as sa
from pyspark.sql import DataFrame

from spark_jobs.commit_jdbc import commit_direct, commit_staged
from spark_jobs.jdbc_tables import ROW_COLUMN, TargetFit, drop_staging, staging_table
from spark_jobs.manifest import Manifest
from spark_jobs.pgcopy import HEADER, TRAILER, BinaryCopyEncoder, CannotEncode, table_columns
from spark_jobs.target import TargetTable, Written

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
"""Bytes handed to the connection per write: large enough to amortise each call."""


def copy_capable(engine: sa.Engine) -> bool:
    """Whether ``engine`` talks to PostgreSQL through psycopg 3 (whose cursors COPY)."""
    return engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"


def write_pg_copy(
    df: DataFrame,
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    columns: Sequence[sa.Column],
    fit: TargetFit,
) -> Written | None:
    """Import the batch by binary COPY; None when its values cannot all go that way.

    The staging table has the batch's own column types, which the encoder
    always writes; None comes from a value it cannot write exactly (a decimal
    of more than 18 digits), before anything is committed. The caller then
    writes the batch through Spark's JDBC writer. Raises what the commit
    raises otherwise.
    """
    names = list(df.columns)
    started = time.perf_counter()
    rows = df.toArrow()  # the Spark job: the batch's rows, read from the source
    read = time.perf_counter()
    direct = _direct_encoder(engine, target, manifest, rows.schema, names, fit)
    if direct is not None:
        try:
            payload = direct.encode(rows)
        except CannotEncode as error:
            log.info("batch %s: staged, not copied straight in: %s", manifest.batch_id, error)
        else:
            encoded = time.perf_counter()
            written = commit_direct(
                engine, target, manifest, lambda cursor: _copy(cursor, _table_sql(target), names,
                                                               payload, rows.num_rows),
            )  # fmt: skip
            if written is not None:
                log.debug("batch %s: read %.2f s, encoded %.2f s, copied %.2f s (%d bytes)",
                          manifest.batch_id, read - started, encoded - read,
                          time.perf_counter() - encoded, payload.size)  # fmt: skip
                return written
    return _staged(engine, target, manifest, columns, fit, rows)


def _direct_encoder(
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    schema: pa.Schema,
    names: list[str],
    fit: TargetFit,
) -> BinaryCopyEncoder | None:
    """The encoder for a direct COPY into the target, or None when the batch must be staged."""
    if manifest.kind != "range" or target.cursor is not None or fit.narrowings:
        return None  # keys of other batches may be there, or rows must be checked first
    with engine.connect() as conn:
        cursor = conn.connection.cursor()
        try:
            columns = table_columns(cursor, _table_sql(target), names)
        finally:
            cursor.close()
    try:
        return BinaryCopyEncoder(schema, columns)
    except CannotEncode as error:
        log.info("batch %s: staged, not copied straight in: %s", manifest.batch_id, error)
        return None


def _staged(
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    columns: Sequence[sa.Column],
    fit: TargetFit,
    rows: pa.Table,
) -> Written | None:
    """COPY the rows into a staging table of this attempt, then upsert them."""
    staging = staging_table(manifest, columns, engine.dialect.name)
    names = [c.name for c in columns]
    numbered = rows.append_column(ROW_COLUMN, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    try:
        with engine.begin() as conn:
            staging.create(conn)
            cursor = conn.connection.cursor()
            try:
                table_sql = '"' + staging.name + '"'
                encoder = BinaryCopyEncoder(
                    numbered.schema, table_columns(cursor, table_sql, [*names, ROW_COLUMN])
                )
                payload = encoder.encode(numbered)
                _copy(cursor, table_sql, [*names, ROW_COLUMN], payload, rows.num_rows)
            except CannotEncode as error:
                log.info("batch %s: written by Spark JDBC, not COPY: %s", manifest.batch_id, error)
                return None
            finally:
                cursor.close()
        written = commit_staged(engine, target, staging, names, manifest, fit)
        return replace(written, method="staged copy")
    finally:
        drop_staging(engine, staging)


def _copy(cursor: Any, table_sql: str, names: Sequence[str], payload: pa.Buffer, rows: int) -> int:
    """COPY the encoded rows into ``table_sql``; return how many the server took."""
    quoted = ", ".join('"' + name.replace('"', '""') + '"' for name in names)
    statement = f"COPY {table_sql} ({quoted}) FROM STDIN (FORMAT binary)"
    view = memoryview(payload)
    try:
        with cursor.copy(statement) as copy:
            copy.write(HEADER)
            for start in range(0, len(view), _CHUNK):
                copy.write(view[start : start + _CHUNK])
            copy.write(TRAILER)
    except psycopg.Error as error:
        # As SQLAlchemy reports the same error from a statement: the commit
        # tells a refused row (IntegrityError, DataError) from a lost server.
        raise sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error) from error
    return rows if cursor.rowcount is None or cursor.rowcount < 0 else int(cursor.rowcount)


def _table_sql(target: TargetTable) -> str:
    parts = [p for p in (target.schema, target.table) if p]
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)
