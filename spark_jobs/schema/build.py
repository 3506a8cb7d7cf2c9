"""Building what a table sluice made lacks of its source's schema objects, stage by stage.

:func:`build_stage` looks at the target first (:func:`~spark_jobs.schema.compare.absent`):
only what is lacking is built, so that it may run again at any time (a
restart, a second daemon, the cutover) and does nothing twice. Within a
call, as pg_restore orders a restore:

1. each table's column attributes: sequences, identity, NOT NULL, defaults,
   comments (catalog changes, no row read);
2. the indexes, unique constraints' indexes included (and a primary key's, where
   it follows the load: :mod:`spark_jobs.load.late_keys`), ``jobs`` at once
   (``CREATE INDEX`` takes a lock that lets other index builds of the same
   table run beside it);
3. each table's constraints: primary keys and unique constraints on their indexes, checks
   (``NOT VALID``, then ``VALIDATE``), exclusion constraints;
4. foreign keys (``NOT VALID``, then ``VALIDATE``);
5. triggers, with their functions.

Each object is built in a transaction of its own where the engine's DDL is
transactional: one that fails is rolled back alone, logged with the
server's reason, and reported; the others go on. An object found there
already (another daemon built it) counts as built.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from spark_jobs.engines import engine_of
from spark_jobs.engines.objects import BUILD_MEMORY, ObjectKind, Planned, Stage
from spark_jobs.load.early import escaped
from spark_jobs.load.jdbc_tables import forget_table, made_tables
from spark_jobs.schema.compare import absent, read_tables
from spark_jobs.schema.plan import TablePlan

log = logging.getLogger(__name__)

_ATTRIBUTES = (ObjectKind.SEQUENCE, ObjectKind.IDENTITY, ObjectKind.NOT_NULL,
               ObjectKind.DEFAULT, ObjectKind.ON_UPDATE, ObjectKind.COMMENT)  # fmt: skip
_INDEXES = (ObjectKind.PRIMARY_KEY, ObjectKind.INDEX, ObjectKind.UNIQUE)
_CONSTRAINTS = (ObjectKind.PRIMARY_KEY, ObjectKind.UNIQUE, ObjectKind.CHECK,
                ObjectKind.EXCLUSION)  # fmt: skip
_ON_INDEXES = (ObjectKind.PRIMARY_KEY, ObjectKind.UNIQUE)
"""Built in two steps: the index among the others, then the constraint on it."""
_THERE_ALREADY = {"42P07", "42710", "42P06", 1061, 1826, 3822, 1050}
"""Errors that say the object exists (PostgreSQL's duplicate table/object/schema; MySQL's
duplicate key name, foreign key and check names, table)."""


@dataclass
class BuildReport:
    """What a build did: the objects built, and those that failed with the server's reason."""

    built: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        """The objects that failed, as a run's summary lists them."""
        return [f"schema object {text}" for text in self.failed]

    def add(self, other: BuildReport) -> None:
        """Take in ``other``'s findings."""
        self.built += other.built
        self.failed += other.failed


@dataclass
class _Item:
    plan: TablePlan
    planned: Planned
    statements: Sequence[str]


def build_stage(plans: Iterable[TablePlan], stages: Iterable[Stage],
                jobs: int | None = None) -> BuildReport:  # fmt: skip
    """Build the objects of ``stages`` that the tables sluice made among ``plans`` lack.

    ``jobs``: connections at once per target database (each plan's
    ``schema_jobs`` by default). Returns what was built and what failed;
    raises only what the target's catalogue cannot be read for.
    """
    wanted = tuple(stages)
    report = BuildReport()
    by_url: dict[str, list[TablePlan]] = defaultdict(list)
    for plan in plans:
        if plan.builds and plan.due(*wanted):
            by_url[plan.target_url].append(plan)
    for url, group in by_url.items():
        report.add(_build_at(url, group, wanted, jobs or group[0].jobs))
    return report


def build_first(plans: Iterable[TablePlan]) -> list[str]:
    """What must be in a target before sluice makes a table there: the extensions the source
    table uses (a column's type may be one's). Returns what could not be made, with why."""
    problems = []
    for plan in plans:
        if not plan.builds:
            continue
        for item in plan.due(Stage.CREATE):
            if item.source.kind != ObjectKind.EXTENSION:
                continue
            engine = sa.create_engine(plan.target_url, poolclass=NullPool)
            try:
                _execute(engine, item.statements)
            except sa.exc.DBAPIError as error:
                reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
                problems.append(f"{plan.source}: {item.label}, which the source table uses, "
                                f"cannot be made in the target ({reason}): install it there")
            finally:
                engine.dispose()
    return problems


