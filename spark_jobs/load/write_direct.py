"""Load batches straight into their tables from Spark tasks, each in its commit transaction.

The *direct* shape of :mod:`spark_jobs.load.write_bulk`: a Spark task reads a
batch (a keyset range no row of which can be in the table yet) and streams
its rows through the target's bulk path (:mod:`spark_jobs.load.bulk_paths`)
inside the transaction that records its commit, fenced by its token. A task
that finds the range taken, or a row the table refuses, leaves the batch to
the staged path. Several batches, of one table or of many, share one Spark
job (:func:`load_directly`): what a job costs the driver is paid once.
"""

from __future__ import annotations

import json
import logging
import pickle
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from pyspark import TaskContext
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from config.faults import crash_point
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.postgresql.copy_out import one_session
from spark_jobs.engines.postgresql.copyin import COPY as PG_COPY
from spark_jobs.engines.postgresql.verbatim import copy_verbatim, same_types
from spark_jobs.engines.transforms import count_zeros
from spark_jobs.load import late_keys
from spark_jobs.load.bulk_paths import BulkLoad, bulk_load
from spark_jobs.load.commit_jdbc import commit_direct
from spark_jobs.load.target import TargetTable, Written
from spark_jobs.read.read_sql import native_queries
from spark_jobs.tasks.local_tasks import LocalTasks, local_tasks
from spark_jobs.tasks.task_input import task_input, whole
from spark_jobs.tasks.task_notes import Notes, pickled

log = logging.getLogger(__name__)


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


