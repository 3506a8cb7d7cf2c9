"""``sluice plan``: what a run would do next, found without writing anything.

A plan reads each source's backlog (a ``SELECT count(*)``, or SQS's
approximate message count), reads the ledger's checkpoints if the ledger
exists, and replays the configured strategy against those backlogs for a few
ticks, as the main loop would feed them if the downstream kept up.

Nothing is written: no ledger is created (``Ledger`` creates its tables on
open, so the plan reads through :class:`LedgerReads` on a read-only engine), no work folder is
made, and SQLite files (ledger or source) are opened read-only without
creating their ``-wal``/``-shm`` companions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from config.errors import SluiceError, SourceError
from config.models import SluiceConfig, SqlSourceConfig, SqsSourceConfig
from config.sources import walks_ranges
from scheduler.commands.plan_columns import SourceColumns, column_plans, render_columns
from scheduler.commands.plan_schema import SchemaPlan, render_schema, schema_plan
from scheduler.ledger import UNFINISHED, LedgerReads, fingerprint
from scheduler.readonly import readonly_engine
from scheduler.strategy import build_strategy

_UNFINISHED = (*UNFINISHED, "failed")


@dataclass(frozen=True)
class LedgerView:
    """What the ledger says about each source, read without writing."""

    note: str
    fingerprints: dict[str, str] = field(default_factory=dict)
    high_water: dict[str, list[Any] | None] = field(default_factory=dict)
    resume_after: dict[str, list[Any] | None] = field(default_factory=dict)  # incremental
    unfinished: dict[str, tuple[int, int]] = field(default_factory=dict)  # batches, items
    claimed_keys: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceBacklog:
    """One source's backlog, or why it could not be read."""

    name: str
    kind: str  # "sql keyset", "sql sweep", "sql incremental", "sqs"
    backlog: int | None
    detail: str  # what the number counts
    pending: int  # what the strategy is simulated with
    error: str | None = None


@dataclass(frozen=True)
class Tick:
    """One simulated tick: the source fed, how many items, and the strategy's reason."""

    number: int
    source: str
    items: int
    reason: str


@dataclass(frozen=True)
class Plan:
    """A dry run's findings."""

    ledger: LedgerView
    sources: list[SourceBacklog]
    ticks: list[Tick]
    left: dict[str, int]
    batch: str
    """How big the batches are, as the plan's heading says it."""
    order: list[str] = field(default_factory=list)
    columns: list[SourceColumns] = field(default_factory=list)
    schema: SchemaPlan = field(default_factory=SchemaPlan)

    @property
    def ok(self) -> bool:
        """Every backlog could be read, every column and schema object can go into its
        target."""
        return all(source.error is None for source in self.sources) and not any(
            c.errors for c in self.columns) and not self.schema.errors  # fmt: skip


def make_plan(cfg: SluiceConfig, ticks: int = 10, config_path: str = "CONFIG") -> Plan:
    """Read the backlogs and the ledger (read-only) and simulate ``ticks`` ticks."""
    view = read_ledger(cfg.ledger)
    sources = [measure(name, cfg, view, config_path) for name in cfg.sources]
    pending = {s.name: s.pending for s in sources}
    fed, left = simulate(cfg, pending, ticks)
    batch = (f"batches chosen by sluice: keyset up to {cfg.batch.max_items:,} rows, fewer for "
             f"wide rows; other sources {cfg.batch.key_items:,} items" if cfg.batch.chosen
             else f"batch.max_items {cfg.batch.max_items:,}")  # fmt: skip
    return Plan(view, sources, fed, left, batch, order_lines(cfg), column_plans(cfg),
                schema_plan(cfg))


def read_ledger(url: str) -> LedgerView:
    """Checkpoints, unfinished batches and claimed-key counts, if the ledger exists."""
    shown = sa.make_url(url).render_as_string(hide_password=True)
    engine = readonly_engine(url)
    if engine is None:
        return LedgerView(f"ledger {shown}: none yet; every source starts from the beginning")
    reads = LedgerReads(engine)
    try:
        if not reads.has_tables():
            return LedgerView(f"ledger {shown}: no sluice tables yet; every source starts "
                              "from the beginning")
        recorded = reads.recorded_sources()
        unfinished = reads.unfinished(_UNFINISHED)
        keys = reads.claimed_key_counts()
    except sa.exc.SQLAlchemyError as error:
        cause = str(getattr(error, "orig", None) or error).splitlines()[0]
        return LedgerView(f"ledger {shown}: unreadable ({cause}); backlogs from the beginning")
    finally:
        engine.dispose()
    return LedgerView(
        f"ledger {shown}: checkpoints read",
        fingerprints={name: r.fingerprint for name, r in recorded.items()},
        high_water={name: r.high_water for name, r in recorded.items()},
        resume_after={name: r.resume_after for name, r in recorded.items()},
        unfinished=unfinished,
        claimed_keys=keys,
    )


def measure(name: str, cfg: SluiceConfig, view: LedgerView, config_path: str) -> SourceBacklog:
    """One source's backlog, from its checkpoint in ``view``; errors are reported, not raised."""
    src = cfg.sources[name]
    kind = f"sql {src.mode}" if isinstance(src, SqlSourceConfig) else "sqs"
    recorded = view.fingerprints.get(name)
    changed = recorded is not None and recorded != fingerprint(src)
    try:
        if isinstance(src, SqsSourceConfig):
            return _measure_sqs(name, src)
        return _measure_sql(name, src, view, changed, config_path)
    except SluiceError as error:
        return SourceBacklog(name, kind, None, "", 0, error=str(error))


