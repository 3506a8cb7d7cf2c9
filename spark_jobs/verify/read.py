"""Read both sides of a verify (:mod:`spark_jobs.verify.compare`): the source table, as its rows go
into the target, and the target table, over the same keys.

Each side is read with its own eyes: every value as its database prints it
(``col::text``, ``CAST(col AS CHAR)``; :meth:`~spark_jobs.engines.base.Engine.text_sql`),
never through the conversion the import reads it with, and put into the form
the two sides compare in (:func:`comparable`, see :mod:`spark_jobs.engines.canonical`).
A Parquet side is read as Parquet holds it. A source with ``columns:`` is read as
an import reads it, its expressions applied, and compared in Spark's types.

The source is read with its ``where:``, at most ``parts`` queries at once: the
database's ``limits.max_connections`` bound a verify as they bound the daemon.
With a single integer key both sides are split into the same key ranges, one
query each, from the keys' first and last (two index look-ups).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyspark.sql.functions as F
import sqlalchemy as sa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from config.errors import TargetError
from config.models import ParquetTargetConfig, SqlSourceConfig
from config.sources import ReadConfig
from spark_jobs.common.jdbc import dialect_name, sql_engine
from spark_jobs.engines import catalogued, source_column, target_catalogue
from spark_jobs.engines.base import Kind
from spark_jobs.engines.canonical import neutral
from spark_jobs.engines.spark_names import quoted
from spark_jobs.load.jdbc_tables import rejects_table
from spark_jobs.load.target import REJECTS_TABLE, TargetTable
from spark_jobs.load.write_parquet import BatchFiles
from spark_jobs.read.computed import apply_columns
from spark_jobs.read.extract import SqlReader
from spark_jobs.verify.keys import at_or_below


@dataclass(frozen=True)
class Scope:
    """Which keys a verify compares: those at or below ``upto`` (None: every key).

    A keyset source is done up to where its first unfinished range begins;
    ``nothing``: not even its first range is done, so no row is compared.
    """

    upto: list[Any] | None = None
    nothing: bool = False
    target_open: bool = False
    """The target's rows past ``upto`` are compared too: no batch is unfinished, so a
    target row past the source's high-water mark is one the source does not have."""
    keys: list[list[Any]] | None = None
    """Only the rows of these keys, on each side (the rows a stream changed since a verify
    proved the rest equal, :mod:`scheduler.verify_marks`); None: by ``upto``."""


def read_sides(
    spark: SparkSession, source: SqlSourceConfig, target: TargetTable, scope: Scope, parts: int,
    kept: DataFrame | None = None, spare: bool = True,
) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    """The source's rows in ``scope`` (after ``columns:``) and the target's, lazily.

    ``kept``: the source's rows in scope, read already (at a rate limit), in
    place of a read of the source here. ``spare``: a query of the source's
    keys' ends may open a connection of its own (else the reads are split by
    the target's).
    """
    if scope.keys is not None:
        return _listed_sides(spark, source, target, scope.keys, parts)
    ask = spare and kept is None
    lo, hi, target_hi = _bounds(source, target, scope, ask)
    # Split by the target's ends alone, the source's read could miss its rows past them.
    source_range = (lo, hi) if ask else (None, scope.upto)
    rows = kept if kept is not None else source_reader(spark, source).read_range(
        *source_range, parts=parts)  # fmt: skip
    rows = apply_columns(rows, source.columns)
    if scope.nothing:
        rows = rows.limit(0)
    if isinstance(target.config, ParquetTargetConfig):
        return comparable(rows, _parquet_side(spark, target, rows, scope), source.key_columns,
                          "parquet")  # fmt: skip
    engine = sql_engine(target.config.url)
    if not sa.inspect(engine).has_table(target.table, schema=target.schema):
        return rows, spark.createDataFrame([], rows.schema)
    theirs = _target_reader(spark, source, target, parts).read_range(lo, target_hi, parts=parts)
    return comparable(rows, theirs.limit(0) if scope.nothing else theirs, source.key_columns,
                      dialect_name(target.config.url))  # fmt: skip


