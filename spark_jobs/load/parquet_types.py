"""A Parquet table's established column types, and batches made to agree with them.

A Parquet table is a folder of files that each carry their own schema, and
Spark's reader takes the table's schema from one of them: a column that is
``bigint`` in one batch's file and ``string`` in the next leaves a table that
``spark.read.parquet`` cannot read. SQS batches are where this happens (a
field's JSON type is whatever the message had), and a SQL source whose
column changed type does it too.

So each batch is written in the types the table's files already have
(:func:`fit_to_table`): a column of another type is cast to the table's; a
value that does not fit (``"abc"`` or ``1.5`` for a ``bigint``: a value
fits when it casts there and back unchanged) sets its row aside as a reject naming the column, in
``{table}/_sluice_rejects/<batch>.json`` (JSON lines, the fields of the
JDBC targets' ``_sluice_rejects``; its ``_`` keeps readers out). An all-null
(void) column takes the table's type, or text in a table that has no such
column yet. Columns the table does not have yet are written as they come,
and their types are the table's from then on.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

import pyspark.sql.functions as F
from cachetools import TTLCache
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as T

from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import source_column
from spark_jobs.engines.parquet import parquet_type
from spark_jobs.engines.spark_names import quoted
from spark_jobs.load.filesystems import HadoopFs, LocalFs, basename
from spark_jobs.load.target import REJECTS_TABLE, TargetTable
from spark_jobs.read.jdbc_read import SCHEMA_TTL

MISFIT = "_sluice_misfit"
"""A column of the checked batch: the reason its row does not fit, or null."""

_established: TTLCache[str, dict[str, T.DataType]] = TTLCache(maxsize=256, ttl=SCHEMA_TTL)
_established_lock = threading.Lock()


def established_types(
    spark: SparkSession, fs: LocalFs | HadoopFs, table_dir: str, listing: list[str]
) -> dict[str, T.DataType]:
    """The table's column types, from one published file's footer; empty for a new table.

    One file is what Spark's reader takes a table's schema from too.
    Remembered per table for :data:`~spark_jobs.read.jdbc_read.SCHEMA_TTL`
    seconds: reading a footer through Spark is a job of its own.
    """
    with _established_lock:
        known = _established.get(table_dir)
    if known is not None:
        return known
    sample = _published_file(fs, listing)
    known = {}
    if sample is not None:
        try:
            known = {f.name: f.dataType for f in spark.read.parquet(sample).schema.fields}
        except AnalysisException:
            known = {}  # deleted by a re-run in between: no file to follow
    with _established_lock:
        _established[table_dir] = known
    return known


def remember_types(table_dir: str, written: T.StructType) -> None:
    """Add the columns a batch wrote that the table did not have to its known types."""
    with _established_lock:
        known = dict(_established.get(table_dir) or {})
        for field in written.fields:
            known.setdefault(field.name, field.dataType)
        _established[table_dir] = known


def forget_types(table_dir: str) -> None:
    """Read the table's types again next time (a batch failed: the table may have changed)."""
    with _established_lock:
        _established.pop(table_dir, None)


