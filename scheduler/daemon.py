"""``sluice run``: wire ledger, sources, strategy, loop and sink, and run them.

Shutdown order (each step bounded): stop feeding, drain in-flight batches,
stop the refills, give unused buffered items back (SQS: visible again at
once), close the sources, close the sink, close the ledger. The first
SIGTERM/SIGINT drains; the second exits at once (batches left ``importing``
are re-run on the next start: every write is idempotent).
A source whose refills keep being refused (see :mod:`sources.queueing`) stops
the run the same way, draining, and makes it exit 1.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from config.errors import LedgerError, SourceError
from config.models import SluiceConfig
from config.secrets import config_secrets, redact_text
from scheduler.background import STATUS_SHARE, Background
from scheduler.batch_size import plan_ranges
from scheduler.ledger import Ledger
from scheduler.loop import MainLoop
from scheduler.reload import ConfigReloader
from scheduler.resume_points import ResumePoints
from scheduler.schema_builds import SchemaBuilds, plan_for_run
from scheduler.signals import SignalHandlers
from scheduler.source_opener import SourceOpener
from scheduler.stats import RunStats
from scheduler.strategy import build_strategy
from sinks.abc import Sink
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource
from sources.reach import unreachable

if TYPE_CHECKING:
    from scheduler.observe.eta import EtaReport
    from scheduler.probe import Probe

log = logging.getLogger("sluice.daemon")

CUTOVER_WATCH = 0.25
"""Seconds between two looks at the ledger's cutover flag (one small query)."""
RESUME_POINTS_EVERY = 10.0
"""Seconds between looks at the incremental sources' resume points."""

Reporter = Callable[[RunStats, dict[str, QueueingLimitedSource], "EtaReport | None"], None]
"""The progress display: the run's stats, the buffers and the latest ETA."""


@dataclass(frozen=True)
class RunSummary:
    """How a run ended."""

    stats: RunStats
    exit_code: int
    signal: int | None = None
    failures: tuple[str, ...] = ()  # sources given up on, and why (secrets masked)


