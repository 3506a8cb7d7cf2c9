"""MySQL's and MariaDB's column types: how sluice reads each, and what each other engine's
type becomes here.

:data:`RULES` is the catalogue, one line per type (by ``DATA_TYPE``; an
unsigned integer as ``int unsigned``, ``tinyint(1)`` as ``bool``). Values
travel as themselves where Spark holds every value (integers, floating
point, decimals of up to 38 digits, text, bytes) and as the server's text
otherwise, read by the SQL in the rule: dates and times as ``CAST(… AS
CHAR)`` (zero dates, and ``time`` up to ±838 hours, stay as they are), bit
strings as their binary digits, years as numbers.

:data:`FROM_KIND` maps a column of another engine into MySQL by its kind.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import types as T

from spark_jobs.engines.base import (
    Column,
    Kind,
    Mapped,
    TypeRule,
    UnsupportedColumn,
    rule_maker,
)

_CHAR = "CAST({} AS CHAR)"


_rule = rule_maker(_CHAR)


RULES: dict[str, TypeRule] = {
    "bool": _rule(Kind.BOOL, T.ShortType()),
    "tinyint": _rule(Kind.INT, T.ShortType()),
    "smallint": _rule(Kind.INT, T.ShortType()),
    "mediumint": _rule(Kind.INT, T.IntegerType()),
    "int": _rule(Kind.INT, T.IntegerType()),
    "bigint": _rule(Kind.INT, T.LongType()),
    "tinyint unsigned": _rule(Kind.UINT, T.ShortType()),
    "smallint unsigned": _rule(Kind.UINT, T.IntegerType()),
    "mediumint unsigned": _rule(Kind.UINT, T.IntegerType()),
    "int unsigned": _rule(Kind.UINT, T.LongType()),
    "bigint unsigned": _rule(Kind.UINT, T.DecimalType(20, 0)),
    "decimal": _rule(Kind.DECIMAL, None),  # decimal(p,s) up to 38 digits, else text
    # CAST(… AS CHAR) prints 6 digits of a float: two floats would print the same.
    "float": _rule(Kind.FLOAT, T.FloatType(), text="CAST({} AS DOUBLE)"),
    "double": _rule(Kind.FLOAT, T.DoubleType()),
    "char": _rule(Kind.CHAR, read=_CHAR),  # Spark pads what JDBC calls CHAR(n)
    "varchar": _rule(Kind.TEXT),
    "tinytext": _rule(Kind.TEXT),
    "text": _rule(Kind.TEXT),
    "mediumtext": _rule(Kind.TEXT),
    "longtext": _rule(Kind.TEXT),
    "json": _rule(Kind.JSON),
    "binary": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "varbinary": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "tinyblob": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "blob": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "mediumblob": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "longblob": _rule(Kind.BYTES, T.BinaryType(), text="HEX({})"),
    "date": _rule(Kind.DATE, read=_CHAR),
    "datetime": _rule(Kind.TIMESTAMP, read=_CHAR),
    "timestamp": _rule(Kind.TIMESTAMPTZ, read=_CHAR),
    "time": _rule(Kind.TIME, read=_CHAR),
    "year": _rule(Kind.YEAR, read=_CHAR),  # 0000 as text: a number 0 would be 2000
    "enum": _rule(Kind.ENUM, read=_CHAR),
    "set": _rule(Kind.SET, read=_CHAR),
    "uuid": _rule(Kind.UUID, read=_CHAR),
    "inet4": _rule(Kind.NETWORK, read=_CHAR),
    "inet6": _rule(Kind.NETWORK, read=_CHAR),
}
"""The catalogue: ``DATA_TYPE`` (``… unsigned``, ``bool`` for ``tinyint(1)``) → rule."""

_MAX_SPARK_DECIMAL = 38


def rule(column: Column) -> TypeRule:
    """The rule of a MySQL ``column``; a refusing one for a type sluice does not know."""
    if column.base == "decimal":
        if column.precision is not None and column.precision <= _MAX_SPARK_DECIMAL:
            carrier = T.DecimalType(column.precision, column.scale or 0)
            return TypeRule(Kind.DECIMAL, carrier, "{}", _CHAR)
        return TypeRule(Kind.DECIMAL, T.StringType(), _CHAR, _CHAR)
    if column.base == "bit":
        digits = f"LPAD(BIN({{}}), {column.length or 1}, '0')"
        return TypeRule(Kind.BIT, T.StringType(), digits, digits)
    found = RULES.get(column.base)
    if found is not None:
        return found
    return TypeRule(
        Kind.OTHER,
        refused=f"type {column.type} is not in sluice's MySQL catalogue; read it from a view "
        f"that gives it as text (ST_AsText({column.name}) for a geometry) or add a rule for it "
        "in spark_jobs/engines/mysql/types.py",
    )


def _int(c: Column) -> Mapped:
    bits = {"int2": "smallint", "smallint": "smallint", "int4": "int", "integer": "int",
            "int8": "bigint", "bigint": "bigint", "oid": "bigint unsigned"}  # fmt: skip
    return Mapped(bits.get(c.base, "bigint"))


def _decimal(c: Column) -> Mapped:
    if c.precision and c.precision <= 65 and (c.scale or 0) <= 30:
        return Mapped(f"decimal({c.precision},{c.scale or 0})")
    return Mapped("longtext", "kept as text: MySQL's decimal holds 65 digits, 30 after the "
                  "point, and no NaN")  # fmt: skip


def _text(c: Column) -> Mapped:
    return Mapped(f"varchar({c.length})" if c.length and c.length <= 16383 else "longtext")


def _fsp(c: Column) -> str:
    precision = 6 if c.precision is None else min(c.precision, 6)
    return f"({precision})" if precision else ""


def _as_text(what: str) -> Callable[[Column], Mapped]:
    return lambda c: Mapped("longtext", f"kept as text ({what})")


FROM_KIND: dict[Kind, Callable[[Column], Mapped]] = {
    Kind.BOOL: lambda c: Mapped("tinyint(1)", "true/false as 1/0"),
    Kind.INT: _int,
    Kind.UINT: lambda c: Mapped("bigint unsigned"),
    Kind.DECIMAL: _decimal,
    Kind.FLOAT: lambda c: Mapped("float" if c.base in ("float4", "real") else "double",
                                 "NaN and infinities are rejected rows; -0 becomes 0"),
    Kind.MONEY: lambda c: Mapped("decimal(19,2)"),
    Kind.TEXT: _text,
    Kind.CHAR: lambda c: Mapped(f"char({c.length})" if c.length and c.length <= 255 else "longtext",
                                "trailing spaces are not kept"),  # fmt: skip
    Kind.BYTES: lambda c: Mapped("longblob"),
    Kind.UUID: lambda c: Mapped("uuid"),
    Kind.JSON: lambda c: Mapped("json"),
    Kind.DATE: lambda c: Mapped("date", "±infinity and dates before year 1 or past 9999 are "
                                "rejected rows"),  # fmt: skip
    Kind.TIME: lambda c: Mapped(f"time{_fsp(c)}"),
    Kind.TIMETZ: _as_text("with its offset"),
    Kind.TIMESTAMP: lambda c: Mapped(f"datetime{_fsp(c)}", "±infinity and years before 1 or "
                                     "past 9999 are rejected rows"),  # fmt: skip
    Kind.TIMESTAMPTZ: lambda c: Mapped(f"datetime{_fsp(c)}", "in UTC; ±infinity and years "
                                       "before 1 or past 9999 are rejected rows"),  # fmt: skip
    Kind.INTERVAL: _as_text("PostgreSQL's interval text"),
    Kind.YEAR: lambda c: Mapped("year"),
    Kind.BIT: lambda c: Mapped(f"bit({c.length})" if c.length and c.length <= 64 else "longtext"),
    Kind.ENUM: lambda c: Mapped("enum(" + ",".join(_quoted(v) for v in c.labels) + ")")
    if c.labels else Mapped("longtext"),
    Kind.SET: lambda c: Mapped("set(" + ",".join(_quoted(v) for v in c.labels) + ")"),
    Kind.NETWORK: _as_text("its text form"),
    Kind.GEOMETRY: _as_text("its text form"),
    Kind.ARRAY: _as_text("PostgreSQL's array text, {a,b}"),
    Kind.RANGE: _as_text("its text form"),
    Kind.OTHER: _as_text("its text form"),
}


def _quoted(label: str) -> str:
    return "'" + label.replace("\\", "\\\\").replace("'", "''") + "'"


def from_kind(column: Column) -> Mapped:
    """The MySQL type a column of another engine becomes, by its kind."""
    mapper = FROM_KIND.get(column.kind)
    if mapper is None:
        raise UnsupportedColumn(f"column {column.name!r} ({column.type}) has no MySQL type")
    return mapper(column)


_SPARK = (
    (T.BooleanType, "tinyint(1)"),
    (T.ByteType, "tinyint"),
    (T.ShortType, "smallint"),
    (T.IntegerType, "int"),
    (T.LongType, "bigint"),
    (T.FloatType, "float"),
    (T.DoubleType, "double"),
    (T.BinaryType, "longblob"),
    (T.DateType, "date"),
    (T.TimestampNTZType, "datetime(6)"),
    (T.TimestampType, "datetime(6)"),
    (T.StringType, "longtext"),
    (T.NullType, "longtext"),
)


def spark_type(data_type: T.DataType, name: str, key: bool = False) -> str:
    """MySQL's type for a batch column known only by its Spark type (a key's text and bytes
    bounded: MySQL indexes no TEXT or BLOB without a prefix)."""
    if isinstance(data_type, T.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    if key and isinstance(data_type, T.StringType | T.NullType):
        return "varchar(255)"
    if key and isinstance(data_type, T.BinaryType):
        return "varbinary(255)"
    for spark, sql in _SPARK:
        if isinstance(data_type, spark):
            return sql
    raise UnsupportedColumn(
        f"column {name!r} has Spark type {data_type.simpleString()}, which sluice cannot create "
        "in a MySQL table; convert it with columns: (for example to_json(...))"
    )


def kind_of_type(type_sql: str) -> Kind:
    """The kind of a MySQL type written as DDL (``decimal(20,4)``, ``int unsigned``)."""
    text = " ".join(type_sql.strip().lower().split())
    if text.startswith("tinyint(1)") and "unsigned" not in text:
        return Kind.BOOL
    word = text.split("(")[0].split()[0] if text else ""
    if "unsigned" in text and word in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        return Kind.UINT
    if word in ("decimal", "numeric"):
        return Kind.DECIMAL
    if word == "bit":
        return Kind.BIT
    found = RULES.get({"integer": "int", "bool": "bool", "boolean": "bool"}.get(word, word))
    return found.kind if found is not None else Kind.OTHER
