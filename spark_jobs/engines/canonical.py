"""The text verify compares: each side's own text of a value, made neutral across engines.

Verify reads each side as its database prints it (``col::text``, ``CAST(col AS
CHAR)``; see :meth:`~spark_jobs.engines.base.Engine.text_sql`), never through
the import's conversion. Between tables of the same engine, those texts are
compared as they are: any difference is one. Across engines, each side's text
is first put into a neutral form that equal values share, by the column's
:class:`~spark_jobs.engines.base.Kind` (:func:`neutral`): ``true``, ``1`` and
``1`` of a bit are ``1``; ``12.50`` and ``12.5`` are ``12.5``; timestamps lose
trailing zero fractions and PostgreSQL's ``+00`` (both sides print UTC); JSON
is parsed and printed with sorted keys; bytes are lower-case hex; a MySQL
``set`` is an array literal. What the catalogue's mapping changes on the way
is applied to the source side too (a MySQL zero date is NULL elsewhere), so
that a value the import changed in any other way is a difference.

Keys are always compared neutral (:func:`neutral_key` for keys given as values:
the ledger's, ``_sluice_rejects``'), on both sides, so that a key found in one
form matches its value given in another.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column as SparkColumn
from pyspark.sql import types as T

from spark_jobs.engines.base import Column, Kind

_BOOLS = (Kind.BOOL,)
_WHOLE = (Kind.INT, Kind.UINT, Kind.YEAR)
_DECIMALS = (Kind.DECIMAL, Kind.MONEY)
_TIMES = (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ, Kind.TIME, Kind.INTERVAL, Kind.TIMETZ)


def neutral(
    value: SparkColumn, engine: str, column: Column | None, data_type: T.DataType, other: str,
    single: bool = False, peer: Kind | None = None,
) -> SparkColumn:  # fmt: skip
    """``value`` (a side's text of ``column``, of ``engine``; or a value of Spark type
    ``data_type`` when the side is Parquet or the column is computed) in the neutral form
    of the module. ``other``: the other side's engine, ``peer`` its column's kind;
    ``single``: either side's column is single-precision floating point."""
    if column is None or not isinstance(data_type, T.StringType):
        return _typed(value, data_type, single)
    kind = column.kind
    if kind == Kind.FLOAT and {"mysql", "sqlite"} & {engine, other}:
        value = F.regexp_replace(value, r"^-0(\.0*)?(e.*)?$", "0")  # they keep no -0
    if engine == "mysql" and other != "mysql" and kind in (Kind.DATE, Kind.TIMESTAMP,
                                                           Kind.TIMESTAMPTZ):  # fmt: skip
        value = F.when(~value.rlike(r"^[0-9]{4}-(00-|[0-9]{2}-00)"), value)  # zero dates: NULL
    if kind in _BOOLS or (kind == Kind.BIT and column.length == 1):
        return F.when(value.isin("t", "true", "1"), F.lit("1")).when(
            value.isin("f", "false", "0"), F.lit("0")).otherwise(value)  # fmt: skip
    if kind in _WHOLE:
        return F.regexp_replace(value, r"^(-?)0+([0-9])", "$1$2")
    if kind in _DECIMALS:
        return _decimal(value)
    if kind == Kind.FLOAT:
        return _float(value.cast("double"), single)
    if kind == Kind.BYTES:
        return F.lower(F.regexp_replace(value, r"^\\x", ""))
    if kind in _TIMES:
        return _time(F.regexp_replace(value, r"\+00$", ""))
    if kind == Kind.JSON:
        return _json(value)
    if kind == Kind.UUID:
        return F.lower(value)
    if kind == Kind.SET:
        return F.concat(F.lit("{"), value, F.lit("}"))
    if kind == Kind.ARRAY and peer == Kind.SET:
        return F.regexp_replace(value, r'(?<!\\)"', "")  # a set's members: no quotes
    if kind == Kind.NETWORK and column.base in ("inet", "inet4", "inet6"):
        # An address's full prefix length, which only inet::text shows.
        return F.regexp_replace(F.regexp_replace(value, r"^([0-9.]+)/32$", "$1"),
                                r"^([0-9a-fA-F:.]*:[0-9a-fA-F:.]*)/128$", "$1")  # fmt: skip
    if kind == Kind.CHAR:
        return F.rtrim(value)
    return value


def _typed(value: SparkColumn, data_type: T.DataType, single: bool) -> SparkColumn:
    """A value Spark holds in its own type (a Parquet column, a computed one), neutral."""
    if isinstance(data_type, T.BooleanType):
        return F.when(value, F.lit("1")).when(~value, F.lit("0"))
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return _float(value, single or isinstance(data_type, T.FloatType))
    if isinstance(data_type, T.DecimalType):
        return _decimal(value.cast("string"))
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return _time(F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS"))
    if isinstance(data_type, T.DateType):
        # Not date_format: it goes through a timestamp, which ends in year 294247.
        return F.regexp_replace(value.cast("string"), r"^\+", "")
    if isinstance(data_type, T.BinaryType):
        return F.lower(F.hex(value))
    if isinstance(data_type, T.ArrayType):  # concat_ws makes "" of a NULL list
        return F.when(value.isNotNull(), F.concat(F.lit("{"), F.concat_ws(",", value),
                                                  F.lit("}")))  # fmt: skip
    if isinstance(data_type, T.MapType | T.StructType):
        return F.to_json(value)
    return value.cast("string")


def _json(text: SparkColumn) -> SparkColumn:
    """A JSON text as Spark prints it parsed (keys sorted, no spaces); else as it is."""
    return F.coalesce(F.to_json(F.try_parse_json(text)), text)


def _decimal(text: SparkColumn) -> SparkColumn:
    trimmed = F.regexp_replace(text, r"(\.[0-9]*?)0+$", "$1")
    return F.regexp_replace(F.regexp_replace(trimmed, r"\.$", ""), r"^-0$", "0")


def _float(value: SparkColumn, single: bool) -> SparkColumn:
    return value.cast("float" if single else "double").cast("string")


def _time(text: SparkColumn) -> SparkColumn:
    """A date, time or timestamp's text without trailing zero fractions."""
    return F.regexp_replace(F.regexp_replace(text, r"(\.[0-9]*?)0+($| )", "$1$2"), r"\.($| )",
                            "$1")  # fmt: skip


def neutral_key(value: Any) -> str | None:
    """A key's value as it was given (JSON of the ledger, of ``_sluice_rejects``), in the
    neutral form of the module, as :func:`neutral` puts a side's key."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return _plain(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return _strip_fraction(value.isoformat(sep=" "))
    if isinstance(value, dt.date):
        return value.isoformat()
    text = str(value)
    parsed = _as_timestamp(text)
    if parsed is not None:
        return neutral_key(parsed)
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return text.lower() if _is_uuid(text) else text
    return _plain(number) if number.is_finite() else text


def _plain(number: decimal.Decimal) -> str:
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _strip_fraction(text: str) -> str:
    head, dot, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return head + ("." + fraction if fraction else "")


def _as_timestamp(text: str) -> dt.datetime | None:
    if len(text) < 19 or text[4] != "-" or text[10] not in " T":
        return None
    try:
        return dt.datetime.fromisoformat(text.removesuffix("+00") if text.endswith("+00")
                                         else text)  # fmt: skip
    except ValueError:
        return None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36
