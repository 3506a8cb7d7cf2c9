"""Each source table's schema objects, and what each becomes in its target table.

:func:`plan_schema` reads the objects of every SQL source's table (a few
queries per source database, whatever the number of tables), asks the target
engine's schema editor what each becomes where the table goes, and applies
the source's ``schema:`` settings (``skip``, ``define``, ``build``). Where a
target table exists it says whose it is: sluice's (recorded in
``_sluice_tables``: its objects are built), or the operator's (compared only).
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from config.models import JdbcTargetConfig, SluiceConfig, SqlSourceConfig, split_target
from spark_jobs.engines import catalogued, engine_of
from spark_jobs.engines.base import Engine
from spark_jobs.engines.connections import bound_waits
from spark_jobs.engines.objects import (
    ObjectKind,
    Placement,
    Planned,
    Stage,
    TableName,
    TableObjects,
)
from spark_jobs.load.jdbc_tables import made_tables


@dataclass
class TablePlan:
    """One source table's objects in its target table.

    ``made``: the target table was made by sluice (its objects are built), is
    the operator's (compared only), or is not there yet (None: sluice makes it).
    ``note``: why no object is planned (a ``columns:`` mapping, SQLite).
    """

    source: str
    source_url: str
    source_table: TableName
    target: str
    target_url: str
    target_table: TableName
    made: bool | None = None
    planned: list[Planned] = field(default_factory=list)
    note: str | None = None
    jobs: int = 2

    @property
    def problems(self) -> list[str]:
        """Each object with no way into the target, with the fix."""
        return [f"{self.source}: {p.label}: {p.problem}" for p in self.planned
                if p.problem is not None and p.skipped is None]  # fmt: skip

    def due(self, *stages: Stage) -> list[Planned]:
        """The objects built at ``stages`` (neither skipped nor without a translation)."""
        return [p for p in self.planned
                if p.stage in stages and p.skipped is None and p.problem is None]  # fmt: skip

    @property
    def builds(self) -> bool:
        """Whether sluice builds this table's objects (it made, or will make, the table)."""
        return self.made is not False and self.note is None


def plan_schema(
    cfg: SluiceConfig, names: Iterable[str] | None = None, away: Mapping[str, str] | None = None
) -> list[TablePlan]:
    """What every SQL source's (or ``names``') table objects become in its target.

    ``away``: source databases not to ask (URL → why they did not answer): their tables get
    a note, columns and key only, and the cutover builds the rest.
    """
    wanted = set(cfg.sources) if names is None else set(names)
    chosen: dict[str, tuple[SqlSourceConfig, JdbcTargetConfig]] = {}
    for name, src in cfg.sources.items():
        if not isinstance(src, SqlSourceConfig):
            continue
        target = cfg.targets.get(split_target(src.target)[0])
        if isinstance(target, JdbcTargetConfig):
            chosen[name] = (src, target)
    plans = [_plan(name, src, target) for name, (src, target) in chosen.items()]
    away = away or {}
    for p in plans:
        if p.note is None and p.source_url in away:
            p.note = (f"its database did not answer at start ({away[p.source_url]}): "
                      "columns and key now, the rest at cutover")  # fmt: skip
    live = [p for p in plans if p.note is None]
    _resolve_sources(live)
    _resolve_targets(live)
    streamed = {(p.source_url, p.source_table) for p in live
                if chosen[p.source][0].mode == "stream"}  # fmt: skip
    refs: dict[tuple[str, str], dict[TableName, TableName]] = defaultdict(dict)
    for p in live:
        refs[(p.source_url, p.target)][p.source_table] = p.target_table
    objects = _read_sources(live)
    for p in live:
        if p.source not in wanted:
            continue
        src, _ = chosen[p.source]
        placement = Placement(p.target_table, refs[(p.source_url, p.target)],
                              frozenset(t for u, t in streamed if u == p.source_url))  # fmt: skip
        source, into = engine_of(p.source_url), engine_of(p.target_url)
        found = objects.get(p.source_url, {}).get(p.source_table, TableObjects(p.source_table))
        try:
            planned = into.plan_objects(found, source, placement)
        except NotImplementedError:
            planned = None
        if planned is None:
            p.note = (f"from {source.label} into {into.label}: columns and key only (no "
                      "translation of indexes and constraints yet)")  # fmt: skip
            continue
        p.planned = [_configured(item, src, p.source_table[1]) for item in planned]
    _keys_after_load(cfg, [p for p in live if p.source in wanted and p.planned])
    return [p for p in plans if p.source in wanted]


LATE_KEY_ROWS = 100_000
"""The fewest rows (the source's statistics) of a table whose primary key sluice builds after
its first pass (:mod:`spark_jobs.load.late_keys`): below, the build's own statement costs
more than keeping the key up row by row saves."""


