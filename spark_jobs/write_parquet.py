"""Write one batch into a Parquet table, idempotently.

Spark writes the batch as one file under a staging folder of its own (its name
starts with ``_``, so readers skip it); a marker records the batch's fencing
token and rows; a rename publishes the file as ``{path}/{table}/batch-<id>.parquet``.
A re-run of the batch replaces that file, so ``spark.read.parquet(table)``
sees every row once. The batch counts as committed once its file is published.

Rejected rows: Parquet has no constraints, so a row Spark could compute is a
row the file takes; there is nothing to reject and ``_sluice_rejects`` is not
used. A row Spark cannot compute (a ``columns:`` expression failing at run time,
such as a cast under ANSI mode) fails the whole batch, which is then retried
and ends ``dead``; write such expressions with ``try_cast``/``try_*``.

Fencing is best effort here: a file system has no transaction, so the token is
checked just before the rename, and two importers passing that check at the
same instant both publish the same batch's rows (the later rename wins, and
the table still holds each row once). The ledger's leases keep that rare.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from config.errors import TargetError
from config.faults import crash_point
from config.models import ParquetTargetConfig
from spark_jobs.manifest import Manifest
from spark_jobs.target import COMMITS_TABLE, Commit, TargetTable, Written, stale_token_error


@dataclass(frozen=True)
class BatchFiles:
    """Where a batch lives in a Parquet table.

    ``{table}/batch-<id>.parquet`` is the published batch: plain files in the
    table folder, because Spark only reads sub-folders named ``k=v`` (which
    would add a column). ``_stage-<id>-<token>-<attempt>/`` and
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
    """Write the batch's file, record its marker, publish it; return the rows written."""
    cfg = target.config
    assert isinstance(cfg, ParquetTargetConfig)
    if cfg.partition_by:
        # One file per batch is what makes publishing atomic; partitions would
        # spread a batch over several folders and several renames.
        raise TargetError(
            f"targets.{target.name}.partition_by is not supported yet: leave it empty"
        )
    files = BatchFiles.of(cfg.path, target.schema, target.table, manifest.batch_id)
    fs = filesystem(files.table_dir, spark)
    for path in fs.list(files.table_dir):
        if files.stale_stage(path, manifest.token):
            fs.delete(path)  # left by a crashed (or superseded) attempt
    stage = files.stage(manifest.token)
    try:
        # One task writes one file, so one rename publishes the whole batch;
        # the shuffle keeps the source reads parallel.
        df.repartition(1).write.mode("overwrite").option("maxRecordsPerFile", 0).parquet(stage)
        parts = [p for p in fs.list(stage) if re.search(r"/part-[^/]*\.parquet$", p)]
        if len(parts) != 1:
            raise TargetError(
                f"{target.label}: expected one Parquet file for the batch, got {parts}"
            )
        marker = fs.read_text(files.marker)
        if marker and int(json.loads(marker)["token"]) > manifest.token:
            raise stale_token_error(target, manifest, int(json.loads(marker)["token"]))
        # Counted from the file's footers; the known schema spares an inference job.
        rows = spark.read.schema(df.schema).parquet(parts[0]).count()
        # The marker first: a crash before the rename leaves a marker and no
        # published file, which counts as not committed, and the retry redoes it.
        record = {
            "batch_id": manifest.batch_id,
            "token": manifest.token,
            "rows": rows,
            "committed_at": dt.datetime.now(dt.UTC).isoformat(),
        }
        fs.write_text(files.marker, json.dumps(record))
        fs.replace(parts[0], files.final)
        crash_point("after_target_commit")
    finally:
        fs.delete(stage)
    return Written(rows)


def parquet_commit(
    target: TargetTable, batch_id: str, spark: SparkSession | None = None
) -> Commit | None:
    """The batch's commit in a Parquet table: its file is published.

    A file published without a marker (written by an older sluice) counts as
    committed with token 0; its rows are counted when a session is at hand.
    """
    cfg = target.config
    assert isinstance(cfg, ParquetTargetConfig)
    files = BatchFiles.of(cfg.path, target.schema, target.table, batch_id)
    fs = filesystem(files.table_dir, spark)
    if not fs.exists(files.final):
        return None
    marker = fs.read_text(files.marker)
    if marker:
        record = json.loads(marker)
        return Commit(int(record["token"]), int(record["rows"]))
    spark = spark or SparkSession.getActiveSession()
    rows = spark.read.parquet(files.final).count() if spark is not None else 0
    return Commit(0, rows)


# --------------------------------------------------------------- file systems


class LocalFs:
    """Batch files on a local disk: ``os.replace`` publishes atomically."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list(self, folder: str) -> list[str]:
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, name) for name in os.listdir(folder)]

    def delete(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)  # atomic, and over an older copy of the batch too

    def read_text(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"  # racing writers never share one
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)


class HadoopFs:
    """Batch files on any Hadoop file system (hdfs://, s3a://, file://) via the JVM."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark._jvm  # PySpark exposes the JVM only through these
        self._path = jvm.org.apache.hadoop.fs.Path
        self._jvm = jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._path(path).getFileSystem(conf)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list(self, folder: str) -> list[str]:
        if not self.exists(folder):
            return []
        return [s.getPath().toString() for s in self._fs.listStatus(self._path(folder))]

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def replace(self, src: str, dst: str) -> None:
        # Hadoop's rename refuses an existing destination: a re-run of a
        # published batch removes the old file first (readers may miss the
        # batch for that instant; they never see it twice).
        self._fs.delete(self._path(dst), False)
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise TargetError(f"could not rename {src} to {dst}")

    def read_text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        stream = self._fs.open(self._path(path))
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def filesystem(path: str, spark: SparkSession | None) -> LocalFs | HadoopFs:
    """Local paths through ``os``; URLs (``scheme://``) through Hadoop's FileSystem."""
    if "://" not in path:
        return LocalFs()
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise TargetError(f"{path}: a Hadoop path needs a running SparkSession")
    return HadoopFs(spark, path)
