"""The cutover's last step before READY: every target sequence set after its source's.

With the application's writes stopped, each column that draws from a
sequence in the source (serial, identity, ``AUTO_INCREMENT``) gets its target
sequence set so that the application's first insert without a key takes the
value after the source's last one, and after the largest key migrated: in
the tables sluice made and in tables the operator made alike (a target made
from a schema-only dump has its sequences at 1).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from spark_jobs.engines import engine_of
from spark_jobs.engines.objects import ObjectKind, SchemaObject
from spark_jobs.schema.compare import read_tables
from spark_jobs.schema.plan import TablePlan

_DRAWS = (ObjectKind.SEQUENCE, ObjectKind.IDENTITY)


@dataclass
class SequencesSet:
    """What the cutover set (a line per sequence) and what it could not."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def set_sequences(plans: Iterable[TablePlan]) -> SequencesSet:
    """Set the target sequence of every column of ``plans`` that draws from one in its source."""
    report = SequencesSet()
    wanted = [(p, item.source) for p in plans if p.note is None for item in p.planned
              if item.source.kind in _DRAWS and item.skipped is None]  # fmt: skip
    if not wanted:
        return report
    by_source: dict[str, list[tuple[TablePlan, SchemaObject]]] = defaultdict(list)
    for plan, obj in wanted:
        by_source[plan.source_url].append((plan, obj))
    positions: dict[int, int | None] = {}
    for url, pairs in by_source.items():
        found = _positions(url, [obj for _, obj in pairs])
        positions.update({id(obj): value for (_, obj), value in zip(pairs, found, strict=True)})
    by_target: dict[str, list[tuple[TablePlan, SchemaObject]]] = defaultdict(list)
    for plan, obj in wanted:
        by_target[plan.target_url].append((plan, obj))
    for url, pairs in by_target.items():
        there = read_tables(url, {plan.target_table for plan, _ in pairs})
        into = engine_of(url)
        engine = sa.create_engine(url, poolclass=NullPool)
        try:
            for plan, obj in pairs:
                table = there.get(plan.target_table)
                own = [o for o in (table.objects if table is not None else [])
                       if o.kind in _DRAWS and o.name == obj.name]  # fmt: skip
                where = f"{plan.source}: column {obj.name!r}"
                if not own:
                    report.problems.append(f"{where}: draws from a sequence in the source, "
                                           "from none in the target")  # fmt: skip
                    continue
                try:
                    with engine.begin() as conn:
                        done = into.set_sequence(conn, plan.target_table, own[0],
                                                 positions[id(obj)])  # fmt: skip
                except sa.exc.DBAPIError as error:
                    report.problems.append(f"{where}: could not be set: {_reason(error)}")
                else:
                    report.lines.append(f"{where}: {done}")
        finally:
            engine.dispose()
    return report


def _positions(url: str, objects: list[SchemaObject]) -> list[int | None]:
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return engine_of(url).sequence_positions(conn, objects)
    finally:
        engine.dispose()


def _reason(error: sa.exc.DBAPIError) -> str:
    return str(getattr(error, "orig", None) or error).strip().splitlines()[0]
