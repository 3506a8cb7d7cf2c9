"""Write one batch into PostgreSQL, MySQL or MariaDB in bulk: direct, or staged then upserted.

The batch's rows go in through the database's bulk path (:class:`BulkLoad`):
PostgreSQL's binary COPY through psycopg (:mod:`spark_jobs.engines.postgresql.binarycopy`), or
``LOAD DATA LOCAL INFILE`` through PyMySQL (:mod:`spark_jobs.mysqlload`),
in one of two shapes, both keeping the invariant of
:mod:`spark_jobs.commit_jdbc`: the rows and the batch's commit record reach
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
  :func:`~spark_jobs.commit_jdbc.commit_staged` upserts them, with the
  rejects path (rows the table refuses or would change are set aside).

A row the table refuses during a direct load (too long, a constraint) sends
the batch to the staged path too, never straight to the rejects.
"""

from __future__ import annotations

import json
import logging
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from pyspark import TaskContext
from pyspark.errors import PythonException
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from config.faults import crash_point
from config.models import JdbcTargetConfig
from spark_jobs.commit_jdbc import commit_direct, commit_staged
from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.postgresql.binarycopy import quoted
from spark_jobs.engines.postgresql.copyin import copy_in
from spark_jobs.engines.postgresql.verbatim import copy_verbatim, same_types
from spark_jobs.jdbc import sql_engine
from spark_jobs.jdbc_tables import ROW_COLUMN, TargetFit
from spark_jobs.manifest import Manifest
from spark_jobs.mysqlload import LoadRefusedRows, LoadUnavailable, load_capable, load_data
from spark_jobs.mysqlload import quoted as mysql_quoted
from spark_jobs.read_sql import native_queries, native_tasks
from spark_jobs.staging import drop_staging, staging_table
from spark_jobs.target import TargetTable, Written
from spark_jobs.task_input import task_input, whole
from spark_jobs.task_notes import Notes, pickled
from spark_jobs.transforms import count_zeros

log = logging.getLogger(__name__)

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

_unavailable: set[str] = set()
"""Target URLs whose server refused ``LOAD DATA LOCAL`` in this process."""


def bulk_load(engine: sa.Engine) -> BulkLoad | None:
    """The bulk path into ``engine``'s database, or None (Spark's JDBC writer then).

    PostgreSQL through psycopg 3 (whose cursors COPY); MySQL and MariaDB
    through PyMySQL, unless the server refused ``LOAD DATA LOCAL`` before.
    """
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        return PG_COPY
    if load_capable(engine) and str(engine.url) not in _unavailable:
        return MYSQL_LOAD_DATA
    return None


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
    :func:`_direct_in_task`); when it may not, or the task finds its range
    taken or a row refused, the batch is staged. The staging table has the
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
        written = _direct_in_task(df, engine, target, manifest, bulk, names)
        if written is not None:
            return written
    rows = df.toArrow()
    written = _staged(engine, target, manifest, columns, fit, rows.select(names), bulk)
    zeros = count_zeros(rows, rows.column_names)
    return written if written is None or not zeros else replace(written, zero_dates=zeros)


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


def write_straight_in(
    df: DataFrame,
    engine: sa.Engine,
    target: TargetTable,
    manifests: Sequence[Manifest],
    names: Sequence[str],
) -> list[Written | BaseException | None]:
    """Load several batches straight into the table by one Spark job, a task per batch.

    ``df`` has one partition per manifest, in the manifests' order; each
    manifest may be loaded straight in (:func:`may_copy_straight_in`). One
    job instead of one per batch saves what every Spark job costs the
    driver (~100-250 ms on two cores); each task still loads and commits
    its batch in a transaction of its own, fenced by the batch's token;
    ``names``: the columns it writes (the database computes the others). An
    outcome per batch, in order: what it wrote, the error its task raised
    (a stale token, a lost server), or None where the batch must be
    imported on its own (its range taken, a row refused, a worker that
    cannot run the load).
    """
    bulk = bulk_load(engine)
    if bulk is None:
        return [None] * len(manifests)
    return _direct_in_tasks(df, engine, target, list(manifests), bulk, names)


_OUTCOME = T.StructType(
    [
        T.StructField("batch", T.StringType()),
        T.StructField("outcome", T.StringType()),
        T.StructField("rows", T.LongType()),
        T.StructField("error", T.BinaryType()),
        T.StructField("notes", T.ArrayType(T.StringType())),
        T.StructField("seconds", T.DoubleType()),
        T.StructField("zeros", T.StringType()),
    ]
)
"""What a direct load task returns: one row. Built, not parsed from DDL: the first
parse of a batch loaded Spark's SQL parser, ~1.3 s on the first batch's path."""
_OUTCOME_ARROW = pa.schema([
    ("batch", pa.string()), ("outcome", pa.string()), ("rows", pa.int64()),
    ("error", pa.binary()), ("notes", pa.list_(pa.string())), ("seconds", pa.float64()),
    ("zeros", pa.string()),
])  # fmt: skip


