"""A Parquet table's partition layout: the columns a batch is partitioned by, and a check
that the folders already there agree."""

from __future__ import annotations

from pyspark.sql import DataFrame

from config.errors import TargetError
from spark_jobs.load.filesystems import HadoopFs, LocalFs, basename
from spark_jobs.load.target import TargetTable


def partition_columns(target: TargetTable, partition_by: list[str], df: DataFrame) -> list[str]:
    """``partition_by``, checked against the batch's columns."""
    setting = f"targets.{target.name}.partition_by"
    for column in partition_by:
        if column not in df.columns:
            raise TargetError(
                f"{target.label}: {setting} names column {column!r}, which the batch does "
                f"not have (its columns: {', '.join(df.columns)})"
            )
    if partition_by and set(df.columns) <= set(partition_by):
        raise TargetError(
            f"{target.label}: {setting} names every column of the batch; the files would "
            "hold none: leave at least one column out"
        )
    return list(partition_by)


def check_layout(
    target: TargetTable, fs: LocalFs | HadoopFs, listing: list[str], partition_by: list[str]
) -> None:
    """Refuse a batch whose layout differs from the table's: Spark cannot read a mix."""
    setting = f"targets.{target.name}.partition_by"
    folders = _partition_folders(listing)
    if not partition_by:
        if folders:
            raise TargetError(
                f"{target.label}: the table is partitioned (folder {basename(folders[0])!r}) "
                f"but {setting} is empty: set it to the table's partition columns"
            )
        return
    batches = [p for p in listing if basename(p).startswith("batch-")]
    if batches:
        raise TargetError(
            f"{target.label}: the table holds unpartitioned batches (such as "
            f"{basename(batches[0])!r}), so {setting} cannot apply to it: write to a new table"
        )
    # One level deeper than partition_by: a table partitioned more finely differs too.
    found = _partition_path(fs, folders, len(partition_by) + 1)
    if found and found != partition_by:
        raise TargetError(
            f"{target.label}: the table is partitioned by {found}, but {setting} "
            f"is {partition_by}: a table's partition columns cannot change"
        )


def _partition_path(fs: LocalFs | HadoopFs, folders: list[str], depth: int) -> list[str]:
    """The partition columns of the table, read down the first folder of each level."""
    columns: list[str] = []
    while folders and len(columns) < depth:
        columns.append(basename(folders[0]).split("=", 1)[0])
        below = fs.list(folders[0])
        folders = _partition_folders(below)
    return columns


def _partition_folders(listing: list[str]) -> list[str]:
    """The ``k=v`` folders a reader sees (not ``_``/``.`` ones) among ``listing``."""
    return [p for p in listing if "=" in basename(p) and not basename(p).startswith(("_", "."))]