def _listed_sides(
    spark: SparkSession, source: SqlSourceConfig, target: TargetTable, keys: list[list[Any]],
    parts: int,
) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    """Both sides' rows of ``keys`` only (a JDBC target's: the mark is kept there)."""
    assert not isinstance(target.config, ParquetTargetConfig)
    rows = apply_columns(source_reader(spark, source).read_keys(keys, parts, bounded=True),
                         source.columns)  # fmt: skip
    engine = sql_engine(target.config.url)
    if not sa.inspect(engine).has_table(target.table, schema=target.schema):
        return rows, spark.createDataFrame([], rows.schema)
    theirs = _target_reader(spark, source, target, parts).read_keys(keys, parts, bounded=True)
    return comparable(rows, theirs, source.key_columns, dialect_name(target.config.url))


def _target_reader(
    spark: SparkSession, source: SqlSourceConfig, target: TargetTable, parts: int
) -> SqlReader:
    """How verify reads a JDBC target's table: as the target holds each value where its
    engine has a catalogue of sluice's, through JDBC's types else."""
    assert not isinstance(target.config, ParquetTargetConfig)
    mirror = SqlSourceConfig(
        kind="sql", url=target.config.url, table=qualified(target), key=list(target.key),
        read=ReadConfig(num_partitions=parts, fetchsize=source.read.fetchsize),
        target=target.label,
    )  # fmt: skip
    return SqlReader(spark, mirror, as_text=target_catalogue(mirror.url) is not None)


def source_reader(spark: SparkSession, source: SqlSourceConfig) -> SqlReader:
    """How verify reads ``source``: as its database prints each value, unless ``columns:``
    computes the rows that go in (then as an import reads them)."""
    return SqlReader(spark, source, as_text=source.columns is None and catalogued(source.url))


def comparable(
    mine: DataFrame, theirs: DataFrame, key: Sequence[str], their_engine: str = "spark"
) -> tuple[DataFrame, DataFrame]:
    """Both sides as text to compare, column by column (the target's by the source's names,
    in any case): as each database printed it between tables of one engine, else in the
    neutral form of :mod:`spark_jobs.engines.canonical`; keys always neutral.
    ``their_engine``: the target's engine where its columns carry no catalogue's
    (``sqlite``, ``parquet``); a text there is read as the source's text of the value.

    Raises :class:`TargetError` when a source column is not in the target.
    """
    by_name = {f.name.lower(): f for f in theirs.schema.fields}
    missing = [n for n in mine.columns if n.lower() not in by_name]
    if missing:
        raise TargetError(
            f"the target table has no column {', '.join(map(repr, missing))} "
            "that the source has: verify compares every source column"
        )
    ours: list[Any] = []
    others: list[Any] = []
    for field in mine.schema.fields:
        other = by_name[field.name.lower()]
        sides = [(field, source_column(field)), (other, source_column(other))]
        engines = [found[0].name if found else plain
                   for (_, found), plain in zip(sides, ("spark", their_engine), strict=True)]
        single = any(found is not None and found[1].kind == Kind.FLOAT
                     and found[1].base in ("float4", "real", "float")
                     for _, found in sides)  # fmt: skip
        raw = engines[0] == engines[1] != "spark" and field.name not in key
        kinds = [found[1].kind if found else None for _, found in sides]
        for (side, found), engine, out, peer, peer_kind, peer_found in zip(
            sides, engines, (ours, others), reversed(engines), reversed(kinds),
            reversed([found for _, found in sides]), strict=True,
        ):  # fmt: skip
            value = F.col(quoted(side.name))
            if not raw and found is None and peer_found is not None and isinstance(
                    side.dataType, T.StringType):  # fmt: skip
                # A value kept as its text (a uuid in SQLite, a time in Parquet): the
                # source's text, in the source's neutral form.
                value = neutral(value, peer, peer_found[1], side.dataType, engine, single)
            elif not raw:
                value = neutral(value, engine, found[1] if found else None, side.dataType,
                                peer, single, peer_kind)  # fmt: skip
            out.append(value.cast("string").alias(field.name))
    return mine.select(*ours), theirs.select(*others)


