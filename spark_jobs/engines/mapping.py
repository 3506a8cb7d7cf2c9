"""The docs' overview of the type mapping, made from the catalogue itself (``python -m
spark_jobs.engines.mapping`` prints it; ``make docs`` puts it in docs/reference/types.md).

Each row is a source type of an engine, each column a target engine: the type a
target table sluice creates gives it, and what changes on the way (nothing, on
the same engine: the source's own type). Every type a row names is computed on
its own, from a column declared as the row shows it (``varchar(40)``, ``text``,
``datetime(6)``) and described as the engine's introspection describes it (a
MySQL ``text`` has a length of 65,535, as ``information_schema`` says): types
whose cells agree share a row, so a row is true for each type it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_jobs.engines import engine_named
from spark_jobs.engines.base import Column, Engine, Kind, UnsupportedColumn
from spark_jobs.engines.parquet import mapped as parquet_mapped

Sample = tuple[str, str, Kind, dict[str, Any]]
"""A column as declared (``type``), its catalogue name (``base``), its kind, and what else
introspection says of it (length, precision, scale, labels…)."""

_PG: list[list[Sample]] = [
    [("smallint", "int2", Kind.INT, {}), ("integer", "int4", Kind.INT, {}),
     ("bigint", "int8", Kind.INT, {})],
    [("numeric(12,2)", "numeric", Kind.DECIMAL, {"precision": 12, "scale": 2}),
     ("numeric", "numeric", Kind.DECIMAL, {})],
    [("real", "float4", Kind.FLOAT, {}), ("double precision", "float8", Kind.FLOAT, {})],
    [("money", "money", Kind.MONEY, {})],
    [("boolean", "bool", Kind.BOOL, {})],
    [("text", "text", Kind.TEXT, {}), ("varchar", "varchar", Kind.TEXT, {}),
     ("varchar(40)", "varchar", Kind.TEXT, {"length": 40}),
     ("varchar(20000)", "varchar", Kind.TEXT, {"length": 20_000})],
    [("char(5)", "bpchar", Kind.CHAR, {"length": 5})],
    [("bytea", "bytea", Kind.BYTES, {})],
    [("uuid", "uuid", Kind.UUID, {})],
    [("json", "json", Kind.JSON, {}), ("jsonb", "jsonb", Kind.JSON, {})],
    [("date", "date", Kind.DATE, {})],
    [("time", "time", Kind.TIME, {}), ("timetz", "timetz", Kind.TIMETZ, {})],
    [("timestamp", "timestamp", Kind.TIMESTAMP, {}),
     ("timestamptz", "timestamptz", Kind.TIMESTAMPTZ, {})],
    [("interval", "interval", Kind.INTERVAL, {})],
    [("bit(8)", "bit", Kind.BIT, {"length": 8}), ("varbit", "varbit", Kind.BIT, {})],
    [("inet", "inet", Kind.NETWORK, {}), ("cidr", "cidr", Kind.NETWORK, {}),
     ("macaddr", "macaddr", Kind.NETWORK, {})],
    [(t, t, Kind.GEOMETRY, {}) for t in ("point", "line", "box", "path", "polygon", "circle")],
    [("int4range", "range", Kind.RANGE, {}), ("tstzmultirange", "range", Kind.RANGE, {})],
    [("text[]", "array", Kind.ARRAY, {"element": "text", "dims": 1}),
     ("integer[]", "array", Kind.ARRAY, {"element": "int4", "dims": 1})],
    [("an enum of 'a', 'b'", "enum", Kind.ENUM, {"labels": ("a", "b")})],
    [("a domain over integer", "int4", Kind.INT, {})],
    [("xml", "xml", Kind.TEXT, {})],
    [(t, t, Kind.OTHER, {}) for t in ("tsvector", "tsquery", "pg_lsn")],
]
"""PostgreSQL's usual types, in groups of kin."""

MYSQL_LENGTHS = {"tinytext": 255, "text": 65_535, "mediumtext": 16_777_215,
                 "longtext": 4_294_967_295, "tinyblob": 255, "blob": 65_535,
                 "mediumblob": 16_777_215, "longblob": 4_294_967_295}
"""The length ``information_schema.COLUMNS`` gives MySQL's text and blob types (what
``catalog.column_of`` reads into :attr:`Column.length`): a ``text`` is 65,535 long."""

