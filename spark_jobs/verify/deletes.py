"""``sluice verify --apply-deletes``: delete the rows only a JDBC target has."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

import sqlalchemy as sa

from config.models import ParquetTargetConfig, SqlSourceConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.load.target import TargetTable
from spark_jobs.verify.compare import encoded
from spark_jobs.verify.report import TableReport


def delete_extras(source: SqlSourceConfig, target: TargetTable, keys: Iterator[list[Any]],
                   held: list[list[Any]], report: TableReport) -> None:  # fmt: skip
    """Delete rows only the target has, in transactions of 500 keys (JDBC targets).

    A key is deleted only if the source table (without ``where:``) does not
    hold it when it is looked up, just before, and no unfinished batch does:
    a row a daemon migrated after the comparison read the source stays.
    """
    if isinstance(target.config, ParquetTargetConfig):
        report.note = "extra rows not deleted: a Parquet target's files are not rewritten"
        return
    busy = {encoded(k) for k in held}
    schema, _, name = source.table.rpartition(".")
    source_keys: list[sa.ColumnClause[Any]] = [sa.column(c) for c in source.key_columns]
    source_table = sa.table(name, *source_keys, schema=schema or None)
    columns: list[sa.ColumnClause[Any]] = [sa.column(c) for c in target.key]
    table = sa.table(target.table, *columns, schema=target.schema)
    for chunk in chunks(keys, 500):
        with sql_engine(source.url).connect() as conn:
            present = {encoded(row) for row in conn.execute(
                sa.select(*source_keys).select_from(source_table)
                .where(_among(source_keys, chunk)))}  # fmt: skip
        gone = [k for k in chunk if encoded(k) not in present and encoded(k) not in busy]
        if gone:
            with sql_engine(target.config.url).begin() as conn:
                report.deleted += conn.execute(table.delete().where(_among(columns, gone))).rowcount


def _among(columns: list[Any], keys: list[list[Any]]) -> Any:
    if len(columns) == 1:
        return columns[0].in_([k[0] for k in keys])
    return sa.tuple_(*columns).in_([tuple(k) for k in keys])


def chunks(items: Iterator[list[Any]], size: int) -> Iterator[list[list[Any]]]:
    """``items`` in lists of ``size`` (the last shorter)."""
    while chunk := list(islice(items, size)):
        yield chunk
