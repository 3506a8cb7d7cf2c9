"""Parquet: the Spark (and Parquet logical) type each source column becomes in a Parquet
table sluice writes.

Values whose carrier is text (see :mod:`spark_jobs.engines.base`) are parsed
into the type the catalogue maps them to: a decimal with its precision, a
date, a timestamp (UTC, or without a zone); a value that does not parse
(``NaN``, ``infinity``, a year past 9999) is a rejected row naming the
column. Types Parquet has no logical type for here (intervals, network
addresses, PostgreSQL's arrays and ranges, enums, uuids, JSON) are kept as
their text.
"""

from __future__ import annotations

from pyspark.sql import types as T

from spark_jobs.engines.base import Column, Kind, Mapped

_MAX_DECIMAL = 38


def parquet_type(column: Column, carrier: T.DataType) -> T.DataType:
    """The Spark type ``column`` (travelling in ``carrier``) is written as."""
    kind = column.kind
    if kind == Kind.DECIMAL and column.precision and column.precision <= _MAX_DECIMAL:
        return T.DecimalType(column.precision, column.scale or 0)
    if kind == Kind.MONEY:
        return T.DecimalType(19, 2)
    if kind == Kind.DATE:
        return T.DateType()
    if kind == Kind.TIMESTAMP:
        return T.TimestampNTZType()
    if kind == Kind.TIMESTAMPTZ:
        return T.TimestampType()
    if kind == Kind.YEAR:
        return T.ShortType()
    if kind == Kind.SET:
        return T.ArrayType(T.StringType())
    return carrier


def mapped(column: Column, carrier: T.DataType) -> Mapped:
    """What ``column`` becomes in Parquet, and what changes, for plans and the README."""
    wanted = parquet_type(column, carrier)
    change = ""
    if wanted != carrier:
        change = ("a value it cannot hold (NaN, ±infinity, BC, a timestamp past 294247) "
                  "is a rejected row")
    elif isinstance(carrier, T.StringType) and column.kind not in (Kind.TEXT, Kind.CHAR):
        change = "kept as its text"
    if column.kind == Kind.SET:
        change = "the members as a list"
    elif column.kind == Kind.BIT:
        change = "kept as its text: every bit a digit (bit(8) 1 is 00000001)"
    return Mapped(wanted.simpleString(), change)
