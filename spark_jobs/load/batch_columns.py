"""A batch's columns as a JDBC target sees them: the type each is staged in, the type a
table sluice creates gives it, what its values are, and where it came from.

A column read from a SQL table carries its source column (see
:mod:`spark_jobs.engines`): a table sluice creates gets the type the target
engine's catalogue maps it to (the source's own type, on the same engine).
A column known only by its Spark type (an SQS field, a ``columns:``
expression) gets the target engine's type for that Spark type. Either way
the batch is staged in its carriers' types, which the bulk paths write as
they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pyspark.sql import types as T

from spark_jobs.common.jdbc import JdbcEndpoint, sql_column_type
from spark_jobs.engines import dialect_engine, source_column, target_catalogue
from spark_jobs.engines.base import Column, Engine, Kind, UnsupportedColumn
from spark_jobs.engines.ddl import column_type, like
from spark_jobs.engines.fit import fits, spark_kind


@dataclass(frozen=True)
class BatchColumn:
    """One column of a batch bound for a JDBC target.

    ``stage``: its carrier's SQL type (staging tables); ``create``: the type a
    target table sluice creates gives it; ``kind``: what its values are
    (None: null in the whole batch); ``source``: the source engine and column
    it was read from, if any.
    """

    name: str
    stage: sa.types.TypeEngine[Any]
    create: sa.types.TypeEngine[Any]
    kind: Kind | None
    source: tuple[Engine, Column] | None = None
    values: sa.types.TypeEngine[Any] | None = None
    """A plain SQLAlchemy type of its values, for the checks (None: none says more)."""

    @property
    def type_text(self) -> str:
        """The source's type for messages (its Spark type when it has no source column)."""
        return self.source[1].type if self.source is not None else str(self.create)


def is_enum_cast(cast: str | None) -> bool:
    """Whether a ``cast:`` asks for an enum type created of the source column's labels."""
    return cast is not None and cast.strip().lower() == "enum"


def batch_columns(
    schema: T.StructType, url: str, key: Sequence[str], cast: Mapping[str, str] | None = None
) -> list[BatchColumn]:
    """The columns of a batch of ``schema`` bound for the database at ``url``; ``cast``:
    per column, the type a table sluice creates gives it instead of the catalogue's.

    Raises :class:`~spark_jobs.engines.base.UnsupportedColumn` for a cast whose type no
    value of the column's can be.
    """
    dialect = JdbcEndpoint.from_url(url).dialect
    into = dialect_engine(dialect)
    catalogued = target_catalogue(url)
    found = []
    for f in schema.fields:
        is_key = f.name in key
        stage = sql_column_type(f.dataType, dialect, is_key, f.name)
        values = stage
        if (into.floats_staged_as_text and isinstance(f.dataType, T.FloatType | T.DoubleType)
                or into.decimals_staged_as_text and isinstance(f.dataType, T.DecimalType)):
            stage = sa.Text()  # set aside alone (or kept) as its text: see the engine's reason
        source = source_column(f)
        kind = spark_kind(f.dataType) if source is None else source[1].kind
        create: sa.types.TypeEngine[Any] = stage
        if cast and is_enum_cast(cast.get(f.name)):
            if catalogued is None or not catalogued.named_enums or source is None or (
                    source[1].kind != Kind.ENUM or not source[1].labels):  # fmt: skip
                raise UnsupportedColumn(
                    f"cast: {f.name}: enum creates a PostgreSQL enum type of an enum "
                    f"column's labels; {source[1].type if source else f.dataType.simpleString()}"
                    f" into {dialect} is not one"
                )
            create = column_type("text", source[1])  # the type is made with the table
        elif catalogued is not None and cast and f.name in cast:
            wanted = catalogued.kind_of_type(cast[f.name])
            if not fits(kind, wanted):
                raise UnsupportedColumn(
                    f"cast: {f.name}: {cast[f.name]} cannot hold the source's "
                    f"{source[1].type if source else f.dataType.simpleString()} values"
                )
            create = column_type(cast[f.name], source[1] if source else None)
        elif catalogued is not None and (source is not None or into.spark_types_mapped):
            if source is not None:
                mapped = catalogued.target_type(source[1], source[0]).type
                create = column_type(catalogued.key_type(mapped) if is_key else mapped,
                                     source[1])  # fmt: skip
            else:
                create = column_type(catalogued.spark_type(f.dataType, f.name, is_key))
        if source is not None:
            values = like(source[1]) or stage
        found.append(BatchColumn(f.name, stage, create, kind, source, values))
    return found