def _keys_after_load(cfg: SluiceConfig, plans: list[TablePlan]) -> None:
    """Put the primary key of some tables of ``plans`` among the objects built once their
    first passes are done, where the target engine builds it after a load: a table sluice
    makes for a keyset source of at least :data:`LATE_KEY_ROWS` rows, the only source the
    config sends to that table of that database, its key the batches' key, built by sluice
    (``schema: build`` left on), which exactly once lets go without it meanwhile
    (:mod:`spark_jobs.load.late_keys`); and one sluice made that is there without its key
    (an earlier run's first pass left it out), whatever its source. The key takes the
    source's name (a translated one's, ``TABLE_pkey``) where the target schema holds no
    other relation of that name, else the one the server gives it."""
    writers: dict[tuple[object, ...], int] = defaultdict(int)
    for src in cfg.sources.values():
        if not getattr(src, "target", None):
            continue
        target, _, table = split_target(src.target)
        if isinstance(found := cfg.targets.get(target), JdbcTargetConfig):
            url = sa.make_url(found.url)
            writers[(url.host, url.port, url.database, table)] += 1
    keys: list[tuple[TablePlan, int]] = []
    for p in plans:
        src = cfg.sources[p.source]
        if not (isinstance(src, SqlSourceConfig) and src.objects.build and p.builds
                and p.made is not False):  # fmt: skip
            continue
        keys += [(p, n) for n, item in enumerate(p.planned)
                 if item.source.kind == ObjectKind.PRIMARY_KEY and item.stage == Stage.CREATE
                 and item.skipped is None and item.problem is None
                 and item.source.columns == src.key_columns]  # fmt: skip
    if not keys:
        return

    def alone(p: TablePlan) -> bool:
        src, url = cfg.sources[p.source], sa.make_url(p.target_url)
        return (isinstance(src, SqlSourceConfig) and src.mode == "keyset" and p.made is None
                and writers[(url.host, url.port, url.database, p.target_table[1])] == 1)

    big = _big_tables([p for p, _ in keys if alone(p)])
    keys = [(p, n) for p, n in keys if p.made or (p.source_url, p.source_table) in big]
    names = {id(p): _key_name(p, p.planned[n]) for p, n in keys}
    there = _target_keys([(p, names[id(p)]) for p, _ in keys])
    for p, n in keys:
        keyless, taken = there.get(id(p), (False, True))
        if keyless or (alone(p) and (p.source_url, p.source_table) in big):
            name = None if taken else names[id(p)]
            statements = engine_of(p.target_url).key_after_load(
                name, p.target_table, p.planned[n].source.columns)  # fmt: skip
            if statements:
                p.planned[n] = replace(p.planned[n], stage=Stage.LOADED, statements=statements)


def _key_name(p: TablePlan, item: Planned) -> str:
    source, into = engine_pair(p)
    return item.source.name if source.name == into.name else f"{p.target_table[1]}_pkey"


def _target_keys(keys: list[tuple[TablePlan, str]]) -> dict[int, tuple[bool, bool]]:
    """For each plan (by ``id``) with a key name: whether its table is there, sluice's,
    without a primary key; and whether another relation of the target schema has the name
    (an index of the table itself does not count: an earlier build's, not yet the key's)."""
    found: dict[int, tuple[bool, bool]] = {}
    by_url: dict[str, list[tuple[TablePlan, str]]] = defaultdict(list)
    for p, name in keys:
        by_url[p.target_url].append((p, name))
    for url, group in by_url.items():
        engine = _connect(url)
        try:
            with engine.connect() as conn:
                inspector = sa.inspect(conn)
                keyed: dict[tuple[str | None, str], Any] = {}
                for schema in {p.target_table[0] for p, _ in group}:  # a query a schema
                    keyed |= inspector.get_multi_pk_constraint(schema=schema, filter_names=[
                        p.target_table[1] for p, _ in group if p.target_table[0] == schema])
                for p, name in group:
                    schema, table = p.target_table
                    keyless = bool(p.made) and not keyed.get((schema, table), {}).get(
                        "constrained_columns")  # fmt: skip
                    taken = (keyless or not p.made) and engine_of(url).name_taken(
                        conn, schema, name, table)  # fmt: skip
                    found[id(p)] = (keyless, taken)
        except sa.exc.SQLAlchemyError:
            continue  # not read: each key goes with its table (or is built by its import)
        finally:
            engine.dispose()
    return found


