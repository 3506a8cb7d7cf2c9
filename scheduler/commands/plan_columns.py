"""``sluice plan``'s columns: what each source column becomes in its target, found before
any batch runs.

For each SQL source, each column of its table as the source engine's catalogue
describes it: the type it gets in a target table sluice creates, and what
changes on the way (the catalogue's mapping); or, for a target table that
exists, the table's own column it goes into. What cannot work is an error
here, before the first batch: a type the catalogue cannot read, a column the
target table lacks, a column whose values can never be the table's (a uuid
into an integer). Read-only, as the rest of the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from config.models import JdbcTargetConfig, ParquetTargetConfig, SluiceConfig, SqlSourceConfig
from config.models import split_target as split
from scheduler.readonly import readonly_engine
from spark_jobs.engines import catalogued, engine_of
from spark_jobs.engines.base import Column, Engine, Kind
from spark_jobs.engines.fit import fits
from spark_jobs.engines.parquet import mapped as parquet_mapped
from spark_jobs.load.batch_columns import is_enum_cast


@dataclass(frozen=True)
class ColumnLine:
    """One source column: its type, the target's, what changes, or why it cannot go."""

    column: str
    source_type: str
    target_type: str = ""
    change: str = ""
    error: str | None = None


@dataclass(frozen=True)
class SourceColumns:
    """A source's columns, or why they could not be looked at (``note``: nothing to say)."""

    source: str
    target: str
    lines: list[ColumnLine] = field(default_factory=list)
    note: str | None = None

    @property
    def errors(self) -> list[str]:
        """Each column that cannot go, with why."""
        return [f"{self.source}: column {c.column!r}: {c.error}" for c in self.lines if c.error]


def column_plans(cfg: SluiceConfig) -> list[SourceColumns]:
    """What each SQL source's columns become in its target (see the module)."""
    plans = []
    for name, src in cfg.sources.items():
        if not isinstance(src, SqlSourceConfig):
            continue
        if src.columns:
            plans.append(SourceColumns(name, src.target, note="columns: computes the rows that go "
                                       "in (their types are their Spark types)"))  # fmt: skip
            continue
        if not catalogued(src.url):
            plans.append(SourceColumns(name, src.target, note="read by its Spark JDBC types"))
            continue
        engine = readonly_engine(src.url)
        if engine is None:
            continue  # the backlog says the file is missing
        try:
            plans.append(_plan(cfg, name, src, engine))
        except sa.exc.SQLAlchemyError as error:
            cause = str(getattr(error, "orig", None) or error).splitlines()[0]
            plans.append(SourceColumns(name, src.target, note=f"unreadable: {cause}"))
        finally:
            engine.dispose()
    return plans


def _plan(cfg: SluiceConfig, name: str, src: SqlSourceConfig, engine: sa.Engine) -> SourceColumns:
    source = engine_of(src.url)
    schema, _, table = src.table.rpartition(".")
    with engine.connect() as conn:
        columns = source.describe(conn, schema or None, table)
    if not columns:
        return SourceColumns(name, src.target, note=f"no table {src.table}")
    target_name, target_schema, target_table = split(src.target)
    target_cfg = cfg.targets.get(target_name)
    if isinstance(target_cfg, ParquetTargetConfig):
        return SourceColumns(name, src.target, [_into_parquet(source, c) for c in columns])
    if not isinstance(target_cfg, JdbcTargetConfig) or not catalogued(target_cfg.url):
        return SourceColumns(name, src.target, note="target's types: its Spark JDBC types")
    target = engine_of(target_cfg.url)
    existing = _existing(target_cfg.url, target, target_schema, target_table)
    if existing is None:
        cast = src.cast or {}
        return SourceColumns(name, src.target, [_created(source, target, c, cast.get(c.name))
                                                for c in columns])  # fmt: skip
    return SourceColumns(name, src.target, [_into(source, c, existing) for c in columns])


