"""What a target table lacks of its source table's schema objects, by definition.

The target's objects are read with its engine's own introspection and shown
as its catalogue shows them (:meth:`Engine.signature`: an index's method,
columns and predicate, a constraint's definition, a foreign key's columns,
parent and actions…), names aside, so that an index the operator made under
another name counts. An object the config defines in its own SQL is looked
for by its name. One object of the target answers for one of the source's
(two identical indexes in the source need two).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from spark_jobs.engines import engine_of
from spark_jobs.engines.objects import Planned, Stage, TableName, TableObjects
from spark_jobs.schema.plan import TablePlan


def lacking(
    plans: Iterable[TablePlan], stages: Iterable[Stage] = tuple(Stage)
) -> dict[str, list[Planned]]:
    """Per source, the objects of ``stages`` its target table lacks (tables not there yet
    lack everything; skipped objects and those with no translation are not counted)."""
    wanted = tuple(stages)
    plans = [p for p in plans if p.note is None]
    found = _read_targets(plans)
    missing: dict[str, list[Planned]] = {}
    for plan in plans:
        there = found.get(plan.target_url, {}).get(plan.target_table)
        missing[plan.source] = absent(plan, there, wanted)
    return missing


def absent(plan: TablePlan, there: TableObjects | None, stages: Iterable[Stage]) -> list[Planned]:
    """The objects of ``plan`` due at ``stages`` that ``there`` (the target table's objects,
    None: no table) does not have."""
    due = plan.due(*stages)
    if there is None:
        return due
    into = engine_of(plan.target_url)
    shown: Counter[Hashable] = Counter(into.signature(obj) for obj in there.objects)
    named = {(obj.kind, obj.name) for obj in there.objects}
    missing = []
    for item in due:
        if item.signature is not None and shown[item.signature] > 0:
            shown[item.signature] -= 1
        elif item.signature is None and (item.source.kind, item.source.name) in named:
            continue
        else:
            missing.append(item)
    return missing


def _read_targets(plans: list[TablePlan]) -> dict[str, dict[TableName, TableObjects]]:
    by_url: dict[str, set[TableName]] = defaultdict(set)
    for plan in plans:
        by_url[plan.target_url].add(plan.target_table)
    found: dict[str, dict[TableName, TableObjects]] = {}
    for url, tables in by_url.items():
        found[url] = read_tables(url, tables)
    return found


def read_tables(url: str, tables: Iterable[TableName]) -> dict[TableName, TableObjects]:
    """The schema objects of ``tables`` (schemas resolved) in the database at ``url``."""
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            read = engine_of(url).read_objects(conn, sorted(tables))
    finally:
        engine.dispose()
    return {(s or "", t): objects for (s, t), objects in read.items()}
