"""The daemon's status as one immutable snapshot: what the page and ``/status.json`` show.

:class:`StatusBoard` publishes a :class:`StatusSnapshot` every second from
a periodic job of the daemon (:meth:`StatusBoard.refresh`): the ETA's
sample, each buffer's health, the gate and why, each source's batch size
and the limits in force, all read from state any thread may read (the
buffers' snapshots, the sink's counters, the budgets, plain values). The
ledger's figures (rows done by every daemon, batches per state, dead
batches with their errors, the daemons) are read by a second job
(:meth:`StatusBoard.read_ledger`) on an engine of its own; a ledger that
cannot be read leaves the last figures, with the error. The change streams'
health comes with the ETA's sample (:mod:`.streams`, read by a job of its own).
Neither job runs on the loop's thread; the HTTP threads take :meth:`StatusBoard.latest`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from config.models import SluiceConfig, SqlSourceConfig
from config.secrets import config_secrets, redact_text
from scheduler.ledger import DEAD_AFTER, LedgerReads
from scheduler.ledger.lookup import reader_engine
from scheduler.ledger.reads import Owner, SourceFigures
from scheduler.observe.eta import BacklogCounter, EtaReport, EtaTracker, SourceEta
from scheduler.observe.streams import StreamView
from sources.budget import Budget
from sources.queueing import QueueingLimitedSource

if TYPE_CHECKING:
    from scheduler.loop import MainLoop

log = logging.getLogger("sluice.status")

SNAPSHOT_EVERY = 1.0
"""Seconds between two snapshots (and two samples of the ETA)."""
LEDGER_EVERY = 5.0
"""Seconds between two reads of the ledger's figures (as the metrics' ledger counts)."""
DEAD_SHOWN = 10
"""Dead batches shown per source (the newest)."""


@dataclass(frozen=True)
class LimitsView:
    """A source database's limits: as configured (every daemon) and in force here."""

    max_rows_per_s: float | None
    rows_per_s_in_force: float | None  # this daemon's share, times the latency factor
    factor: float  # the latency feedback's part of the rate (1.0: all of it)
    max_connections: int | None  # None: only sluice's own key-query pool is bounded
    connections_in_force: int | None  # this daemon's share
    connections_held: int
    max_query_latency_s: float | None
    waiting_s: float  # until the database's rate admits the next batch


@dataclass(frozen=True)
class SourceView:
    """One source on the page."""

    name: str
    kind: str  # "sql keyset", "sqs", ...
    target: str
    rows_done: int  # by done batches of every daemon (the ledger)
    rows_done_run: int  # by this daemon's run
    left: int | None  # rows (keys, messages) still to migrate; None: not counted yet
    progress: float | None  # rows_done / (rows_done + left)
    rows_per_s: float | None  # over the ETA's window, at most the rate in force
    eta_s: float | None
    done: bool
    chart: tuple[float, ...]  # rows/s over the last minute, oldest first
    buffered: int
    held: int
    capacity: int
    refilling: bool
    exhausted: bool
    failed: bool  # refills were given up for good
    refill_error: str | None
    failing_s: float | None  # seconds its refills have failed in a row (its database away)
    at_limit: bool  # going at the rate in force
    batch_size: int
    waiting_for: tuple[str, ...]  # parents whose first pass it waits for (depends_on)
    limits: LimitsView | None  # None: not a SQL source
    states: dict[str, int]  # batches per state in the ledger
    last_error: str | None


@dataclass(frozen=True)
class GateView:
    """The backpressure gate, its state and why."""

    state: str  # open | closed | full | paused | stopping
    why: str
    pending: int  # items in batches not yet done, plus the probe's
    probe: int | None
    max_pending: int
    resume_below: int
    importing: int
    max_importing: int


@dataclass(frozen=True)
class DeadView:
    """A dead batch and the error that killed it."""

    source: str
    id: str
    attempts: int
    error: str | None
    updated_at: float


@dataclass(frozen=True)
class DaemonView:
    """A daemon registered in the ledger."""

    owner: str
    seen_s_ago: float
    live: bool
    me: bool
    version: str | None


@dataclass(frozen=True)
class Totals:
    """The whole run."""

    rows_done: int
    left: int | None
    rows_per_s: float
    eta_s: float | None
    done: bool


@dataclass(frozen=True)
class StatusSnapshot:
    """Everything the status page shows, at one moment."""

    at: float  # wall clock, epoch seconds
    owner: str
    run_s: float
    sources: tuple[SourceView, ...]
    totals: Totals
    gate: GateView
    dead: tuple[DeadView, ...] = ()
    daemons: tuple[DaemonView, ...] = ()
    ledger_error: str | None = None
    ledger_read_s_ago: float | None = None
    streams: tuple[StreamView, ...] = ()  # the change streams' health (the ETA's report)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``/status.json``)."""
        return asdict(self)


@dataclass(frozen=True)
class _LedgerFigures:
    figures: dict[str, SourceFigures] = field(default_factory=dict)
    owners: list[Owner] = field(default_factory=list)
    at: float | None = None  # wall clock of the last successful read
    error: str | None = None