def fit_to_table(
    df: DataFrame, known: dict[str, T.DataType], partition_by: list[str]
) -> tuple[DataFrame, DataFrame | None]:
    """The batch's rows to write, in the table's types, and the batch flagged or None.

    The flagged batch (None when every row fits) has the batch's own values
    and a :data:`MISFIT` column; the rows to write are those of it without
    a reason. Partition columns live in folder names, whose type Spark
    infers when reading: they are left as they are.
    """
    casts: dict[str, Column] = {}
    misfits: list[Column] = []
    for field in df.schema.fields:
        name, wanted = field.name, known.get(field.name)
        if name in partition_by:
            continue
        if isinstance(field.dataType, T.NullType):
            casts[name] = F.lit(None).cast(wanted or T.StringType())
        elif wanted is not None and _differ(field.dataType, wanted):
            column = F.col(quoted(name))
            cast = column.try_cast(wanted)
            # A value fits when it survives the way there and back: try_cast
            # alone turns 1.5 into the bigint 1 and 2^53 + 1 into a double 2^53.
            same = F.coalesce(cast.try_cast(field.dataType) == column, F.lit(False))
            if isinstance(field.dataType, T.StringType) and source_column(field) is not None:
                # A source's text form (a numeric, a timestamp): it fits when it parses,
                # all of it (Spark reads "4713-01-01 BC" as a date of our era).
                same = cast.isNotNull() & ~column.rlike(r"\s(BC|AD)$")
            try:
                df.select(cast, same).schema  # noqa: B018 (analysed here: castable at all?)
            except AnalysisException:
                cast, same = F.lit(None).cast(wanted), F.lit(False)  # no value fits
            casts[name] = cast
            why = (
                f"column {name!r} is {wanted.simpleString()} in the table, which cannot hold "
                f"this value (the batch has {field.dataType.simpleString()})"
            )
            misfits.append(F.when(column.isNotNull() & ~same, F.lit(why)))
    if not misfits:
        return (df.withColumns(casts) if casts else df), None
    reasons = F.concat_ws("; ", *misfits)
    flagged = df.withColumn(MISFIT, F.when(reasons != "", reasons))
    fitting = flagged.where(F.col(MISFIT).isNull()).drop(MISFIT).withColumns(casts)
    return fitting, flagged


def set_aside_misfits(
    fs: LocalFs | HadoopFs,
    flagged: DataFrame,
    target: TargetTable,
    manifest: Manifest,
    table_dir: str,
    tag: str,
) -> int:
    """Write the rows of ``flagged`` that do not fit to the batch's rejects file; count them.

    ``flagged`` is the batch as :func:`fit_to_table` flagged it, persisted
    by the caller (it is read twice: here, and for the rows that fit); its
    values are the batch's own, before any cast.
    """
    path = rejects_path(table_dir, tag)
    refused = flagged.where(F.col(MISFIT).isNotNull()).collect()
    if not refused:
        fs.delete(path)  # an earlier attempt's, if any
        return 0
    now = dt.datetime.now(dt.UTC).isoformat()
    lines = []
    for row in refused:
        values = {k: v for k, v in row.asDict(recursive=True).items() if k != MISFIT}
        record = {
            "batch_id": manifest.batch_id,
            "source": manifest.source,
            "key": _json([values.get(k) for k in target.key]),
            "row": _json(values),
            "reason": row[MISFIT],
            "rejected_at": now,
        }
        lines.append(json.dumps(record))
    fs.write_text(path, "\n".join(lines) + "\n")
    return len(refused)


def rejects_path(table_dir: str, tag: str) -> str:
    """Where a batch's rows that did not fit are recorded (JSON lines)."""
    return f"{table_dir}/{REJECTS_TABLE}/{tag}.json"


def catalogue_types(schema: T.StructType) -> dict[str, T.DataType]:
    """The Parquet types the catalogue gives the batch's columns read from a SQL table."""
    found = {}
    for field in schema.fields:
        source = source_column(field)
        if source is not None:
            found[field.name] = parquet_type(source[1], field.dataType)
    return found


def _differ(have: T.DataType, wanted: T.DataType) -> bool:
    # Nullability is no type difference: a file of a batch without nulls says "required".
    return have.simpleString() != wanted.simpleString()


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def _published_file(fs: LocalFs | HadoopFs, listing: list[str]) -> str | None:
    """One published data file of the table (descending into partitions), or None."""
    visible = [p for p in listing if not basename(p).startswith(("_", "."))]
    for path in visible:
        if basename(path).endswith(".parquet"):
            return path
    for path in visible:
        if "=" in basename(path):
            found = _published_file(fs, fs.list(path))
            if found is not None:
                return found
    return None
