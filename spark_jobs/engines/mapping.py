"""The docs' overview of the type mapping, made from the catalogue itself (``python -m
spark_jobs.engines.mapping`` prints it; ``make docs`` puts it in docs/reference/types.md).

Each row is a source type of an engine, each column a target engine: the type a
target table sluice creates gives it, and what changes on the way (nothing, on
the same engine: the source's own type).
"""

from __future__ import annotations

from typing import Any

from spark_jobs.engines import engine_named
from spark_jobs.engines.base import Column, Engine, Kind, UnsupportedColumn
from spark_jobs.engines.parquet import mapped as parquet_mapped


def _rows(rows: list[tuple[str, str, Kind, dict[str, Any]]]) -> list[tuple[str, str, Kind,
                                                                      dict[str, Any]]]:
    return rows


_PG: list[tuple[str, Column]] = [
    (t, Column("c", t, base, kind, **extra))
    for t, base, kind, extra in _rows([
        ("smallint", "int2", Kind.INT, {}),
        ("integer", "int4", Kind.INT, {}),
        ("bigint", "int8", Kind.INT, {}),
        ("numeric(p,s)", "numeric", Kind.DECIMAL, {"precision": 12, "scale": 2}),
        ("numeric", "numeric", Kind.DECIMAL, {}),
        ("real", "float4", Kind.FLOAT, {}),
        ("double precision", "float8", Kind.FLOAT, {}),
        ("money", "money", Kind.MONEY, {}),
        ("boolean", "bool", Kind.BOOL, {}),
        ("text, varchar(n)", "text", Kind.TEXT, {}),
        ("char(n)", "bpchar", Kind.CHAR, {"length": 5}),
        ("bytea", "bytea", Kind.BYTES, {}),
        ("uuid", "uuid", Kind.UUID, {}),
        ("json, jsonb", "jsonb", Kind.JSON, {}),
        ("date", "date", Kind.DATE, {}),
        ("time", "time", Kind.TIME, {}),
        ("timetz", "timetz", Kind.TIMETZ, {}),
        ("timestamp", "timestamp", Kind.TIMESTAMP, {}),
        ("timestamptz", "timestamptz", Kind.TIMESTAMPTZ, {}),
        ("interval", "interval", Kind.INTERVAL, {}),
        ("bit(n)", "bit", Kind.BIT, {"length": 8}),
        ("varbit", "varbit", Kind.BIT, {}),
        ("inet, cidr, macaddr", "inet", Kind.NETWORK, {}),
        ("point, line, box, path, polygon, circle", "point", Kind.GEOMETRY, {}),
        ("ranges, multiranges", "range", Kind.RANGE, {}),
        ("arrays (text[], int[]…)", "array", Kind.ARRAY, {"element": "text"}),
        ("enum", "enum", Kind.ENUM, {"labels": ("a", "b")}),
        ("domain", "int4", Kind.INT, {}),
        ("xml, tsvector, tsquery, pg_lsn", "xml", Kind.TEXT, {}),
    ])
]
_MYSQL: list[tuple[str, Column]] = [
    (t, Column("c", t, base, kind, **extra))
    for t, base, kind, extra in _rows([
        ("tinyint(1)", "bool", Kind.BOOL, {}),
        ("tinyint, smallint, mediumint, int, bigint", "bigint", Kind.INT, {}),
        ("tinyint … int unsigned", "int unsigned", Kind.UINT, {"unsigned": True}),
        ("bigint unsigned", "bigint unsigned", Kind.UINT, {"unsigned": True}),
        ("decimal(p,s)", "decimal", Kind.DECIMAL, {"precision": 12, "scale": 2}),
        ("float", "float", Kind.FLOAT, {}),
        ("double", "double", Kind.FLOAT, {}),
        ("bit(1)", "bit", Kind.BIT, {"length": 1}),
        ("bit(n)", "bit", Kind.BIT, {"length": 8}),
        ("char(n)", "char", Kind.CHAR, {"length": 5}),
        ("varchar(n), text", "varchar", Kind.TEXT, {"length": 40}),
        ("binary, varbinary, blob", "blob", Kind.BYTES, {}),
        ("date", "date", Kind.DATE, {}),
        ("datetime(n)", "datetime", Kind.TIMESTAMP, {"precision": 6}),
        ("timestamp(n)", "timestamp", Kind.TIMESTAMPTZ, {"precision": 6}),
        ("time(n)", "time", Kind.TIME, {"precision": 6}),
        ("year", "year", Kind.YEAR, {}),
        ("enum", "enum", Kind.ENUM, {"labels": ("a", "b")}),
        ("set", "set", Kind.SET, {"labels": ("a", "b")}),
        ("json", "json", Kind.JSON, {}),
        ("uuid", "uuid", Kind.UUID, {}),
        ("inet4, inet6", "inet4", Kind.NETWORK, {}),
    ])
]
_TARGETS = ("postgresql", "mysql", "sqlite")


def _cell(source: Engine, target: str, column: Column) -> str:
    if target == "parquet":
        mapped = parquet_mapped(column, source.carrier(column))
        shown = mapped.type
    else:
        engine = engine_named(target)
        if engine is source:
            return "the same type"
        try:
            mapped = engine.target_type(column, source)
        except UnsupportedColumn as error:
            return f"refused: {error}"
        shown = f"`{mapped.type}`"
    return shown + (f": {mapped.change}" if mapped.change else "")


def mapping_table() -> str:
    """The mapping as a Markdown table."""
    lines = [
        "| source | type | into PostgreSQL | into MySQL/MariaDB | into SQLite | into Parquet |",
        "|---|---|---|---|---|---|",
    ]
    for name, types in (("postgresql", _PG), ("mysql", _MYSQL)):
        source = engine_named(name)
        label = source.label
        for shown, column in types:
            cells = [_cell(source, t, column) for t in (*_TARGETS, "parquet")]
            lines.append(f"| {label} | `{shown}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(mapping_table())
