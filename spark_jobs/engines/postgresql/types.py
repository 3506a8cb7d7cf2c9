"""PostgreSQL's column types: how sluice reads each, and what each other engine's type becomes.

:data:`RULES` is the catalogue, one line per type (by ``pg_type.typname``;
a domain goes by its base type, an array by its element's, with
``array``'s rule). Values travel as themselves where Spark holds every
value of the type (integers, floating point, booleans, text, bytea), and
as PostgreSQL's own text form otherwise: numeric (NaN, any precision),
dates and timestamps (``infinity``, BC, years past 9999), uuid, json,
arrays, intervals, network and geometric types, ranges, enums…, which a
PostgreSQL target parses back in its own column type, unchanged: what
pg_dump does. ``money`` is read as numeric (its text depends on the
server's ``lc_monetary``).

:data:`FROM_KIND` maps a column of another engine into PostgreSQL by its
:class:`~spark_jobs.engines.base.Kind`.
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

_TEXT = "{}::text"


_rule = rule_maker(_TEXT)


RULES: dict[str, TypeRule] = {
    "bool": _rule(Kind.BOOL, T.BooleanType()),
    "int2": _rule(Kind.INT, T.ShortType()),
    "int4": _rule(Kind.INT, T.IntegerType()),
    "int8": _rule(Kind.INT, T.LongType()),
    "oid": _rule(Kind.INT, T.LongType()),
    "float4": _rule(Kind.FLOAT, T.FloatType()),
    "float8": _rule(Kind.FLOAT, T.DoubleType()),
    "numeric": _rule(Kind.DECIMAL),
    "money": _rule(Kind.MONEY, read="{}::numeric", text="{}::numeric::text"),
    "text": _rule(Kind.TEXT),
    "varchar": _rule(Kind.TEXT),
    "name": _rule(Kind.TEXT),
    "citext": _rule(Kind.TEXT),
    "bpchar": _rule(Kind.CHAR),
    "char": _rule(Kind.CHAR),
    "bytea": _rule(Kind.BYTES, T.BinaryType()),
    "uuid": _rule(Kind.UUID),
    "json": _rule(Kind.JSON),
    "jsonb": _rule(Kind.JSON),
    "xml": _rule(Kind.TEXT),
    "date": _rule(Kind.DATE),
    "time": _rule(Kind.TIME),
    "timetz": _rule(Kind.TIMETZ),
    "timestamp": _rule(Kind.TIMESTAMP),
    "timestamptz": _rule(Kind.TIMESTAMPTZ),
    "interval": _rule(Kind.INTERVAL),
    "bit": _rule(Kind.BIT),
    "varbit": _rule(Kind.BIT),
    "inet": _rule(Kind.NETWORK),
    "cidr": _rule(Kind.NETWORK),
    "macaddr": _rule(Kind.NETWORK),
    "macaddr8": _rule(Kind.NETWORK),
    "point": _rule(Kind.GEOMETRY),
    "line": _rule(Kind.GEOMETRY),
    "lseg": _rule(Kind.GEOMETRY),
    "box": _rule(Kind.GEOMETRY),
    "path": _rule(Kind.GEOMETRY),
    "polygon": _rule(Kind.GEOMETRY),
    "circle": _rule(Kind.GEOMETRY),
    "tsvector": _rule(Kind.OTHER),
    "tsquery": _rule(Kind.OTHER),
    "pg_lsn": _rule(Kind.OTHER),
    "jsonpath": _rule(Kind.OTHER),
    "txid_snapshot": _rule(Kind.OTHER),
    "pg_snapshot": _rule(Kind.OTHER),
    "xid8": _rule(Kind.OTHER),
    "enum": _rule(Kind.ENUM),
    "array": _rule(Kind.ARRAY),
    "range": _rule(Kind.RANGE),
    "composite": _rule(Kind.OTHER),
}
"""The catalogue: typname (or ``enum``, ``array``, ``range``, ``composite``) → rule."""

_MAX_NUMERIC = 1000
"""numeric's largest declared precision."""


