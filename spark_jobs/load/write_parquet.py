"""Write one batch into a Parquet table, idempotently.

Spark writes the batch under a staging folder of its own (its name starts
with ``_``, so readers skip it); a marker in ``_sluice_commits/`` records the
batch's fencing token and rows; renames publish the files. A re-run of the
batch replaces exactly its own files, so ``spark.read.parquet(table)`` sees
every row once.

- Without ``partition_by``: the batch is one file,
  ``{path}/{table}/batch-<id>.parquet``, published by one rename; it counts
  as committed once that file is there.
- With ``partition_by: [a, b]`` (Hive style): the batch is one file per
  partition it touches, ``{table}/a=…/b=…/batch-<id>.parquet``. The marker
  lists them: first, before any rename, with the files an earlier attempt
  published (so that a crash at any point leaves a marker naming every file
  the batch may have, and the retry deletes those it does not write again);
  then, after the renames, as ``published``, which is the commit. A reader
  listing the table during those few renames may see part of the batch
  (several folders cannot be renamed at once); it never sees a row twice, as
  a re-run deletes the files it drops before it renames the new ones.
  Partition columns live in the folder names, not in the files, and Spark
  infers their type when reading (``eu`` stays text, ``7`` becomes an int).

Rejected rows: a batch is written in the table's established column types
(:mod:`spark_jobs.load.parquet_types`); a row with a value that does not fit one
is set aside in ``_sluice_rejects/<batch>.json`` with the column named. A row
Spark cannot compute (a ``columns:`` expression failing at run time) fails
the whole batch, retried until ``dead``: use ``try_cast``/``try_*`` there.

Fencing is best effort here: a file system has no transaction, so the token is
checked just before publishing, and two importers passing that check at the
same instant both publish the same batch's rows (the later rename wins, and
the table still holds each row once, unless their rows fall into different
partitions). The ledger's leases keep that rare.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from config.errors import TargetError
from config.faults import crash_point
from config.models import ParquetTargetConfig
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.spark_names import quoted
from spark_jobs.engines.transforms import zero_columns, zero_dates
from spark_jobs.load.filesystems import HadoopFs, LocalFs, basename, filesystem
from spark_jobs.load.parquet_layout import check_layout, partition_columns
from spark_jobs.load.parquet_types import (
    catalogue_types,
    established_types,
    fit_to_table,
    forget_types,
    rejects_path,
    remember_types,
    set_aside_misfits,
)
from spark_jobs.load.target import (
    COMMITS_TABLE,
    REJECTS_TABLE,
    Commit,
    TargetTable,
    Written,
    stale_token_error,
)

_PART = re.compile(r"(^|/)part-[^/]*\.parquet$")
"""A data file Spark wrote (its ``_SUCCESS`` and ``.crc`` files are not)."""


@dataclass(frozen=True)
class BatchFiles:
    """Where a batch lives in a Parquet table.

    ``{table}/batch-<id>.parquet`` is the published batch of an unpartitioned
    table: plain files in the table folder, because Spark only reads
    sub-folders named ``k=v`` (which would add a column). In a partitioned
    table, each partition folder holds a ``batch-<id>.parquet`` of its own
    (:meth:`published`). ``_stage-<id>-<token>-<attempt>/`` and
    ``_sluice_commits/<id>.json`` start with ``_``, so readers skip them.
    """

    table_dir: str
    tag: str
    final: str
    marker: str

    @classmethod
    def of(cls, root: str, schema: str | None, table: str, batch_id: str) -> BatchFiles:
        """The paths of ``batch_id`` in table ``[schema/]table`` under ``root``."""
        table_dir = "/".join(p for p in (root.rstrip("/"), schema, table) if p)
        tag = file_tag(batch_id)
        return cls(
            table_dir=table_dir,
            tag=tag,
            final=f"{table_dir}/batch-{tag}.parquet",
            marker=f"{table_dir}/{COMMITS_TABLE}/{tag}.json",
        )

    def published(self, partition: str) -> str:
        """The batch's file in ``partition`` (``a=1/b=x``), relative to the table folder."""
        return f"{partition}/batch-{self.tag}.parquet"

    def stage(self, token: int) -> str:
        """A staging folder for one attempt: two importers never share one."""
        return f"{self.table_dir}/_stage-{self.tag}-{token}-{uuid.uuid4().hex[:8]}"

    def stale_stage(self, path: str, token: int) -> bool:
        """Whether ``path`` is a staging folder of this batch left by an older token."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        prefix = f"_stage-{self.tag}-"
        if not name.startswith(prefix):
            return False
        parts = name[len(prefix) :].split("-")
        return len(parts) == 2 and parts[0].isdigit() and int(parts[0]) < token


def file_tag(batch_id: str) -> str:
    """A batch id as a file name: injective and safe in any file system.

    Keeps ``[A-Za-z0-9-]`` and escapes every other byte as ``_xx``.
    """
    return "".join(
        chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) == "-") else f"_{b:02x}"
        for b in batch_id.encode()
    )


def write_parquet(
    spark: SparkSession, df: DataFrame, target: TargetTable, manifest: Manifest
) -> Written:
    """Write the batch's files, record its marker, publish them; return the rows written.

    Raises :class:`~spark_jobs.load.target.StaleToken` when a newer importer
    published the batch, :class:`TargetError` when ``partition_by`` does not
    fit the batch or the table already there.
    """
    cfg = target.config
    assert isinstance(cfg, ParquetTargetConfig)
    partition_by = partition_columns(target, cfg.partition_by, df)
    files = BatchFiles.of(cfg.path, target.schema, target.table, manifest.batch_id)
    fs = filesystem(files.table_dir, spark)
    listing = fs.list(files.table_dir)
    check_layout(target, fs, listing, partition_by)
    _delete_stale_stages(fs, files, listing, manifest.token)
    zeros = zero_dates(df)
    df = df.drop(*zero_columns(df.columns))
    known = {**catalogue_types(df.schema), **established_types(spark, fs, files.table_dir,
                                                               listing)}  # fmt: skip
    df, flagged = fit_to_table(df, known, partition_by)
    # The catalogue's notes on each column served the fit: they stay out of the files.
    df = df.select(*[F.col(quoted(c)).alias(c, metadata={}) for c in df.columns])
    stage = files.stage(manifest.token)
    rejected = 0
    try:
        if flagged is not None:
            flagged.persist()
            rejected = set_aside_misfits(fs, flagged, target, manifest, files.table_dir, files.tag)
        elif any(basename(p) == REJECTS_TABLE for p in listing):
            fs.delete(rejects_path(files.table_dir, files.tag))  # an earlier attempt's, if any
        record = _Record(manifest, rejected)
        if partition_by:
            rows = _publish_partitioned(spark, fs, df, target, record, files, stage, partition_by)
        else:
            rows = _publish_file(spark, fs, df, target, record, files, stage)
        crash_point("after_target_commit")
    except Exception:
        forget_types(files.table_dir)  # the table may have changed under this batch
        raise
    finally:
        fs.delete(stage)
        if flagged is not None:
            flagged.unpersist()
    remember_types(files.table_dir, df.schema)
    return Written(rows, rejected, "parquet", zero_dates=zeros)


def sweep_parquet_stages(
    target: TargetTable, manifest: Manifest, spark: SparkSession | None = None
) -> None:
    """Delete the staging folders older attempts of a committed batch left behind.

    A crash right after publishing leaves one; the re-run finds the batch
    committed and writes nothing, so this is its one chance to go.
    """
    cfg = target.config
    assert isinstance(cfg, ParquetTargetConfig)
    files = BatchFiles.of(cfg.path, target.schema, target.table, manifest.batch_id)
    fs = filesystem(files.table_dir, spark)
    _delete_stale_stages(fs, files, fs.list(files.table_dir), manifest.token)


def _delete_stale_stages(
    fs: LocalFs | HadoopFs, files: BatchFiles, listing: list[str], token: int
) -> None:
    for path in listing:
        if files.stale_stage(path, token):
            fs.delete(path)  # left by a crashed (or superseded) attempt


def _publish_file(
    spark: SparkSession,
    fs: LocalFs | HadoopFs,
    df: DataFrame,
    target: TargetTable,
    record: _Record,
    files: BatchFiles,
    stage: str,
) -> int:
    # One task writes one file, so one rename publishes the whole batch. It
    # reads the source partitions one after the other: parallel reads would
    # take a shuffle of every row (repartition), which cost 6 % more CPU
    # end to end; concurrent imports keep the cores busy instead.
    df.coalesce(1).write.mode("overwrite").option("maxRecordsPerFile", 0).parquet(stage)
    parts = [p for p in fs.list(stage) if _PART.search(p)]
    if len(parts) != 1:
        raise TargetError(f"{target.label}: expected one Parquet file for the batch, got {parts}")
    _fence(fs, target, record.manifest, files)
    # Counted from the file's footers; the known schema spares an inference job.
    rows = spark.read.schema(df.schema).parquet(parts[0]).count()
    # The marker first: a crash before the rename leaves a marker and no
    # published file, which counts as not committed, and the retry redoes it.
    fs.write_text(files.marker, json.dumps(record.marker(rows)))
    fs.replace(parts[0], files.final)
    return rows


def _publish_partitioned(
    spark: SparkSession,
    fs: LocalFs | HadoopFs,
    df: DataFrame,
    target: TargetTable,
    record: _Record,
    files: BatchFiles,
    stage: str,
    partition_by: list[str],
) -> int:
    # All rows of one partition in one task: one file per partition folder,
    # which then has one name per batch, so a re-run replaces it in place.
    (
        df.repartition(*[F.col(quoted(c)) for c in partition_by])
        .write.mode("overwrite")
        .option("maxRecordsPerFile", 0)
        .partitionBy(*partition_by)
        .parquet(stage)
    )
    staged = [p for p in fs.files(stage) if _PART.search(p)]  # a=1/b=x/part-….parquet
    folders = [p.rsplit("/", 1)[0] if "/" in p else "" for p in staged]
    if "" in folders or len(set(folders)) != len(folders):
        raise TargetError(
            f"{target.label}: expected one Parquet file per partition folder, got {staged}"
        )
    published = {p: files.published(folder) for p, folder in zip(staged, folders, strict=True)}
    earlier = _fence(fs, target, record.manifest, files)
    rows = 0
    if staged:
        data = T.StructType([f for f in df.schema.fields if f.name not in partition_by])
        paths = [f"{stage}/{p}" for p in staged]
        rows = spark.read.schema(data).option("basePath", stage).parquet(*paths).count()
    new = sorted(published.values())
    old = [f for f in (earlier or {}).get("files", []) if isinstance(f, str)]
    # Before any file moves, the marker names every file the batch may have
    # once this attempt is done or dies half-way: what it publishes, and what
    # an earlier attempt did. Not published yet: not committed.
    marker = record.marker(rows)
    fs.write_text(files.marker, json.dumps({**marker, "files": sorted({*old, *new})}))
    for dropped in sorted(set(old) - set(new)):  # rows that moved to another partition
        fs.delete(f"{files.table_dir}/{dropped}")
    for part, name in published.items():
        fs.replace(f"{stage}/{part}", f"{files.table_dir}/{name}")
    fs.write_text(files.marker, json.dumps({**marker, "files": new, "published": True}))
    return rows


def _fence(
    fs: LocalFs | HadoopFs, target: TargetTable, manifest: Manifest, files: BatchFiles
) -> dict[str, Any] | None:
    """Refuse to publish over a newer token; return the batch's marker, if any."""
    text = fs.read_text(files.marker)
    record: dict[str, Any] | None = json.loads(text) if text else None
    if record is not None and int(record["token"]) > manifest.token:
        raise stale_token_error(target, manifest, int(record["token"]))
    return record


