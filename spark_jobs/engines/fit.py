"""Whether a batch's columns can go into a target table's columns, by what their values are.

A value goes into a target column in the column's own type: the database
parses the value's text (a uuid's text into a ``uuid`` column, text into
``jsonb``, a label into an enum). Whether that can work is known from the two
sides' :class:`~spark_jobs.engines.base.Kind` before any row is read: text
goes into anything (a value that does not parse is a rejected row), numbers
into numbers (a value the column would change is a rejected row), times into
times; a uuid into an integer column never fits, which is an error before the
first batch, naming the column and both types.
"""

from __future__ import annotations

from pyspark.sql import types as T

from spark_jobs.engines.base import Kind

_NUMBERS = frozenset({Kind.INT, Kind.UINT, Kind.DECIMAL, Kind.FLOAT, Kind.MONEY, Kind.YEAR,
                      Kind.BOOL, Kind.BIT})  # fmt: skip
_INSTANTS = frozenset({Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ})
_DURATIONS = frozenset({Kind.TIME, Kind.TIMETZ, Kind.INTERVAL})
_TEXTS = frozenset({Kind.TEXT, Kind.CHAR, Kind.OTHER})
_FAMILIES = (_NUMBERS, _INSTANTS, _DURATIONS,
             frozenset({Kind.ENUM, Kind.SET, Kind.ARRAY, Kind.TEXT}),
             frozenset({Kind.UUID, Kind.BYTES}), frozenset({Kind.JSON, Kind.ARRAY, Kind.SET}),
             frozenset({Kind.BIT, Kind.BYTES}), frozenset({Kind.TIME, Kind.TIMESTAMP}))  # fmt: skip


def fits(source: Kind | None, target: Kind) -> bool:
    """Whether values of kind ``source`` (None: no value, a column null in the whole
    batch) can go into a column of kind ``target``."""
    if source is None or source == target:
        return True
    if source in _TEXTS or target in _TEXTS or target == Kind.JSON and source != Kind.BYTES:
        return True
    return any(source in family and target in family for family in _FAMILIES)


_SPARK_KINDS = (
    (T.BooleanType, Kind.BOOL),
    (T.ByteType, Kind.INT),
    (T.ShortType, Kind.INT),
    (T.IntegerType, Kind.INT),
    (T.LongType, Kind.INT),
    (T.FloatType, Kind.FLOAT),
    (T.DoubleType, Kind.FLOAT),
    (T.DecimalType, Kind.DECIMAL),
    (T.StringType, Kind.TEXT),
    (T.VarcharType, Kind.TEXT),
    (T.CharType, Kind.TEXT),
    (T.BinaryType, Kind.BYTES),
    (T.DateType, Kind.DATE),
    (T.TimestampNTZType, Kind.TIMESTAMP),
    (T.TimestampType, Kind.TIMESTAMPTZ),
    (T.ArrayType, Kind.ARRAY),
)


def spark_kind(data_type: T.DataType) -> Kind | None:
    """The kind of a batch column known only by its Spark type; None for ``void``."""
    if isinstance(data_type, T.NullType):
        return None
    for spark, kind in _SPARK_KINDS:
        if isinstance(data_type, spark):
            return kind
    return Kind.OTHER