_OTHER = _rule(Kind.OTHER)


def rule(column: Column) -> TypeRule:
    """The rule of a PostgreSQL ``column``. A type the catalogue does not name (an
    extension's: hstore, ltree, citext's kin) travels as its text, as every PostgreSQL type
    has one that its own input reads back: unchanged into PostgreSQL, kept as text elsewhere."""
    return RULES.get(column.base, _OTHER)


def _numeric(c: Column) -> Mapped:
    if c.precision:
        scale = c.scale or 0
        return Mapped(f"numeric({c.precision},{scale})")
    return Mapped("numeric")


def _text_of(what: str) -> Callable[[Column], Mapped]:
    return lambda c: Mapped("text", f"kept as text ({what})")


def _unsigned(c: Column) -> Mapped:
    # The next wider signed type holds every value; bigint unsigned needs numeric(20).
    bits = {"tinyint": 16, "smallint": 32, "mediumint": 32, "int": 64, "integer": 64}
    wider = bits.get(c.base.split()[0])
    if wider is not None:
        return Mapped({16: "smallint", 32: "integer", 64: "bigint"}[wider])
    return Mapped("numeric(20,0)")


def _integer(c: Column) -> Mapped:
    base = c.base.split()[0]
    if base in ("tinyint", "smallint", "int2"):
        return Mapped("smallint")
    if base in ("mediumint", "int", "integer", "int4"):
        return Mapped("integer")
    return Mapped("bigint")


def _timestamp(c: Column) -> Mapped:
    precision = f"({c.precision})" if c.precision is not None and c.precision < 6 else ""
    return Mapped(f"timestamp{precision}")


def _time(c: Column) -> Mapped:
    # MariaDB's TIME is a duration (up to 838 hours, negative too): an interval holds it.
    return Mapped("interval", "a duration: MariaDB's time is up to ±838:59:59")


VARCHAR_MAX = 10_485_760
"""The longest ``varchar(n)`` PostgreSQL takes."""

_TEXTS = ("tinytext", "text", "mediumtext", "longtext")
"""MySQL's text types: their length is a limit in bytes (up to 4 GiB), not a declared one."""


def _varchar(c: Column) -> Mapped:
    if c.base in _TEXTS or not c.length or c.length > VARCHAR_MAX:
        return Mapped("text")
    return Mapped(f"varchar({c.length})")


def _char(c: Column) -> Mapped:
    return Mapped(f"char({c.length})" if c.length else "text")


def _bit(c: Column) -> Mapped:
    if c.length == 1:
        return Mapped("boolean", "bit(1) as boolean")
    return Mapped(f"bit({c.length})" if c.length else "varbit")


FROM_KIND: dict[Kind, Callable[[Column], Mapped]] = {
    Kind.BOOL: lambda c: Mapped("boolean", "0/1 as false/true; other numbers are rejected rows"
                                if c.base == "bool" else ""),  # fmt: skip
    Kind.INT: _integer,
    Kind.UINT: _unsigned,
    Kind.DECIMAL: _numeric,
    Kind.FLOAT: lambda c: Mapped("real" if c.base in ("float", "float4", "real") else
                                 "double precision"),  # fmt: skip
    Kind.MONEY: lambda c: Mapped("numeric"),
    Kind.TEXT: _varchar,
    Kind.CHAR: _char,
    Kind.BYTES: lambda c: Mapped("bytea"),
    Kind.UUID: lambda c: Mapped("uuid"),
    Kind.JSON: lambda c: Mapped("jsonb", "normalised as jsonb (key order, spaces)"),
    Kind.DATE: lambda c: Mapped("date"),
    Kind.TIME: _time,
    Kind.TIMETZ: lambda c: Mapped("timetz"),
    Kind.TIMESTAMP: _timestamp,
    Kind.TIMESTAMPTZ: lambda c: Mapped("timestamptz"),
    Kind.INTERVAL: lambda c: Mapped("interval"),
    Kind.YEAR: lambda c: Mapped("smallint", "a year as a number"),
    Kind.BIT: _bit,
    Kind.ENUM: lambda c: Mapped(
        "text", "the label as text (cast: enum creates an enum type of its labels)"),
    Kind.SET: lambda c: Mapped("text[]", "the members as an array"),
    Kind.NETWORK: lambda c: Mapped("inet" if c.base in ("inet4", "inet6") else "text"),
    Kind.GEOMETRY: _text_of("its text form"),
    Kind.ARRAY: _text_of("its text form"),
    Kind.RANGE: _text_of("its text form"),
    Kind.OTHER: _text_of("its text form"),
}