@dataclass(frozen=True)
class _Record:
    """What the batch's marker in ``_sluice_commits/`` says, but for its rows."""

    manifest: Manifest
    rejected: int

    def marker(self, rows: int) -> dict[str, Any]:
        return {
            "batch_id": self.manifest.batch_id,
            "token": self.manifest.token,
            "rows": rows,
            "rejected": self.rejected,
            "committed_at": dt.datetime.now(dt.UTC).isoformat(),
        }


def parquet_commit(
    target: TargetTable, batch_id: str, spark: SparkSession | None = None
) -> Commit | None:
    """The batch's commit in a Parquet table: its file is published, or
    (partitioned) its marker says its files are.

    A file published without a marker (written by an older sluice) counts as
    committed with token 0; its rows are counted when a session is at hand.
    """
    cfg = target.config
    assert isinstance(cfg, ParquetTargetConfig)
    files = BatchFiles.of(cfg.path, target.schema, target.table, batch_id)
    fs = filesystem(files.table_dir, spark)
    marker = fs.read_text(files.marker)
    record = json.loads(marker) if marker else None
    if record is not None and "files" in record:  # written partitioned
        if not record.get("published"):
            return None  # a crash while publishing: the retry redoes it
        return _commit(record)
    if not fs.exists(files.final):
        return None
    if record is not None:
        return _commit(record)
    spark = spark or SparkSession.getActiveSession()
    rows = spark.read.parquet(files.final).count() if spark is not None else 0
    return Commit(0, rows)


def _commit(record: dict[str, Any]) -> Commit:
    return Commit(int(record["token"]), int(record["rows"]), int(record.get("rejected", 0)))


# ------------------------------------------------------------- the table's shape