_MYSQL: list[list[Sample]] = [
    [("tinyint(1)", "bool", Kind.BOOL, {})],
    [(t, t, Kind.INT, {}) for t in ("tinyint", "smallint", "mediumint", "int", "bigint")],
    [(f"{t} unsigned", f"{t} unsigned", Kind.UINT, {"unsigned": True})
     for t in ("tinyint", "smallint", "mediumint", "int", "bigint")],
    [("decimal(12,2)", "decimal", Kind.DECIMAL, {"precision": 12, "scale": 2}),
     ("decimal(50,10)", "decimal", Kind.DECIMAL, {"precision": 50, "scale": 10})],
    [("float", "float", Kind.FLOAT, {}), ("double", "double", Kind.FLOAT, {})],
    [("bit(1)", "bit", Kind.BIT, {"length": 1}), ("bit(8)", "bit", Kind.BIT, {"length": 8})],
    [("char(5)", "char", Kind.CHAR, {"length": 5})],
    [("varchar(40)", "varchar", Kind.TEXT, {"length": 40}),
     *[(t, t, Kind.TEXT, {"length": MYSQL_LENGTHS[t]})
       for t in ("tinytext", "text", "mediumtext", "longtext")]],
    [("binary(4)", "binary", Kind.BYTES, {"length": 4}),
     ("varbinary(8)", "varbinary", Kind.BYTES, {"length": 8}),
     ("blob", "blob", Kind.BYTES, {"length": MYSQL_LENGTHS["blob"]})],
    [("date", "date", Kind.DATE, {})],
    [("datetime", "datetime", Kind.TIMESTAMP, {"precision": 0}),
     ("datetime(3)", "datetime", Kind.TIMESTAMP, {"precision": 3}),
     ("datetime(6)", "datetime", Kind.TIMESTAMP, {"precision": 6})],
    [("timestamp", "timestamp", Kind.TIMESTAMPTZ, {"precision": 0}),
     ("timestamp(6)", "timestamp", Kind.TIMESTAMPTZ, {"precision": 6})],
    [("time", "time", Kind.TIME, {"precision": 0}),
     ("time(6)", "time", Kind.TIME, {"precision": 6})],
    [("year", "year", Kind.YEAR, {})],
    [("enum('a','b')", "enum", Kind.ENUM, {"labels": ("a", "b")})],
    [("set('a','b')", "set", Kind.SET, {"labels": ("a", "b")})],
    [("json", "json", Kind.JSON, {})],
    [("uuid", "uuid", Kind.UUID, {})],
    [("inet4", "inet4", Kind.NETWORK, {}), ("inet6", "inet6", Kind.NETWORK, {})],
]
"""MySQL's and MariaDB's usual types, in groups of kin (bases as ``catalog.column_of``
names them: ``bool`` for ``tinyint(1)``, ``int unsigned``…)."""

_TARGETS = ("postgresql", "mysql", "sqlite", "parquet")
_HEAD = [
    "| source | type | into PostgreSQL | into MySQL/MariaDB | into SQLite | into Parquet |",
    "|---|---|---|---|---|---|",
]


def sample(declared: str, base: str, kind: Kind, extra: dict[str, Any]) -> Column:
    """A column named ``c`` of the declared type, as introspection would describe it."""
    return Column("c", declared, base, kind, **extra)


def _cell(source: Engine, target: str, column: Column) -> str:
    try:
        if target == "parquet":
            mapped = parquet_mapped(column, source.carrier(column))
            shown = mapped.type
        else:
            engine = engine_named(target)
            if engine is source:
                return "the same type"
            mapped = engine.target_type(column, source)
            shown = f"`{mapped.type}`"
    except UnsupportedColumn as error:
        return f"refused: {error}"
    return (shown + (f": {mapped.change}" if mapped.change else "")).replace("|", "\\|")


def rows(source: Engine, groups: Sequence[Sequence[Sample]]) -> list[tuple[list[str], list[str]]]:
    """Each group's types, merged where their cells agree: (types, cells) per row."""
    found: list[tuple[list[str], list[str]]] = []
    for group in groups:
        merged: list[tuple[list[str], list[str]]] = []
        for declared, base, kind, extra in group:
            column = sample(declared, base, kind, extra)
            cells = [_cell(source, target, column) for target in _TARGETS]
            same = next((row for row in merged if row[1] == cells), None)
            if same is None:
                merged.append(([declared], cells))
            else:
                same[0].append(declared)
        found += merged
    return found


def mapping_table() -> str:
    """The mapping as a Markdown table."""
    lines = list(_HEAD)
    for name, groups in (("postgresql", _PG), ("mysql", _MYSQL)):
        source = engine_named(name)
        for types, cells in rows(source, groups):
            shown = ", ".join(f"`{t}`" for t in types)
            lines.append(f"| {source.label} | {shown} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(mapping_table())
