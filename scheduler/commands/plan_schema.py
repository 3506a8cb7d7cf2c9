"""``sluice plan``'s schema objects: what each source table has beyond its columns, what each
becomes in its target and when it is built; or, for a table that exists, what it lacks.

An object with no translation into its target is an error here, before the
first batch (``sluice run`` refuses to start on it), naming the object and the
fix: skip it, or give its definition, under the source's ``schema:``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from config.models import SluiceConfig
from spark_jobs.engines.objects import ObjectKind, Planned, Stage
from spark_jobs.schema.compare import absent, read_tables
from spark_jobs.schema.plan import TablePlan, plan_schema


@dataclass
class SchemaPlan:
    """Every source table's objects, and what each existing target table lacks."""

    tables: list[TablePlan] = field(default_factory=list)
    lacking: dict[str, list[Planned]] = field(default_factory=dict)
    note: str | None = None  # why nothing could be read

    @property
    def errors(self) -> list[str]:
        """Each object with no way into its target, with the fix."""
        return [problem for plan in self.tables for problem in plan.problems]


def schema_plan(cfg: SluiceConfig) -> SchemaPlan:
    """Read every source table's objects and each existing target table's (read-only)."""
    try:
        tables = plan_schema(cfg)
        lacking: dict[str, list[Planned]] = {}
        by_url: dict[str, list[TablePlan]] = {}
        for plan in tables:
            if plan.note is None and plan.made is not None:
                by_url.setdefault(plan.target_url, []).append(plan)
        for url, plans in by_url.items():
            there = read_tables(url, {p.target_table for p in plans})
            for plan in plans:
                lacking[plan.source] = absent(plan, there.get(plan.target_table), tuple(Stage))
    except sa.exc.SQLAlchemyError as error:
        cause = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        return SchemaPlan(note=f"unreadable: {cause}")
    return SchemaPlan(tables, lacking)


def render_schema(found: SchemaPlan) -> list[str]:
    """The schema section of ``sluice plan``."""
    if found.note is not None:
        return [f"schema objects: {found.note}"]
    if not found.tables:
        return []
    lines = ["schema objects (source object -> what the target gets, and when):"]
    for plan in found.tables:
        target = ".".join((plan.target, *plan.target_table))
        if plan.note is not None:
            lines.append(f"  {plan.source} -> {target}: {plan.note}")
            continue
        missing = {id(p) for p in found.lacking.get(plan.source, [])}
        whose = {None: "made by sluice at its first batch", True: "made by sluice",
                 False: "the operator's: compared, nothing built"}[plan.made]  # fmt: skip
        lines.append(f"  {plan.source} -> {target} ({whose})")
        width = max((len(p.label) for p in plan.planned), default=0)
        lines += [f"    {item.label:<{width}}  {_line(plan, item, id(item) in missing)}"
                  for item in plan.planned]  # fmt: skip
        if not plan.planned:
            lines.append("    (columns and key only)")
    return lines


def _line(plan: TablePlan, item: Planned, missing: bool) -> str:
    shown = item.source.definition.replace("\n", " ")
    if item.skipped is not None:
        return f"{shown}: skipped ({item.skipped})"
    if item.problem is not None:
        return f"{shown}: ERROR: {item.problem}"
    becomes = "" if item.becomes in ("", "as on the source") else f" -> {item.becomes}"
    if item.source.note and item.source.kind != ObjectKind.TRIGGER:
        becomes += f" ({item.source.note})"
    if plan.made is False:
        return f"{shown}{becomes}: {'LACKING in the target' if missing else 'there'}"
    if plan.made and not missing:
        return f"{shown}{becomes}: built"
    return f"{shown}{becomes}: {item.stage}"