def rejected_keys(spark: SparkSession, target: TargetTable, source: str) -> list[list[Any]]:
    """The keys of ``source``'s rows the target refused (``_sluice_rejects``), distinct."""
    if isinstance(target.config, ParquetTargetConfig):
        folder = BatchFiles.of(target.config.path, target.schema, target.table, "-").table_dir
        try:
            found = spark.read.text(f"{folder}/{REJECTS_TABLE}/*.json").collect()
        except AnalysisException:  # no rejects folder: nothing was refused
            return []
        records = [json.loads(row.value) for row in found if row.value.strip()]
        texts = {r["key"] for r in records if r.get("source") == source}
    else:
        engine = sql_engine(target.config.url)
        if not sa.inspect(engine).has_table(REJECTS_TABLE):
            return []
        t = rejects_table()
        with engine.connect() as conn:
            texts = set(conn.scalars(sa.select(t.c.key).where(t.c.source == source).distinct()))
    return [json.loads(text) for text in sorted(texts)]


def _bounds(
    source: SqlSourceConfig, target: TargetTable, scope: Scope, ask_source: bool
) -> tuple[list[Any] | None, list[Any] | None, list[Any] | None]:
    """``lo`` and the source's and the target's ``hi``: ranges ``(lo, hi]`` covering the
    scope on each side, split-able into the same parts for one integer key (the keys'
    ends on each side, the source's only if ``ask_source``)."""
    target_hi = None if scope.target_open else scope.upto
    if len(source.key_columns) != 1 or scope.nothing:
        return None, scope.upto, target_hi
    ends = [min_max(source.url, source.table, source.key_columns[0])] if ask_source else []
    if not isinstance(target.config, ParquetTargetConfig):
        ends.append(min_max(target.config.url, qualified(target), target.key[0], missing_ok=True))
    lows = [lo for lo, _ in ends if isinstance(lo, int)]
    highs = [hi for _, hi in ends if isinstance(hi, int)]
    if not lows or not highs or any(not isinstance(v, int | None) for end in ends for v in end):
        return None, scope.upto, target_hi
    top = [max(highs)]
    return [min(lows) - 1], scope.upto or top, top if target_hi is None else target_hi


def min_max(url: str, table: str, column: str, missing_ok: bool = False) -> tuple[Any, Any]:
    """The first and last of ``column``'s values in ``table`` at ``url`` (None, None: no row,
    or no such table when ``missing_ok``)."""
    schema, _, name = table.rpartition(".")
    engine = sql_engine(url)
    if missing_ok and not sa.inspect(engine).has_table(name, schema=schema or None):
        return None, None
    key: sa.ColumnClause[Any] = sa.column(column)
    found = sa.table(name, schema=schema or None)
    # By the key's index, for a key of any type: uuid has no min() or max().
    first = sa.select(key).select_from(found).order_by(key).limit(1)
    last = sa.select(key).select_from(found).order_by(key.desc()).limit(1)
    with engine.connect() as conn:
        return conn.scalar(first), conn.scalar(last)


def _parquet_side(
    spark: SparkSession, target: TargetTable, rows: DataFrame, scope: Scope
) -> DataFrame:
    assert isinstance(target.config, ParquetTargetConfig)
    folder = BatchFiles.of(target.config.path, target.schema, target.table, "-").table_dir
    try:
        files = spark.read.parquet(folder)
    except AnalysisException:  # no folder, or no file in it yet
        return spark.createDataFrame([], rows.schema)
    # Parquet's own values: whatever a file's footer says of a column's source, it holds
    # Parquet's types now (and files of older runs may carry sluice's column notes).
    theirs = files.select(*[F.col(quoted(c)).alias(c, metadata={}) for c in files.columns])
    if scope.nothing:
        return theirs.limit(0)
    if scope.upto is not None and not scope.target_open:
        columns = [F.col(quoted(name)) for name in target.key]
        theirs = theirs.where(at_or_below(columns, scope.upto))
    return theirs


def qualified(target: TargetTable) -> str:
    """The target's table as ``schema.table`` (or ``table`` in the default schema)."""
    return f"{target.schema}.{target.table}" if target.schema else target.table


def parts_for(source: SqlSourceConfig) -> int:
    """Queries a verify may run on ``source``'s database at once (its ``limits:``)."""
    return max(1, min(source.read.num_partitions, source.limits.max_connections))