class StatusBoard:
    """Builds and publishes the daemon's status snapshots; thread-safe.

    ``cfg()`` is the running config (a reload may change it).
    """

    def __init__(
        self,
        loop: MainLoop,
        queues: Mapping[str, QueueingLimitedSource],
        eta: EtaTracker,
        cfg: Callable[[], SluiceConfig],
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.loop = loop
        self.queues = queues
        self.eta = eta
        self.cfg = cfg
        self.wall_clock = wall_clock
        self._reads: LedgerReads | None = None
        self._ledger = _LedgerFigures()
        self._latest: StatusSnapshot | None = None
        self._secrets_of: tuple[SluiceConfig, list[str]] | None = None
        self._lock = threading.Lock()  # one reader engine, made once
        self._closed = False

    def latest(self) -> StatusSnapshot | None:
        """The last snapshot published (None before the first)."""
        return self._latest

    def refresh(self) -> StatusSnapshot:
        """Sample the ETA, build a snapshot and publish it (the status job)."""
        report = self.eta.sample()
        snapshot = self._build(report, self.cfg())
        self._latest = snapshot
        return snapshot

    def read_ledger(self) -> None:
        """Read the ledger's figures (the ledger job); an error keeps the last ones."""
        names = list(self.queues)
        now = self.wall_clock()
        try:
            reads = self.ledger_reads()
            figures = reads.figures(names, now, DEAD_SHOWN)
            owners = reads.owners_seen(now)
        except Exception as error:  # a page must show, and say the ledger is away
            first = (str(error) or repr(error)).splitlines()[0]
            text = redact_text(first, self._secrets(self.cfg()))
            if self._ledger.error is None:
                log.warning("status: cannot read the ledger: %s", text)
            self._ledger = _LedgerFigures(self._ledger.figures, self._ledger.owners,
                                          self._ledger.at, text)  # fmt: skip
            return
        self._ledger = _LedgerFigures(figures, owners, now)

    def close(self) -> None:
        """Release the ledger connections of the figures' reads."""
        with self._lock:
            reads, self._reads, self._closed = self._reads, None, True
        if reads is not None:
            reads.engine.dispose()

    # -- building ------------------------------------------------------------------------

    def ledger_reads(self) -> LedgerReads:
        """The board's own reads of the ledger (made at the first use)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the status board is closed")
            if self._reads is None:
                self._reads = LedgerReads(reader_engine(self.cfg().ledger, 2))
            return self._reads

    def _secrets(self, cfg: SluiceConfig) -> list[str]:
        """``cfg``'s secrets, found again only for another config (a reload): a walk of a
        config of 1,000 sources takes a tenth of a second."""
        if self._secrets_of is None or self._secrets_of[0] is not cfg:
            self._secrets_of = (cfg, config_secrets(cfg))
        return self._secrets_of[1]

    def _build(self, report: EtaReport, cfg: SluiceConfig) -> StatusSnapshot:
        ledger = self._ledger
        secrets = self._secrets(cfg)
        now = self.wall_clock()
        run_done = dict(self.loop.stats.rows_by_source)
        sources = tuple(
            self._source(name, queue, cfg, report.sources.get(name),
                         ledger.figures.get(name), run_done.get(name, 0), secrets)
            for name, queue in self.queues.items()
        )  # fmt: skip
        totals = Totals(sum(s.rows_done for s in sources), report.left, report.rows_per_s,
                        report.eta_s, report.done)  # fmt: skip
        dead = tuple(
            DeadView(name, d.id, d.attempts, _clean(d.error, secrets), d.updated_at)
            for name, figures in ledger.figures.items()
            for d in figures.dead
        )
        me = self.loop.ledger.owners.owner
        daemons = tuple(
            DaemonView(o.owner, round(o.heartbeat_age_s, 1), o.heartbeat_age_s < DEAD_AFTER,
                       o.owner == me, o.sluice_version)
            for o in ledger.owners
        )  # fmt: skip
        return StatusSnapshot(
            at=now,
            owner=me,
            run_s=round(self.loop.stats.elapsed(), 1),
            sources=sources,
            totals=totals,
            gate=_gate(self.loop, cfg),
            dead=dead,
            daemons=daemons,
            ledger_error=ledger.error,
            ledger_read_s_ago=None if ledger.at is None else round(now - ledger.at, 1),
            streams=tuple(report.streams.values()),
        )

    def _source(
        self, name: str, queue: QueueingLimitedSource, cfg: SluiceConfig, eta: SourceEta | None,
        figures: SourceFigures | None, run_done: int, secrets: list[str],
    ) -> SourceView:  # fmt: skip
        src = cfg.sources[name]
        health = queue.health()
        figures = figures or SourceFigures()
        # Every daemon's rows, and at least this run's: the ledger is read less often.
        done = max(figures.rows, run_done)
        left = None if eta is None else eta.left
        total = None if left is None else done + left
        budgets = self.loop.inflight.budgets
        budget = None if budgets is None else budgets.of(name)
        # A source whose keys were all read finds its database away by its batches alone.
        away = None if self.loop.inflight.away is None else self.loop.inflight.away.of(name)
        return SourceView(
            name=name,
            kind=f"sql {src.mode}" if isinstance(src, SqlSourceConfig) else src.kind,
            target=src.target,
            rows_done=done,
            rows_done_run=run_done,
            left=left,
            progress=(done / total if total else 1.0) if total is not None else None,
            rows_per_s=None if eta is None else eta.rows_per_s,
            eta_s=None if eta is None else eta.eta_s,
            done=bool(eta and eta.done),
            chart=() if eta is None else eta.chart,
            buffered=health.buffered,
            held=health.held,
            capacity=queue.capacity,
            refilling=health.refilling,
            exhausted=health.exhausted,
            failed=health.failed is not None,
            refill_error=_clean(  # given up, failing now (not one it got over), or away
                health.failed or (health.last_error if health.consecutive_errors else None)
                or (away and f"its database does not answer: {away[1]}"), secrets),
            failing_s=None if health.failed else health.failing_for() or (away and away[0]),
            at_limit=bool(eta and eta.limited),
            batch_size=self.loop.batch_size(name),
            waiting_for=tuple(self.loop.feeder.order.waiting_for(name)),
            limits=_limits(budget, src) if isinstance(src, SqlSourceConfig) else None,
            states=dict(figures.states),
            last_error=_clean(figures.last_error, secrets),
        )


def status_board(loop: MainLoop, queues: Mapping[str, QueueingLimitedSource]) -> StatusBoard:
    """The status board of a daemon's ``loop``: its ETA (with its backlog counter) included.
    Start the counter (``board.eta.counter.start()``) once the sources are open."""

    def rows_done() -> dict[str, int]:
        return dict(loop.stats.rows_by_source)  # a copy: sink threads add to it

    def limit(source: str) -> float | None:
        budget = None if loop.inflight.budgets is None else loop.inflight.budgets.of(source)
        return None if budget is None else budget.rate_share

    sweeps = frozenset(name for name, src in loop.cfg.sources.items()
                       if isinstance(src, SqlSourceConfig) and src.mode == "sweep")  # fmt: skip
    counter = BacklogCounter(queues, rows_done, sweeps=sweeps)
    eta = EtaTracker(queues, rows_done, limit=limit, moving=lambda: loop.stats.moving() > 0,
                     counter=counter)  # fmt: skip
    board = StatusBoard(loop, queues, eta, lambda: loop.cfg)
    if sweeps:  # their where: rows stay visible once done: the ledger's claimed keys are left out
        counter.claimed = lambda: board.ledger_reads().claimed_key_counts()
    return board


def _limits(budget: Budget | None, src: SqlSourceConfig) -> LimitsView:
    """The limits in force of the source's database (as configured without a budget)."""
    if budget is None:
        return LimitsView(src.limits.max_rows_per_s, src.limits.max_rows_per_s, 1.0,
                          src.limits.max_connections, src.limits.max_connections, 0,
                          src.limits.max_query_latency, 0.0)  # fmt: skip
    rate = budget.rate_share
    return LimitsView(
        max_rows_per_s=budget.rate,
        rows_per_s_in_force=None if rate is None else round(rate, 1),
        factor=budget.factor,
        max_connections=budget.connections,
        connections_in_force=budget.connection_share,
        connections_held=budget.held,
        max_query_latency_s=budget.max_latency,
        waiting_s=round(budget.wait_s(), 3),
    )


def _gate(loop: MainLoop, cfg: SluiceConfig) -> GateView:
    """The gate's state and why, from values any thread may read."""
    gate, sink = loop.gate, loop.sink
    reading = None if loop.probe is None else loop.probe.reading().value
    pending = sink.pending_items() + (reading or 0)
    importing, slots = sink.in_flight(), cfg.backpressure.max_importing_batches
    windows = loop.windows
    if loop.stopping:
        state, why = "stopping", f"stopping: draining {importing} batches in flight"
    elif not windows.is_open(loop.wall_clock()):
        state, why = "paused", f"outside the feeding windows {windows.expressions}"
    elif not gate.is_open:
        state, why = "closed", (f"{pending:,} items pending reached max_pending "
                                f"{gate.max_pending:,}; opens below "
                                f"{gate.resume_below:,}")  # fmt: skip
    elif importing >= slots:
        state, why = "full", f"every import slot is busy ({importing} of {slots} batches)"
    else:
        state, why = "open", f"{pending:,} items pending, under max_pending {gate.max_pending:,}"
    if reading is not None:
        why += f" (the downstream probe reports {reading:,})"
    return GateView(state, why, pending, reading, gate.max_pending, gate.resume_below,
                    importing, slots)  # fmt: skip


def _clean(text: str | None, secrets: list[str]) -> str | None:
    return None if text is None else redact_text(text, secrets)