def _direct_in_task(
    df: DataFrame,
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    bulk: BulkLoad,
    names: Sequence[str],
) -> Written | None:
    """Load the batch straight into the table from one Spark task; None: stage it instead.

    The task streams the rows as Spark reads them (Arrow record batches of
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) through the
    encoder into the COPY (or LOAD DATA), inside the commit transaction of
    :func:`~spark_jobs.commit_jdbc.commit_direct`, on a connection of its
    own. Neither the JVM nor this process ever holds the batch; batches
    imported side by side COPY in parallel. The COPY commits only once Spark
    has ended the task's input (:func:`_input_complete`). What the task raises comes
    back here and is raised again, with its type, so the import job tells
    a lost server from a stale token as it does for the staged path.
    """
    [outcome] = _direct_in_tasks(df, engine, target, [manifest], bulk, names, one_task=True)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _direct_in_tasks(
    df: DataFrame,
    engine: sa.Engine,
    target: TargetTable,
    manifests: list[Manifest],
    bulk: BulkLoad,
    names: Sequence[str],
    one_task: bool = False,
) -> list[Written | BaseException | None]:
    """The direct load of ``df``'s partition i as ``manifests[i]``'s batch, for every i
    (``one_task``: of all of ``df`` as the one manifest's).

    A frame read natively (:func:`~spark_jobs.read_sql.native_queries`) is
    read by the load's own task: its rows go from the source's connection to
    the target's without passing through the JVM. A worker that cannot import
    sluice's code (psycopg missing on a cluster's executors) leaves every
    batch to the staged path, on the driver.
    """
    url = engine.url.render_as_string(hide_password=False)
    names = list(names)
    queries = native_queries(df)
    if queries is not None:
        tasks = native_tasks(df, 1 if one_task else None)
    else:
        tasks = df.coalesce(1) if one_task else df
    verbatim = bulk is PG_COPY and same_types(engine, target, queries, names)

    def copy_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.monotonic()  # the batch's own load: not its wait for a core
        manifest = manifests[TaskContext.get().partitionId()]  # type: ignore[union-attr]
        outcome = _copy_in_task(url, target, manifest, names, batches, bulk, queries, verbatim)
        seconds = time.monotonic() - started
        yield pa.RecordBatch.from_pylist([{"batch": manifest.batch_id, "zeros": "", **outcome,
                                           "seconds": seconds}], schema=_OUTCOME_ARROW)

    try:
        rows = tasks.mapInArrow(copy_partition, _OUTCOME).collect()
    except PythonException as error:
        # ModuleNotFoundError, or an ImportError of a package built for another platform.
        if "ImportError" not in str(error) and "ModuleNotFoundError" not in str(error):
            raise
        log.warning("batches %s: staged on the driver: a Spark worker cannot run the load (%s)",
                    ", ".join(m.batch_id for m in manifests),
                    str(error).strip().splitlines()[-1])  # fmt: skip
        return [None] * len(manifests)
    by_batch = {row.batch: row for row in rows}
    method = "copy as stored" if verbatim else bulk.method
    if len(manifests) > 1:
        method += f", one Spark job for {len(manifests)} batches"
    outcomes: list[Written | BaseException | None] = []
    for manifest in manifests:
        row = by_batch.get(manifest.batch_id)
        for note in (row.notes if row is not None else None) or ():
            log.info("batch %s: %s", manifest.batch_id, note)
        if row is None or row.outcome not in ("copy", "error"):
            outcomes.append(None)
        elif row.outcome == "error":
            outcomes.append(pickle.loads(row.error))
        else:
            crash_point("after_target_commit")
            zeros = json.loads(row.zeros) if row.zeros else {}
            outcomes.append(Written(row.rows, 0, method, row.seconds, zeros))
    return outcomes


def _copy_in_task(
    url: str,
    target: TargetTable,
    manifest: Manifest,
    names: list[str],
    batches: Iterator[pa.RecordBatch],
    bulk: BulkLoad,
    queries: Any = None,
    verbatim: bool = False,
) -> dict[str, Any]:
    """In the Spark task: the direct load and its commit; the outcome as one row.

    ``queries``: the native read whose task numbers ``batches`` holds (None:
    ``batches`` are the rows). ``verbatim``: the target's columns have the
    source's very types (:func:`~spark_jobs.engines.postgresql.verbatim.same_types`):
    the source's binary COPY goes into the target's as it comes, never parsed.
    """
    infile = task_input()
    if infile is None:  # a PySpark whose worker this module does not know
        for _ in batches:
            pass
        note = "staged, not copied straight in: this PySpark's worker does not show its input"
        return {"outcome": "staged", "rows": 0, "error": b"", "notes": [note]}
    notes = Notes()
    logger = logging.getLogger("spark_jobs")
    level = logger.level
    logger.setLevel(logging.INFO)  # a worker's loggers are not configured: WARNING and up
    logger.addHandler(notes)
    table_sql = bulk.quote(*[p for p in (target.schema, target.table) if p], sep=".")
    # The worker process is reused from task to task: so is its pooled
    # connection (a new one per batch cost ~60 ms).
    engine = sql_engine(url)

    zeros: dict[str, int] = {}

    def projected(rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in rows:
            for column, count in count_zeros(batch, batch.schema.names).items():
                zeros[column] = zeros.get(column, 0) + count
            yield batch.select(names)

    def load(cursor: Any) -> int:
        rows = whole(batches, infile)
        if verbatim:
            return copy_verbatim(cursor, table_sql, names, queries, rows)
        if queries is not None:
            rows = queries.rows(rows)
        return bulk.load(cursor, table_sql, names, projected(rows))

    try:
        written = commit_direct(engine, target, manifest, load, crash=False)
    except CannotEncode as error:
        notes.notes.append(f"staged, not copied straight in: {error}")
        written = None
    except Exception as error:  # noqa: BLE001 - raised again on the driver, with its type
        return {"outcome": "error", "rows": 0, "error": pickled(error), "notes": notes.notes}
    finally:
        logger.removeHandler(notes)
        logger.setLevel(level)
    if written is None:
        return {"outcome": "staged", "rows": 0, "error": b"", "notes": notes.notes}
    return {"outcome": "copy", "rows": written.rows, "error": b"", "notes": notes.notes,
            "zeros": json.dumps(zeros)}


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
                    _unavailable.add(str(engine.url))
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