def _existing(
    url: str, target: Engine, schema: str | None, table: str
) -> dict[str, Column] | None:
    engine = readonly_engine(url)
    if engine is None:
        return None
    try:
        with engine.connect() as conn:
            found = target.describe(conn, schema, table)
    finally:
        engine.dispose()
    return {c.name.lower(): c for c in found} if found else None


def _refused(source: Engine, column: Column) -> str | None:
    rule = source.rule(column)
    return rule.refused


def _created(source: Engine, target: Engine, column: Column, cast: str | None) -> ColumnLine:
    refused = _refused(source, column)
    if refused is not None:
        return ColumnLine(column.name, column.type, error=refused)
    if is_enum_cast(cast):
        if column.kind != Kind.ENUM or not column.labels or not target.named_enums:
            return ColumnLine(column.name, column.type, "enum", error=(
                f"cast: enum creates a PostgreSQL enum type of an enum column's labels; "
                f"{column.type} into {target.name} is not one"))  # fmt: skip
        labels = ", ".join(column.labels)
        return ColumnLine(column.name, column.type, f"enum ({labels})",
                          "cast: an enum type of the source's labels, created")
    if cast is not None:
        if not fits(column.kind, target.kind_of_type(cast)):
            return ColumnLine(column.name, column.type, cast, error=(
                f"cast: {cast} cannot hold the source's {column.type} values"))  # fmt: skip
        return ColumnLine(column.name, column.type, cast, "cast: (the config's type)")
    try:
        mapped = target.target_type(column, source)
    except Exception as error:  # noqa: BLE001 - the column's line says why
        return ColumnLine(column.name, column.type, error=str(error))
    change = mapped.change if source.name != target.name else ""
    if column.generated:
        change = "; ".join(p for p in (change, "generated in the source: its values copied")
                           if p)  # fmt: skip
    return ColumnLine(column.name, column.type, mapped.type, change)


def _into(source: Engine, column: Column, existing: dict[str, Column]) -> ColumnLine:
    refused = _refused(source, column)
    if refused is not None:
        return ColumnLine(column.name, column.type, error=refused)
    found = existing.get(column.name.lower())
    if found is None:
        return ColumnLine(column.name, column.type, error="not in the target table (add it to "
                          "the table, or map the batch's columns with columns:)")  # fmt: skip
    if found.generated:
        return ColumnLine(column.name, column.type, found.type, "computed by the target table")
    if not fits(column.kind, found.kind):
        return ColumnLine(column.name, column.type, found.type, error=(
            f"{found.type} in the target table, and no {column.type} value is one; change "
            "the table's column, or convert the values with columns:"))  # fmt: skip
    change = "" if column.type.lower() == found.type.lower() else "parsed in the table's type"
    if found.identity == "always":
        change = "; ".join(p for p in (change, "identity: the source's values") if p)
    return ColumnLine(column.name, column.type, found.type, change)


def _into_parquet(source: Engine, column: Column) -> ColumnLine:
    refused = _refused(source, column)
    if refused is not None:
        return ColumnLine(column.name, column.type, error=refused)
    mapped = parquet_mapped(column, source.carrier(column))
    return ColumnLine(column.name, column.type, mapped.type, mapped.change)


def render_columns(plans: list[SourceColumns]) -> list[str]:
    """The columns section of ``sluice plan``."""
    if not plans:
        return []
    lines = ["columns (source type -> target type, and what changes):"]
    for plan in plans:
        lines.append(f"  {plan.source} -> {plan.target}" + (f": {plan.note}" if plan.note else ""))
        width = max((len(c.column) for c in plan.lines), default=0)
        for c in plan.lines:
            if c.error is not None:
                lines.append(f"    {c.column:<{width}}  {c.source_type}: ERROR: {c.error}")
                continue
            change = f"  ({c.change})" if c.change else ""
            lines.append(f"    {c.column:<{width}}  {c.source_type} -> {c.target_type}{change}")
    return lines
