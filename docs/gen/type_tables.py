"""The type and schema mapping pages' tables, made from the engines' catalogues.

- :func:`catalogue_table`: every type of a source engine's catalogue
  (``spark_jobs/engines/<engine>/types.py``, ``RULES``), what it is, and what a
  table sluice creates makes of it in each target engine;
- the overview of the usual types (:func:`spark_jobs.engines.mapping.mapping_table`)
  and the schema objects from MariaDB into PostgreSQL
  (:func:`spark_jobs.engines.objects_mapping.objects_table`), as the code prints them.
"""

from __future__ import annotations

from spark_jobs.engines import engine_named
from spark_jobs.engines.base import Column, Engine, Kind, UnsupportedColumn
from spark_jobs.engines.mapping import MYSQL_LENGTHS, mapping_table
from spark_jobs.engines.mysql.types import RULES as MYSQL_RULES
from spark_jobs.engines.objects_mapping import objects_table
from spark_jobs.engines.parquet import mapped as parquet_mapped
from spark_jobs.engines.postgresql.types import RULES as POSTGRESQL_RULES

CATALOGUES = {"postgresql": POSTGRESQL_RULES, "mysql": MYSQL_RULES}
"""Each source engine's catalogue: its type names → their rules."""

TARGETS = (("postgresql", "PostgreSQL"), ("mysql", "MySQL/MariaDB"), ("sqlite", "SQLite"),
           ("parquet", "Parquet"))  # fmt: skip

_SAMPLE: dict[Kind, dict[str, object]] = {
    Kind.DECIMAL: {"precision": 12, "scale": 2},
    Kind.CHAR: {"length": 5},
    Kind.BIT: {"length": 8},
    Kind.ENUM: {"labels": ("a", "b")},
    Kind.SET: {"labels": ("a", "b")},
    Kind.ARRAY: {"element": "text"},
    Kind.UINT: {"unsigned": True},
}
"""What a sample column of each kind is declared with (``numeric(12,2)``, ``char(5)``…)."""


def sample_column(engine: str, name: str) -> Column:
    """A column of catalogue type ``name`` of ``engine``, declared as the tables show."""
    kind = CATALOGUES[engine][name].kind
    extra = dict(_SAMPLE.get(kind, {}))
    if name in ("numeric", "varbit", "varchar"):
        extra = {}  # declared without a precision or length (numeric(p,s) is in the overview)
    if engine == "mysql" and name == "varchar":
        extra = {"length": 40}  # MySQL's varchar always has one
    if engine == "mysql" and name in MYSQL_LENGTHS:
        extra["length"] = MYSQL_LENGTHS[name]  # as information_schema describes the column
    if engine == "mysql" and kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ, Kind.TIME):
        extra["precision"] = 6
    return Column("c", name, name, kind, **extra)  # type: ignore[arg-type]


def cell(source: Engine, target: str, column: Column) -> str:
    """What ``column`` of ``source`` becomes in a created table of ``target``."""
    try:
        if target == "parquet":
            mapped = parquet_mapped(column, source.carrier(column))
            shown = f"`{mapped.type}`"
        elif engine_named(target) is source:
            return "the same type"
        else:
            mapped = engine_named(target).target_type(column, source)
            shown = f"`{mapped.type}`"
    except UnsupportedColumn as error:
        return f"refused: {error}"
    return (shown + (f": {mapped.change}" if mapped.change else "")).replace("|", "\\|")


def catalogue_table(engine: str) -> str:
    """Every type of ``engine``'s catalogue as a Markdown table, one column per target."""
    source = engine_named(engine)
    head = " | ".join(f"into {label}" for _, label in TARGETS)
    lines = [f"| type | what it is | {head} |", "|---|---|" + "---|" * len(TARGETS)]
    for name in CATALOGUES[engine]:
        column = sample_column(engine, name)
        cells = " | ".join(cell(source, target, column) for target, _ in TARGETS)
        lines.append(f"| `{name}` | {column.kind.value} | {cells} |")
    return "\n".join(lines)


def catalogue_types() -> dict[str, list[str]]:
    """Each source engine → its catalogue's type names (for the docs test)."""
    return {engine: list(rules) for engine, rules in CATALOGUES.items()}


GENERATED = {
    "types-overview": mapping_table,
    "types-postgresql": lambda: catalogue_table("postgresql"),
    "types-mysql": lambda: catalogue_table("mysql"),
    "schema-objects": objects_table,
}
"""The tables a page asks for by name (``<!-- generated: NAME -->``)."""