def from_kind(column: Column) -> Mapped:
    """The PostgreSQL type a column of another engine becomes, by its kind."""
    mapper = FROM_KIND.get(column.kind)
    if mapper is None:
        raise UnsupportedColumn(f"column {column.name!r} ({column.type}) has no PostgreSQL type")
    return mapper(column)


_SPARK = (
    (T.BooleanType, "boolean"),
    (T.ByteType, "smallint"),
    (T.ShortType, "smallint"),
    (T.IntegerType, "integer"),
    (T.LongType, "bigint"),
    (T.FloatType, "real"),
    (T.DoubleType, "double precision"),
    (T.StringType, "text"),
    (T.VarcharType, "text"),
    (T.CharType, "text"),
    (T.BinaryType, "bytea"),
    (T.DateType, "date"),
    (T.TimestampNTZType, "timestamp"),
    (T.TimestampType, "timestamptz"),
    (T.NullType, "text"),
)


def spark_type(data_type: T.DataType, name: str) -> str:
    """PostgreSQL's type for a batch column known only by its Spark type."""
    if isinstance(data_type, T.DecimalType):
        return f"numeric({data_type.precision},{data_type.scale})"
    if isinstance(data_type, T.ArrayType):
        return f"{spark_type(data_type.elementType, name)}[]"
    for spark, pg in _SPARK:
        if isinstance(data_type, spark):
            return pg
    raise UnsupportedColumn(
        f"column {name!r} has Spark type {data_type.simpleString()}, which sluice cannot create "
        "in a PostgreSQL table; convert it with columns: (for example to_json(...))"
    )


def kind_of(base: str, typtype: str) -> tuple[str, Kind]:
    """The catalogue name and kind of a type by its ``typname`` and ``typtype``."""
    if typtype == "e":
        return "enum", Kind.ENUM
    if typtype in ("r", "m"):
        return "range", Kind.RANGE
    if typtype == "c":
        return "composite", Kind.OTHER
    found = RULES.get(base)
    return base, found.kind if found is not None else Kind.OTHER


def max_precision() -> int:
    """numeric's largest declared precision, for the checks of overrides."""
    return _MAX_NUMERIC


_SPELLED = {
    "smallint": "int2", "integer": "int4", "int": "int4", "bigint": "int8", "real": "float4",
    "double precision": "float8", "decimal": "numeric", "boolean": "bool",
    "character varying": "varchar", "character": "bpchar", "char": "bpchar",
    "timestamp without time zone": "timestamp", "timestamp with time zone": "timestamptz",
    "time without time zone": "time", "time with time zone": "timetz", "bit varying": "varbit",
}
"""How DDL spells a type, by the name the catalogue knows it by (``typname``)."""


def kind_of_type(type_sql: str) -> Kind:
    """The kind of a PostgreSQL type written as DDL (``numeric(20,4)``, ``text[]``)."""
    text = type_sql.strip().lower()
    if text.endswith("[]"):
        return Kind.ARRAY
    base = " ".join(text.split("(")[0].split())
    name = _SPELLED.get(base, base)
    found = RULES.get(name)
    return found.kind if found is not None else Kind.OTHER