class Daemon:
    """One sluice process: build with a config, then :meth:`run`.

    Its parts: a :class:`~scheduler.reload.ConfigReloader` holds the running
    config, a :class:`~scheduler.source_opener.SourceOpener` opens the
    sources, :class:`~scheduler.background.Background` runs the periodic
    jobs, the probe and the metrics, and
    :class:`~scheduler.signals.SignalHandlers` turn signals into a drain or a
    reload.
    """

    def __init__(
        self,
        cfg: SluiceConfig,
        *,
        config_path: str = "CONFIG",
        sink: Sink | None = None,
        reporter: Reporter | None = None,
        report_every: float = 10.0,
        wall_clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.wall_clock = wall_clock
        self.config_path = config_path
        self.reporter = reporter
        self.report_every = report_every
        Path(cfg.work_dir).mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl, on_writer_death=self._died,
                             outage_grace=cfg.ledger_outage)
        self._sink = sink
        self.queues: dict[str, QueueingLimitedSource] = {}
        self.loop: MainLoop | None = None
        self.resume_points: ResumePoints | None = None
        self.signal_handlers = SignalHandlers(stop=self._stop_loop, reload=self.reload)
        self.budgets = Budgets(cfg)  # the source databases' limits, shared by their sources
        self.background = Background(self.ledger, self.queues, cfg.lease.ttl, self.budgets)
        self.reloader = ConfigReloader(cfg, config_path, self._reconfigure)
        self.opener = SourceOpener(self.ledger, self.background, config_path,
                                   on_refill=self._notify, on_failed=self._source_failed,
                                   budgets=self.budgets)
        self._secrets = config_secrets(cfg)
        self._failures: list[str] = []  # appended by refill threads (list.append is atomic)
        self.schema: SchemaBuilds | None = None

    @property
    def cfg(self) -> SluiceConfig:
        """The running config (a reload replaces it)."""
        return self.reloader.cfg

    @property
    def signal(self) -> int | None:
        """The first SIGTERM/SIGINT received, if any."""
        return self.signal_handlers.received

    @property
    def probe(self) -> Probe | None:
        """The downstream probe, once the run started one."""
        return self.background.probe

    @property
    def heartbeat_every(self) -> float:
        """Seconds between lease renewals (and reaps of dead owners' batches)."""
        return self.background.heartbeat_every

    @property
    def sink(self) -> Sink:
        """The sink ``spark.deploy`` asks for, built on first use."""
        if self._sink is None:
            from sinks import make_sink

            self._sink = make_sink(self.cfg, self.config_path)
        return self._sink

    def _notify(self) -> None:
        if self.loop is not None:
            self.loop.notify()

    def _source_failed(self, error: SourceError) -> None:
        """A source's refills were given up (called on its refill thread): stop, exit 1.

        Like a signal, this stops feeding and lets in-flight batches finish:
        nothing claimed is lost, and other sources simply stop being fed.
        """
        text = redact_text(str(error), self._secrets)
        self._failures.append(text)
        log.critical("stopping: %s (in-flight batches finish first)", text)
        if self.loop is not None:
            self.loop.request_stop()

    def _died(self, error: BaseException) -> None:
        log.critical("stopping: a supervised thread died: %s", error)
        if self.loop is not None:
            self.loop.die(error)

    def _stop_loop(self) -> None:
        # A stop must not wait for a ledger that is away: the drain waits for
        # the imports in flight only (see scheduler/ledger/outage.py).
        self.ledger.patience.stop_waiting()
        if self.loop is not None:
            self.loop.request_stop()

    def reload(self, reason: str) -> bool:
        """Re-read the config; apply the strategy, batch, backpressure, retry and windows.

        An invalid file is logged and ignored: the running config stays.
        Changes to sources, targets, the ledger or Spark need a restart.
        """
        return self.reloader.reload(reason)

    def _reconfigure(self, new: SluiceConfig) -> None:
        """Put a reloaded config to use in the running sources and the loop."""
        self.budgets.reconfigure(new)
        for name in self.queues:
            # Ranges planned from now, no bigger than the source's batch size
            # (the loop plans them again at its next tick, with the new batch:).
            size = new.batch.max_items if self.loop is None else self.loop.batch_size(name)
            plan_ranges(self.queues, new, name, size)
        if self.loop is not None:
            self.loop.reconfigure(new)

    def _watch_cutover(self) -> None:
        """A cutover was requested (``sluice cutover``): a final pass, then stop feeding."""
        from scheduler.ledger.cutover import cutover_requested

        loop = self.loop
        if loop is None or loop.until_drained:
            return
        if cutover_requested(self.ledger.engine) is not None:
            log.info("cutover requested: a final pass over every source, then this daemon stops")
            loop.drain_then_stop()

    def run(self, *, until_drained: bool = False) -> RunSummary:
        """Run until drained (or stopped); returns the summary and the exit code."""
        away = unreachable(self.cfg)  # not waited for: their sources ask again, later
        plans = plan_for_run(self.cfg, away)  # before any source is registered or read
        self.ledger.owners.register()
        self.background.share_budgets(joining=True)
        checkpoints = self.opener.open(self.cfg, self.queues, away)
        self.schema = SchemaBuilds(plans, self.queues, self.ledger)
        self.resume_points = ResumePoints.of(self.cfg, self.queues, self.ledger.sources)
        # The sources answered: an in-process sink starts its JVM now, on a
        # thread of its own. Its seconds of start-up are the longest wait
        # before the first batch; the loop and the first refills get ready
        # meanwhile. (Not before the source checks: a wrong config would
        # start a JVM only to stop it.)
        sink = self.sink
        strategy = build_strategy(self.cfg)
        # Start-up objects live as long as the daemon: keep full collections
        # from scanning them (each such pause stalled every thread ~60-100 ms).
        gc.collect()
        gc.freeze()
        self.loop = MainLoop(
            self.cfg, self.queues, strategy, self.ledger, sink, checkpoints, budgets=self.budgets
        )
        if self.wall_clock is not None:
            self.loop.wall_clock = self.wall_clock
        self.background.keep_status(self.loop)
        if self.background.status is not None and self.background.status.eta.streams.sources:
            from scheduler.observe.streams import STREAMS_EVERY

            # The change streams' health: a query on each source, never on the loop's thread.
            self.background.every(STREAMS_EVERY, self.background.status.eta.streams.poll,
                                  "streams", share=STATUS_SHARE)  # fmt: skip
        self.background.start_probe_and_metrics(self.loop, self.cfg)
        if self.reporter is not None:
            reporter, loop, eta = self.reporter, self.loop, self.background.eta
            self.background.every(
                self.report_every, lambda: reporter(loop.stats, self.queues, eta()), "progress"
            )
        self.background.keep_leases(self.loop)
        # Often: the application's writes are stopped while the cutover waits for us.
        self.background.every(CUTOVER_WATCH, self._watch_cutover, "cutover")
        if self.resume_points is not None:
            self.background.every(RESUME_POINTS_EVERY, self.resume_points.save, "resume-points")
        if self.reloader.watched:
            self.background.every(2.0, self.reloader.watch, "config-reload")
        self.background.every(1.0, self.schema.poll, "schema")
        self.background.start()
        self.schema.start()
        start_sources(self.cfg, self.queues)
        try:
            stats = self.loop.run(until_drained=until_drained)
            if self.loop.until_drained and self.signal is None and not self._failures:
                self._failures += self.schema.finish().failures  # drained: every object
        except LedgerError as error:
            # A stop asked while the ledger was away ends its waits (and so
            # the writer): that is the stop's outcome, not a failure of the run.
            if self.signal is None or not self.ledger.patience.stopped:
                raise
            stats = self.loop.stats
            log.warning("stopped while the ledger was unreachable (%s): the batches whose "
                        "end it could not record are reconciled from the target by the "
                        "next run", error)  # fmt: skip
        finally:
            self._shutdown()
        if self.reporter is not None:
            self.reporter(stats, self.queues, self.background.eta(now=True))
        failures = tuple(self._failures)
        # A failed source makes the run fail even when a signal also came:
        # exit 1 says "look at this", and the summary still names the signal.
        if failures:
            return RunSummary(stats, 1, self.signal, failures)
        if self.signal is not None:
            return RunSummary(stats, 128 + self.signal, self.signal)
        failed = stats.batches_dead > 0 or stats.rows_rejected > 0
        return RunSummary(stats, 1 if failed else 0)

    def _shutdown(self) -> None:
        # Refills first, so nothing new lands while we close.
        self.background.stop_schedule()
        if self.schema is not None:
            self.schema.stop()
        for queue in self.queues.values():
            queue.stop(timeout=5.0)
        self.background.stop_probe_and_metrics()
        if self.resume_points is not None:
            self.resume_points.save()  # the drain is over: what is held stays held
        # Buffered items no batch claimed: the refills are stopped, so none
        # lands after this; held ones stay with their (failed) batch, whose
        # retry reads its manifest. Before close: SQS needs its client.
        idle = 0
        for name, queue in self.queues.items():
            given = queue.give_back()
            if given:
                log.info("source %s: %d buffered items given back", name, given)
            else:
                idle += 1
        if idle:  # one line, not one per table of a 1,000-table schema
            log.info("%d sources had no buffered item to give back", idle)
        for queue in self.queues.values():
            queue.wrapped.close()
        try:
            self.ledger.owners.unregister()
        except Exception as error:  # the ledger may be what failed
            log.error("could not unregister from the ledger: %s", error)

    def close(self) -> None:
        """Close the sink and the ledger.

        After a source failure, or a start that failed before the loop ran,
        the sink is not waited for: no batch is left in it, so all there is to
        wait for is a Spark JVM still starting that no batch will use (it ends
        with this process).
        """
        if self._sink is not None:
            self._sink.close(wait=self.loop is not None and not self._failures)
        self.ledger.close()

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: stop feeding and drain. Second: exit at once."""
        self.signal_handlers.install()


def format_summary(summary: RunSummary) -> str:
    """The summary printed at the end of ``sluice run`` and ``sluice demo``."""
    s = summary.stats
    # The rate runs from the first batch: start-up (the JVM) is not copying.
    moving = max(s.moving(), 1e-9)
    lines = [
        f"sluice: {s.rows:,} rows in {s.moving():.1f} s ({s.rows / moving:,.0f} rows/s) "
        f"from the first batch, {s.elapsed():.1f} s with start-up; "
        f"{s.batches_done} batches done",
    ]
    lines.extend(
        f"  source {source:<20} {s.rows_by_source.get(source, 0):>12,} rows "
        f"({s.items.get(source, 0):,} {'changes read' if source in s.streams else 'claimed'})"
        for source in sorted(set(s.items) | set(s.rows_by_source))
    )
    lines.extend(
        f"  target {name:<20} {rows:>12,} rows" for name, rows in sorted(s.rows_by_target.items())
    )
    lines.append(
        f"  failed attempts {s.batches_failed}, dead batches {s.batches_dead}, "
        f"rejected rows {s.rows_rejected}"
    )
    if s.zero_dates:
        lines.append("  zero dates set to NULL: " + ", ".join(
            f"{column} {count:,}" for column, count in sorted(s.zero_dates.items())))
    lines.extend(f"  failed: {failure}" for failure in summary.failures)
    if summary.signal is not None:
        lines.append(f"  stopped by {signal.Signals(summary.signal).name}")
    return "\n".join(lines)


def start_sources(cfg: SluiceConfig, queues: Mapping[str, QueueingLimitedSource]) -> None:
    """:func:`start_parents_first` on a thread: 1,000 refill threads take ~1 s to start,
    which the loop need not wait for (a buffer not started yet is an empty one)."""
    threading.Thread(target=start_parents_first, args=(cfg, queues), name="sources-start",
                     daemon=True).start()  # fmt: skip


def start_parents_first(cfg: SluiceConfig, queues: Mapping[str, QueueingLimitedSource]) -> None:
    """Start every source's refills, parents before the sources that wait for their first
    pass: a child's first key queries would hold the database's key-query connections while
    its parent is still unread (a schema's parent table named after its 1,000 children was
    read ~4 s late)."""
    waits, depth = cfg.waits, {}

    def depth_of(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in depth:  # a cycle counts once (depends_on cycles are refused anyway)
            depth[name] = 1 + max((depth_of(p, seen | {name}) for p in waits.get(name, ())
                                   if p not in seen and p != name), default=-1)  # fmt: skip
        return depth[name]

    for name in sorted(queues, key=depth_of):
        queues[name].start()