def direct_in_task(
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
    :func:`~spark_jobs.load.commit_jdbc.commit_direct`, on a connection of its
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


@dataclass(frozen=True)
class DirectLoad:
    """Batches of one table that a Spark job loads straight in, each read natively by its task.

    ``reads[i]``: the numbers of the ``queries`` that read ``manifests[i]``'s rows,
    all run by one task into one load. ``verbatim``: the source's binary COPY goes
    into the target's as it comes (:func:`~spark_jobs.engines.postgresql.verbatim.same_types`).
    ``url``: the target's, password included. Picklable: it travels to the tasks.
    """

    url: str
    target: TargetTable
    manifests: tuple[Manifest, ...]
    names: tuple[str, ...]
    bulk: BulkLoad
    queries: Any
    reads: tuple[tuple[int, ...], ...]
    verbatim: bool


def direct_load(
    engine: sa.Engine,
    target: TargetTable,
    manifests: Sequence[Manifest],
    names: Sequence[str],
    queries: Any,
    reads: Sequence[Sequence[int]],
    built_in: Mapping[str, str] | None = None,
) -> DirectLoad | None:
    """The direct load of ``manifests`` into ``target`` through ``engine``'s bulk path,
    their rows read by the native ``queries`` (``reads``: see :class:`DirectLoad`;
    ``built_in``: as :attr:`~spark_jobs.load.target_fit.TargetFit.built_in` says, if known);
    None when the database has no bulk path."""
    if (bulk := bulk_load(engine)) is None:
        return None
    target = late_keys.as_fresh(engine.url, target, [m.source for m in manifests])
    verbatim = bulk is PG_COPY and same_types(
        engine, target.schema, target.table, queries, names, built_in)
    url = engine.url.render_as_string(hide_password=False)
    return DirectLoad(url, target, tuple(manifests), tuple(names), bulk, queries,
                      tuple(tuple(r) for r in reads), verbatim)  # fmt: skip


def load_directly(
    spark: SparkSession, loads: Sequence[DirectLoad], tasks: int
) -> list[list[Written | BaseException | None]]:
    """Run ``loads`` (several tables' batches) by one Spark job of at most ``tasks`` tasks.

    What a Spark job costs the driver is paid once for every batch of every
    table: a schema of many small tables is not a job per table. Each task
    takes its share of the batches and loads them one after the other, each
    in its own commit transaction, fenced by its token, on the task's one
    connection to each database: ``tasks`` bounds the connections the job
    opens to any database, on a cluster too. A task reads all of its input
    (the batches' numbers) before loading any: a task whose input was cut
    short commits nothing. An outcome per batch of each load, in order, as
    :func:`_direct_in_tasks` gives them.
    """
    numbered = [(i, j) for i, load in enumerate(loads) for j in range(len(load.manifests))]
    total = len(numbered)
    manifests = [m for load in loads for m in load.manifests]
    pool = local_tasks(spark)
    if pool is not None:
        rows = _in_local_tasks(pool, loads, numbered, max(1, min(tasks, total, pool.workers)))
        how = "local tasks"
    else:
        frame = spark.range(0, total, 1, max(1, min(tasks, total)))

        def copy_partition(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            wanted = [n for batch in numbers for n in batch.column(0).to_pylist()]
            for manifest, outcome, seconds in load_share(loads, numbered, wanted, in_spark=True):
                yield _outcome_row(manifest, outcome, seconds)

        rows = _outcome_rows(lambda: frame.mapInArrow(copy_partition, _OUTCOME).collect(),
                             manifests)  # fmt: skip
        how = "one Spark job"
    return [
        _outcomes(rows, list(load.manifests),
                  ("copy as stored" if load.verbatim else load.bulk.method)
                  + (f", {how} for {total} batches" if total > 1 else ""))
        for load in loads
    ]  # fmt: skip


def load_share(
    loads: Sequence[DirectLoad], numbered: Sequence[tuple[int, int]], wanted: Sequence[int],
    in_spark: bool = False,
) -> Iterator[tuple[Manifest, dict[str, Any], float]]:  # fmt: skip
    """In a task: the batches ``wanted`` (numbers into ``numbered``: a load's and its
    batch's), loaded one after the other; each one's outcome and seconds as it is done.
    Their small reads share a source connection, closed when the task ends."""
    with one_session():
        for n in wanted:
            started = time.monotonic()  # the batch's own load: not its wait for a core
            i, j = numbered[n]
            load = loads[i]
            manifest = load.manifests[j]
            reads = pa.record_batch([pa.array(load.reads[j], pa.int64())], names=["id"])
            outcome = _copy_in_task(load.url, load.target, manifest, list(load.names),
                                    iter([reads]), load.bulk, load.queries, load.verbatim,
                                    in_spark=in_spark)  # fmt: skip
            yield manifest, outcome, time.monotonic() - started


def _local_share(
    loads: Sequence[DirectLoad], numbered: Sequence[tuple[int, int]], wanted: Sequence[int]
) -> list[dict[str, Any]]:
    """A local task's share (:func:`load_share`): its outcome rows, as :data:`_OUTCOME`'s."""
    return [{"batch": m.batch_id, "zeros": "", **outcome, "seconds": seconds}
            for m, outcome, seconds in load_share(loads, numbered, wanted)]  # fmt: skip


def _in_local_tasks(
    pool: LocalTasks, loads: Sequence[DirectLoad], numbered: Sequence[tuple[int, int]],
    tasks: int,
) -> list[Any]:  # fmt: skip
    """The loads' outcome rows, their batches shared among ``tasks`` local tasks as
    ``spark.range`` shares them among partitions (consecutive numbers)."""
    total = len(numbered)
    shares = [list(range(k * total // tasks, (k + 1) * total // tasks)) for k in range(tasks)]
    with ThreadPoolExecutor(tasks, thread_name_prefix="sluice-local-task") as threads:
        done = threads.map(lambda share: pool.run(_local_share, loads, numbered, share), shares)
        return [SimpleNamespace(**row) for rows in done for row in rows]


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

    A frame read natively (:func:`~spark_jobs.read.read_sql.native_queries`) is
    read by the load's own task (:func:`load_directly`): its rows go from the
    source's connection to the target's without passing through the JVM. A
    worker that cannot import sluice's code (psycopg missing on a cluster's
    executors) leaves every batch to the staged path, on the driver.
    """
    names = list(names)
    queries = native_queries(df)
    if queries is not None:
        count = len(queries.queries)  # type: ignore[attr-defined]
        reads = [range(count)] if one_task else [[i] for i in range(count)]
        load = direct_load(engine, target, manifests, names, queries, reads)
        assert load is not None  # the caller found the bulk path
        [outcomes] = load_directly(df.sparkSession, [load], len(reads))
        return outcomes
    url = engine.url.render_as_string(hide_password=False)
    tasks = df.coalesce(1) if one_task else df
    target = late_keys.as_fresh(engine.url, target, [m.source for m in manifests])

    def copy_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.monotonic()  # the batch's own load: not its wait for a core
        manifest = manifests[TaskContext.get().partitionId()]  # type: ignore[union-attr]
        outcome = _copy_in_task(url, target, manifest, names, batches, bulk)
        yield _outcome_row(manifest, outcome, time.monotonic() - started)

    rows = _outcome_rows(lambda: tasks.mapInArrow(copy_partition, _OUTCOME).collect(), manifests)
    method = bulk.method + (f", one Spark job for {len(manifests)} batches"
                            if len(manifests) > 1 else "")  # fmt: skip
    return _outcomes(rows, manifests, method)


def _outcome_row(manifest: Manifest, outcome: dict[str, Any], seconds: float) -> pa.RecordBatch:
    """What a direct load task returns for one batch (:data:`_OUTCOME`)."""
    return pa.RecordBatch.from_pylist(
        [{"batch": manifest.batch_id, "zeros": "", **outcome, "seconds": seconds}],
        schema=_OUTCOME_ARROW,
    )


def _outcome_rows(collect: Callable[[], list[Any]], manifests: Sequence[Manifest]) -> list[Any]:
    """The direct load tasks' rows (``collect()``); none when a worker cannot run the load."""
    try:
        return collect()
    except PythonException as error:
        # ModuleNotFoundError, or an ImportError of a package built for another platform.
        if "ImportError" not in str(error) and "ModuleNotFoundError" not in str(error):
            raise
        log.warning("batches %s: staged on the driver: a Spark worker cannot run the load (%s)",
                    ", ".join(m.batch_id for m in manifests),
                    str(error).strip().splitlines()[-1])  # fmt: skip
        return []


def _outcomes(
    rows: list[Any], manifests: Sequence[Manifest], method: str
) -> list[Written | BaseException | None]:
    """An outcome per batch from the tasks' ``rows``: what it wrote, the error its task
    raised, or None (stage it)."""
    by_batch = {row.batch: row for row in rows}
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
    in_spark: bool = True,
) -> dict[str, Any]:
    """In the Spark task: the direct load and its commit; the outcome as one row.

    ``queries``: the native read whose task numbers ``batches`` holds (None:
    ``batches`` are the rows). ``verbatim``: the target's columns have the
    source's very types (:func:`~spark_jobs.engines.postgresql.verbatim.same_types`):
    the source's binary COPY goes into the target's as it comes, never parsed.
    ``in_spark``: False in a local task (:mod:`spark_jobs.tasks.local_tasks`), whose
    input is a list, whole by construction.
    """
    infile = task_input() if in_spark else None
    if in_spark and infile is None:  # a PySpark whose worker this module does not know
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
        rows = whole(batches, infile) if infile is not None else batches
        if verbatim:
            return copy_verbatim(cursor, table_sql, names, queries, rows, manifest.items)
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