def _build_at(
    url: str, plans: list[TablePlan], stages: tuple[Stage, ...], jobs: int
) -> BuildReport:
    # Its connections serve every table's builds in turn (a new session each was ~1,000
    # a run of 1,000 small tables), and close with the engine at the end.
    engine = sa.create_engine(url, pool_size=jobs + 1, max_overflow=0, pool_pre_ping=True)
    report = BuildReport()
    try:
        with engine.connect() as conn:
            made = made_tables(conn)
        mine = [p for p in plans if p.target_table in made]
        for plan in mine:
            plan.made = True
        there = read_tables(url, [p.target_table for p in mine])
        items: list[_Item] = []
        for plan in mine:
            if plan.target_table not in there:
                continue  # dropped since it was made: the next batch makes it again
            items += [_Item(plan, planned, planned.statements)
                      for planned in absent(plan, there[plan.target_table], stages)
                      if planned.statements]  # fmt: skip
        if not items:
            return report
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="schema") as pool:
            def run(phase: list[list[_Item]]) -> None:
                for outcome in pool.map(lambda chain: _run_chain(engine, chain), phase):
                    report.add(outcome)

            run(_per_table(items, _ATTRIBUTES))
            # Index builds one by one across the pool (a key's or unique constraint's index
            # first), or each table's in its order where the engine builds one at a time.
            indexes = [_Item(i.plan, i.planned, i.statements[:1])
                       for i in items if i.planned.source.kind in _INDEXES]  # fmt: skip
            side_by_side = engine_of(url).parallel_indexes
            run([[i] for i in indexes] if side_by_side else _per_table(indexes, _INDEXES, False))
            run(_per_table([_Item(i.plan, i.planned, i.statements[1:]) if
                            i.planned.source.kind in _ON_INDEXES else i
                            for i in items], _CONSTRAINTS))  # fmt: skip
            run(_per_table(items, (ObjectKind.FOREIGN_KEY,)))
            run(_per_table(items, (ObjectKind.TRIGGER,)))
        for plan in {id(i.plan): i.plan for i in items}.values():
            forget_table(url, *plan.target_table)
        if report.built:
            log.info("schema objects: %d built in %.1f s (%d tables)%s", len(report.built),
                     time.monotonic() - started, len({id(i.plan) for i in items}),
                     f", {len(report.failed)} failed" if report.failed else "")  # fmt: skip
    finally:
        engine.dispose()
    return report


def _per_table(items: list[_Item], kinds: tuple[ObjectKind, ...],
               by_kind: bool = True) -> list[list[_Item]]:  # fmt: skip
    """Items of ``kinds``, a chain per table: one table's changes in ``kinds``' order, or
    (``by_kind=False``) in the source's."""
    chains: dict[int, list[_Item]] = defaultdict(list)
    order = {kind: n for n, kind in enumerate(kinds)}
    chosen = [i for i in items if i.planned.source.kind in kinds and i.statements]
    for item in sorted(chosen, key=lambda i: order[i.planned.source.kind]) if by_kind else chosen:
        chains[id(item.plan)].append(item)
    return list(chains.values())


def _run_chain(engine: sa.Engine, chain: list[_Item]) -> BuildReport:
    report = BuildReport()
    for item in chain:
        label = f"{item.plan.source}: {item.planned.label}"
        try:
            _execute(engine, item.statements)
        except sa.exc.DBAPIError as error:
            if _code(error) in _THERE_ALREADY or _there_now(engine, item):
                report.built.append(label)
                continue
            reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
            log.error("%s: could not be built in %s: %s (the cutover lists it until it is "
                      "there: build it by hand, or skip it under schema: skip:)", label,
                      ".".join(item.plan.target_table), reason)  # fmt: skip
            report.failed.append(f"{label}: {reason}")
        else:
            report.built.append(label)
    return report


def _there_now(engine: sa.Engine, item: _Item) -> bool:
    """Whether ``item``'s object is in its table now, its build having failed: another daemon
    built it meanwhile (a key's or unique constraint's index attached to it first says
    "already associated with a constraint", not that it exists)."""
    url = engine.url.render_as_string(hide_password=False)
    try:
        there = read_tables(url, [item.plan.target_table]).get(item.plan.target_table)
    except sa.exc.DBAPIError:
        return False
    stage = item.planned.stage
    return there is not None and item.planned not in absent(item.plan, there, (stage,))


def _execute(engine: sa.Engine, statements: Sequence[str]) -> None:
    with engine.begin() as conn:
        # At most schema_jobs builds hold BUILD_MEMORY at once.
        for setting in engine_of(engine.url).build_settings(BUILD_MEMORY):
            conn.exec_driver_sql(setting)
        for statement in statements:
            conn.exec_driver_sql(escaped(conn, statement))


def _code(error: sa.exc.DBAPIError) -> object:
    orig = getattr(error, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate is not None:
        return sqlstate
    args = getattr(orig, "args", ())
    return args[0] if args else None