def _measure_sql(
    name: str, src: SqlSourceConfig, view: LedgerView, changed: bool, config_path: str
) -> SourceBacklog:
    from sources.sql import SqlSource

    kind = f"sql {src.mode}"
    engine = readonly_engine(src.url)
    if engine is None:
        raise SourceError(f"source {name}: database file {sa.make_url(src.url).database} "
                          "does not exist")
    marks = {"keyset": view.high_water, "incremental": view.resume_after}.get(src.mode, {})
    mark = None if changed else marks.get(name)
    after = None if mark is None else tuple(mark)
    source = SqlSource(name, src, after=after, engine=engine)
    try:
        count = source.backlog()
    finally:
        engine.dispose()
    where = " matching where:" if src.where else ""
    if src.mode == "keyset":
        detail = f"rows{where} past {list(after)}" if after else f"rows{where} from the start"
        pending = count
    elif src.mode == "incremental":
        # A run reads past the resume point and claims only (key, cursor)
        # pairs not claimed before: some of those rows may be among them.
        past = f"past the resume point {list(after)}" if after else "from the start"
        detail = f"rows with {src.cursor} set{where}, {past}"
        pending = count
    else:
        claimed = view.claimed_keys.get(name, 0)
        detail = f"rows{where}, {claimed:,} keys claimed before"
        pending = max(0, count - claimed)
    if changed:
        detail += (f"; its definition changed since the ledger recorded it: run "
                   f"sluice reset {config_path} --source {name}")
    return SourceBacklog(name, kind, count, detail, pending)


def _measure_sqs(name: str, src: SqsSourceConfig) -> SourceBacklog:
    from sources.sqs import SqsSource

    source = SqsSource(name, src)
    try:
        count = source.backlog()
    finally:
        source.close()
    return SourceBacklog(name, "sqs", count, "messages visible (approximate)", count)


def order_lines(cfg: SluiceConfig) -> list[str]:
    """What waits for what (``depends_on``), and the tables that refer to themselves."""
    waits = cfg.waits
    selfish = [f"{group}.{t.name}" for group, found in cfg.table_catalog.groups.items()
               for t in found if t.name in t.refers_to and f"{group}.{t.name}" in cfg.sources]
    if not waits and not selfish:
        return []
    width = max(len(name) for name in [*waits, *selfish])
    lines = ["order (a source is fed once the sources it waits for are done):"]
    lines += [f"  {name:<{width}}  after {', '.join(parents)}" for name, parents in waits.items()]
    lines += [f"  {name:<{width}}  refers to itself: its rows go in key order; a row that "
              "refers to a later key may be rejected" for name in selfish]
    return lines


def simulate(
    cfg: SluiceConfig, pending: Mapping[str, int], ticks: int
) -> tuple[list[Tick], dict[str, int]]:
    """Replay the strategy over the backlogs for ``ticks`` ticks; return them and what is left.

    Each tick, like the main loop's: every source with items left has
    ``min(left, buffer.capacity)`` ready, the strategy picks one, and it feeds
    a batch of at most ``batch.max_items`` (and ``backpressure.max_pending``),
    assuming the downstream finishes batches as fast as they come. Where
    sluice chooses the sizes, a keyset source's batch is taken at its most
    (the daemon may make it smaller for wide rows), another's at
    ``batch.key_items``.
    """
    strategy = build_strategy(cfg)
    left = dict(pending)

    def want(name: str) -> int:
        most = cfg.batch.largest(walks_ranges(cfg.sources[name]))
        return min(most, cfg.backpressure.max_pending)

    fed: list[Tick] = []
    waits = cfg.waits
    for number in range(1, ticks + 1):
        ready = {
            name: min(n, cfg.sources[name].buffer.capacity) for name, n in left.items()
            if n > 0 and not any(left.get(p, 0) > 0 for p in waits.get(name, ()))
        }  # fmt: skip
        if not ready:
            break
        reason = strategy.explain(ready)
        source = strategy.pick(ready)
        if source is None:
            break
        items = min(want(source), ready[source])
        strategy.charge(source, items)
        left[source] -= items
        fed.append(Tick(number, source, items, reason))
    return fed, left


def render(plan: Plan, config_path: str) -> str:
    """The plan as ``sluice plan`` prints it."""
    width = max(len(s.name) for s in plan.sources)
    lines = [f"sluice plan {config_path} (dry run: nothing is written)", plan.ledger.note]
    lines.append("backlog:")
    for s in plan.sources:
        if s.error is not None:
            lines.append(f"  {s.name:<{width}}  {s.kind:<15}  unknown: {s.error}")
            continue
        lines.append(f"  {s.name:<{width}}  {s.kind:<15}  {s.backlog:>10,}  {s.detail}")
        batches, items = plan.ledger.unfinished.get(s.name, (0, 0))
        if batches:
            lines.append(f"  {'':<{width}}  {'':<15}  {items:>10,}  in {batches} unfinished "
                         "batches, re-run first")
    lines += plan.order
    lines.append(f"next {len(plan.ticks)} ticks ({plan.batch}; assuming the downstream keeps up):")
    lines.extend(
        f"  tick {t.number:>3}  {t.source:<{width}}  {t.items:>8,} items  {t.reason}"
        for t in plan.ticks
    )
    if not plan.ticks:
        lines.append("  nothing to feed")
    unknown = {s.name for s in plan.sources if s.error is not None}
    lines.append("left after them: " + ", ".join(
        f"{name} {'?' if name in unknown else f'{n:,}'}" for name, n in plan.left.items()
    ))
    lines += render_columns(plan.columns)
    lines += render_schema(plan.schema)
    return "\n".join(lines)
