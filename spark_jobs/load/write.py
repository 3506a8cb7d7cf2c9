"""Write one batch into its target, idempotently, and read back whether it was.

The writers are :mod:`spark_jobs.load.write_jdbc` (staging table, then one fenced
upsert transaction) and :mod:`spark_jobs.load.write_parquet` (staging folder, then
a rename). Either way, writing a batch again gives the same target, and
whether a batch is committed can be read from the target alone
(:func:`committed_batch`): that is how a restart reconciles a batch whose
commit landed but whose ledger update did not.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from config.models import ParquetTargetConfig
from spark_jobs.common.manifest import Manifest
from spark_jobs.load.target import Commit, StaleToken, TargetTable, Written, stale_token_error
from spark_jobs.load.write_jdbc import jdbc_commit, jdbc_commits, sweep_jdbc_stages, write_jdbc
from spark_jobs.load.write_parquet import parquet_commit, sweep_parquet_stages, write_parquet

__all__ = [
    "Commit",
    "StaleToken",
    "TargetTable",
    "Written",
    "committed_batch",
    "committed_batches",
    "stale_token_error",
    "sweep_stages",
    "write_batch",
]


def write_batch(
    spark: SparkSession, df: DataFrame, target: TargetTable, manifest: Manifest
) -> Written:
    """Write the batch's rows and commit them; return the rows written and rejected.

    Raises :class:`StaleToken` when a newer importer committed the batch.
    """
    # The rows are counted where they landed (staging table, published file):
    # a Spark Observation reports 0 for JDBC writes with numPartitions set.
    if isinstance(target.config, ParquetTargetConfig):
        return write_parquet(spark, df, target, manifest)
    return write_jdbc(df, target, manifest)


def committed_batch(
    target: TargetTable, batch_id: str, spark: SparkSession | None = None
) -> Commit | None:
    """The batch's commit in the target, or None if it was not committed.

    ``spark`` is only needed for Parquet tables on a Hadoop path.
    """
    if isinstance(target.config, ParquetTargetConfig):
        return parquet_commit(target, batch_id, spark)
    return jdbc_commit(target, batch_id)


def committed_batches(target: TargetTable, batch_ids: Sequence[str]) -> dict[str, Commit] | None:
    """The commits of those of ``batch_ids`` the target holds, asked at once; None where
    only :func:`committed_batch` can tell (a Parquet target, a database whose own tables
    this process has not made sure of yet)."""
    if isinstance(target.config, ParquetTargetConfig):
        return None
    return jdbc_commits(target, batch_ids)


def sweep_stages(
    target: TargetTable, manifest: Manifest, spark: SparkSession | None = None
) -> None:
    """Remove what older attempts of the batch staged (tables, folders) and left behind."""
    if isinstance(target.config, ParquetTargetConfig):
        sweep_parquet_stages(target, manifest, spark)
    else:
        sweep_jdbc_stages(target, manifest)