def _big_tables(plans: Iterable[TablePlan]) -> set[tuple[str, TableName]]:
    """The source tables of ``plans`` their databases' statistics count at
    :data:`LATE_KEY_ROWS` rows or more (a table never analyzed is not among them)."""
    by_url: dict[str, set[TableName]] = defaultdict(set)
    for p in plans:
        by_url[p.source_url].add(p.source_table)
    big: set[tuple[str, TableName]] = set()
    for url, tables in by_url.items():
        names = {f"{s}.{t}" if s else t: (s, t) for s, t in tables}
        engine = _connect(url)
        try:
            with engine.connect() as conn:
                counted = engine_of(url).row_estimates(conn, list(names))
        except sa.exc.SQLAlchemyError:
            continue  # no statistics: each key goes with its table, as it always may
        finally:
            engine.dispose()
        big |= {(url, names[n]) for n, rows in counted.items() if rows >= LATE_KEY_ROWS}
    return big


def _plan(name: str, src: SqlSourceConfig, target: JdbcTargetConfig) -> TablePlan:
    _, schema, table = split_target(src.target)
    source_schema, _, source_table = src.table.rpartition(".")
    plan = TablePlan(name, src.url, (source_schema, source_table), split_target(src.target)[0],
                     target.url, (schema or "", table), jobs=target.schema_jobs)  # fmt: skip
    if not (catalogued(src.url) and catalogued(target.url)):
        plan.note = "schema objects are copied between PostgreSQL and MariaDB/MySQL only"
    elif src.columns:
        plan.note = ("columns: maps the table's columns: its indexes and constraints are "
                     "yours to make")  # fmt: skip
    return plan


def _connect(url: str) -> sa.Engine:
    """An engine for catalogue reads: they wait :data:`~config.connections.LOCK_WAIT` s at
    most for a table an application holds locked (the start then goes on without the
    objects: the cutover builds them)."""
    engine = sa.create_engine(url, poolclass=NullPool)
    bound_waits(engine)
    return engine


def _resolve_sources(plans: list[TablePlan]) -> None:
    """Each source table's schema, where the config names none: the database's default."""
    for url in {p.source_url for p in plans if not p.source_table[0]}:
        schema = _default_schema(url)
        for p in plans:
            if p.source_url == url and not p.source_table[0]:
                p.source_table = (schema, p.source_table[1])


def _resolve_targets(plans: list[TablePlan]) -> None:
    """Each target table's schema, and whose the table is (sluice's, the operator's, none)."""
    by_url: dict[str, list[TablePlan]] = defaultdict(list)
    for p in plans:
        by_url[p.target_url].append(p)
    for url, group in by_url.items():
        engine = _connect(url)
        try:
            with engine.connect() as conn:
                default = engine_of(url).default_schema(conn)
                made = made_tables(conn)
                inspector = sa.inspect(conn)
                present: dict[str, set[str]] = {}
                for p in group:
                    schema = p.target_table[0] or default
                    p.target_table = (schema, p.target_table[1])
                    if schema not in present:
                        present[schema] = set(inspector.get_table_names(
                            schema=None if schema == default else schema))  # fmt: skip
                    if p.target_table[1] in present[schema]:
                        p.made = p.target_table in made
        finally:
            engine.dispose()


def _default_schema(url: str) -> str:
    engine = _connect(url)
    try:
        with engine.connect() as conn:
            return engine_of(url).default_schema(conn)
    finally:
        engine.dispose()


def _read_sources(plans: list[TablePlan]) -> dict[str, dict[TableName, TableObjects]]:
    """Every source table's objects, one connection and a few queries per database."""
    found: dict[str, dict[TableName, TableObjects]] = {}
    by_url: dict[str, list[TableName]] = defaultdict(list)
    for p in plans:
        by_url[p.source_url].append(p.source_table)
    for url, tables in by_url.items():
        engine = _connect(url)
        try:
            with engine.connect() as conn:
                read = engine_of(url).read_objects(conn, sorted(set(tables)))
        finally:
            engine.dispose()
        found[url] = {(s or "", t): objects for (s, t), objects in read.items()}
    return found


def _configured(item: Planned, src: SqlSourceConfig, table: str) -> Planned:
    """``item`` as the source's ``schema:`` settings have it: skipped, defined, or as it is."""
    settings = src.objects
    if item.stage == Stage.CREATE:
        return item  # the table's columns and key: made with it, whatever the settings
    if not settings.build:
        return replace(item, skipped="schema: build: false")
    names = (item.source.name, f"{table}.{item.source.name}")
    for pattern in settings.skip:
        if any(fnmatch.fnmatchcase(n, pattern) for n in names):
            return replace(item, skipped=f"schema: skip: {pattern}")
    for name in names:
        if name in settings.define:
            text = settings.define[name]
            return replace(item, statements=(text,), becomes=text, problem=None, signature=None,
                           early=False)  # fmt: skip
    return item


def engine_pair(plan: TablePlan) -> tuple[Engine, Engine]:
    """The source and target engines of ``plan``."""
    return engine_of(plan.source_url), engine_of(plan.target_url)
