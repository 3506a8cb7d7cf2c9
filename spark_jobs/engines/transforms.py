"""The batch's column transforms: what the mapping between two engines does to values
on their way, in Spark, between the engine's reader and the target's writer.

Most values need nothing: each target parses the source's text form in its
own column type. What the catalogue's mapping says changes, changes here:

- MySQL's zero dates (``0000-00-00``, a month or day of ``00``) into another
  engine: NULL, counted per column (``_sluice_zero__<column>``: 1 where a zero
  date became NULL, which the writers count and drop).
- MySQL's ``set`` into PostgreSQL: its members as an array literal (``{"a","b"}``).

A batch that needs none of them is returned as it is (a native read stays one
that a writer's task may run itself).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from spark_jobs.engines import source_column
from spark_jobs.engines.arrow_transforms import DATES, ZERO_DATE, ZERO_PREFIX
from spark_jobs.engines.base import Kind
from spark_jobs.engines.spark_names import quoted


def for_target(df: DataFrame, target: str, zero_dates: str = "null") -> DataFrame:
    """``df``'s columns as a target of engine ``target`` (``postgresql``, ``mysql``,
    ``sqlite``, ``parquet``) takes them (see the module). ``zero_dates: reject``: zero
    dates are left as they are, for the writer to set their rows aside."""
    changed: dict[str, Column] = {}
    counted: list[Column] = []
    for field in df.schema.fields:
        found = source_column(field)
        if found is None:
            continue
        engine, column = found
        value = F.col(quoted(field.name))
        if engine.name == "mysql" and target != "mysql" and column.kind in DATES and (
                zero_dates != "reject"):  # fmt: skip
            zero = value.rlike(ZERO_DATE)
            changed[field.name] = F.when(zero, F.lit(None)).otherwise(value)
            counted.append(F.when(zero, F.lit(1)).otherwise(F.lit(0)).alias(
                f"{ZERO_PREFIX}{field.name}"))  # fmt: skip
        elif engine.name == "mysql" and target == "postgresql" and column.kind == Kind.SET:
            changed[field.name] = _pg_array(value)
        elif engine.name == "mysql" and target == "parquet" and column.kind == Kind.SET:
            changed[field.name] = F.when(value == "", F.array().cast("array<string>")).otherwise(
                F.split(value, ","))
    if not changed:
        return df
    columns = [
        changed[f.name].alias(f.name, metadata=f.metadata) if f.name in changed
        else F.col(quoted(f.name))
        for f in df.schema.fields
    ]  # fmt: skip
    return df.select(*columns, *counted)


def zero_columns(names: Sequence[str]) -> list[str]:
    """The zero-date counting columns among ``names``."""
    return [n for n in names if n.startswith(ZERO_PREFIX)]


def _pg_array(value: Column) -> Column:
    """A MySQL set's text (``a,b``) as PostgreSQL's array literal, each member quoted."""
    escaped = F.replace(F.replace(value, F.lit("\\"), F.lit("\\\\")), F.lit('"'), F.lit('\\"'))
    members = F.concat(F.lit('{"'), F.replace(escaped, F.lit(","), F.lit('","')), F.lit('"}'))
    return F.when(value == "", F.lit("{}")).otherwise(members)


def count_zeros(table: object, names: Sequence[str]) -> dict[str, int]:
    """Zero dates per column that became NULL, from the counting columns of an Arrow
    ``table`` (or record batch)."""
    import pyarrow.compute as pc

    counts = {}
    for name in zero_columns(names):
        total = pc.sum(table.column(name)).as_py()  # type: ignore[attr-defined]
        if total:
            counts[name.removeprefix(ZERO_PREFIX)] = int(total)
    return counts


def target_engine(url_or_kind: str) -> str:
    """The engine name of a target (``parquet`` for a Parquet target)."""
    import sqlalchemy as sa

    if url_or_kind == "parquet":
        return "parquet"
    backend = sa.make_url(url_or_kind).get_backend_name()
    return {"mariadb": "mysql"}.get(backend, backend)


def zero_dates(df: DataFrame) -> dict[str, int]:
    """The zero dates per column the batch's transforms set to NULL (one Spark job, only
    where a transform counts them)."""
    counting = zero_columns(df.columns)
    if not counting:
        return {}
    row = df.agg(*[F.sum(quoted(n)).alias(n) for n in counting]).first()
    return {n.removeprefix(ZERO_PREFIX): int(row[n]) for n in counting if row and row[n]}
