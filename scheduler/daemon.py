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
import os
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import BackgroundScheduler

from config.errors import SourceError
from config.models import SluiceConfig, SqlSourceConfig, SqsSourceConfig
from config.secrets import config_secrets, redact_text
from scheduler.ledger import Checkpoint, Ledger, encode_key, fingerprint
from scheduler.loop import MainLoop, RunStats
from scheduler.strategy import build_strategy
from sinks.abc import Sink

if TYPE_CHECKING:
    from scheduler.observe.metrics import MetricsServer
    from scheduler.probe import Probe
    from sources.sql import SqlSource
    from sources.sqs import SqsSource
from sources.abc import LimitedSource
from sources.queueing import QueueingLimitedSource

log = logging.getLogger("sluice.daemon")

KeyTuple = tuple[Any, ...]
Reporter = Callable[[RunStats, dict[str, QueueingLimitedSource]], None]


@dataclass(frozen=True)
class RunSummary:
    """How a run ended."""

    stats: RunStats
    exit_code: int
    signal: int | None = None
    failures: tuple[str, ...] = ()  # sources given up on, and why (secrets masked)


class Daemon:
    """One sluice process: build with a config, then :meth:`run`."""

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
        self.cfg = cfg
        self.wall_clock = wall_clock
        self.config_path = config_path
        self.reporter = reporter
        self.report_every = report_every
        Path(cfg.work_dir).mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl, on_writer_death=self._died)
        self._sink = sink
        self.queues: dict[str, QueueingLimitedSource] = {}
        self.loop: MainLoop | None = None
        self.signal: int | None = None
        self._periodic = BackgroundScheduler(daemon=True)
        self._config_mtime = _mtime(config_path)
        # Leases are renewed, and dead owners' batches reaped, this often.
        self.heartbeat_every = min(5.0, cfg.lease.ttl / 3)
        self.probe: Probe | None = None
        self._metrics: MetricsServer | None = None
        self._secrets = config_secrets(cfg)
        self._failures: list[str] = []  # appended by refill threads (list.append is atomic)

    @property
    def sink(self) -> Sink:
        """The sink ``spark.deploy`` asks for, built on first use."""
        if self._sink is None:
            from sinks import make_sink

            self._sink = make_sink(self.cfg, self.config_path)
        return self._sink

    def _build_sources(self) -> dict[str, Checkpoint]:
        # Every source is checked before any is registered in the ledger: a
        # start that fails a check (a wrong key column) must leave no
        # fingerprint behind, or fixing the config would be refused with
        # "sluice reset" although nothing was ever claimed.
        sources: dict[str, LimitedSource] = {}
        try:
            for name, src_cfg in self.cfg.sources.items():
                sources[name] = self._make_source(name, src_cfg)
            checkpoints = {
                name: self.ledger.sources.register(
                    name, fingerprint(src_cfg), config_path=self.config_path
                )
                for name, src_cfg in self.cfg.sources.items()
            }
        except BaseException:
            for source in sources.values():
                source.close()
            raise
        for name, source in sources.items():
            _resume(source, checkpoints[name])
            src_cfg = self.cfg.sources[name]
            self.queues[name] = QueueingLimitedSource(
                source,
                capacity=src_cfg.buffer.capacity,
                replenish_below=src_cfg.buffer.replenish_below,
                on_refill=self._notify,
                on_failed=self._source_failed,
            )
        return checkpoints

    def _make_source(self, name: str, src_cfg: object) -> LimitedSource:
        """Build a source and check that it can be read (raises what ``check()`` raises)."""
        if isinstance(src_cfg, SqlSourceConfig):
            from sources.sql import SqlSource

            source = SqlSource(
                name, src_cfg, is_done=self._done_lookup(name),
                range_rows=range_rows(src_cfg, self.cfg),
            )  # fmt: skip
            _check(source)
            return source
        from sources.sqs import SqsSource

        assert isinstance(src_cfg, SqsSourceConfig)
        sqs = SqsSource(
            name, src_cfg, claims=claims_lookup(self.ledger, name),
            on_poison=self.ledger.sources.record_poison,
        )
        _check(sqs)
        # Keep claimed messages invisible while their batch is imported.
        self._periodic.add_job(
            sqs.extend_visibility, "interval", seconds=max(1.0, src_cfg.visibility_timeout / 3),
            id=f"heartbeat-{name}", max_instances=1, coalesce=True,
        )
        return sqs

    def _done_lookup(self, name: str) -> Callable[[Sequence[KeyTuple]], set[KeyTuple]]:
        """For sweep mode: which of these keys some batch already claimed."""

        def lookup(keys: Sequence[KeyTuple]) -> set[KeyTuple]:
            encoded = {encode_key(key): key for key in keys}
            taken = self.ledger.reads.claimed_keys(name, list(encoded))
            return {encoded[text] for text in taken}

        return lookup

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

    def _heartbeat(self) -> None:
        self.ledger.owners.heartbeat()

    def _reap(self) -> None:
        if self.loop is not None:
            self.loop.adopt(self.ledger.orphans(self.queues, dead_after=6 * self.heartbeat_every))

    def _watch_config(self) -> None:
        mtime = _mtime(self.config_path)
        if mtime != self._config_mtime:
            self._config_mtime = mtime
            self.reload("the file changed")

    def reload(self, reason: str) -> bool:
        """Re-read the config; apply the strategy, batch, backpressure, retry and windows.

        An invalid file is logged and ignored: the running config stays.
        Changes to sources, targets, the ledger or Spark need a restart.
        """
        from config.errors import ConfigError
        from config.loader import load_config

        try:
            new = load_config(self.config_path)
        except ConfigError as error:
            log.warning("config reload (%s) ignored, the running config stays: %s", reason, error)
            return False
        fixed = [f for f in ("ledger", "work_dir", "spark", "targets")
                 if getattr(new, f) != getattr(self.cfg, f)]
        if _without_buffers(new) != _without_buffers(self.cfg):
            fixed.append("sources")
        if fixed:
            log.warning("config reload: %s changed; that takes a restart", ", ".join(fixed))
        # Sources stay as they run (buffers too: one that follows batch.max_items
        # is sized at start), and so does whatever else takes a restart.
        new = new.model_copy(update={f: getattr(self.cfg, f) for f in [*fixed, "sources"]})
        self.cfg = new
        for name, queue in self.queues.items():
            src_cfg = new.sources.get(name)
            if isinstance(src_cfg, SqlSourceConfig) and hasattr(queue.wrapped, "range_rows"):
                queue.wrapped.range_rows = range_rows(src_cfg, new)  # ranges planned from now
        if self.loop is not None:
            self.loop.reconfigure(new)
        log.info("config reloaded (%s): strategy, batch, backpressure, retry, windows", reason)
        return True

    def run(self, *, until_drained: bool = False) -> RunSummary:
        """Run until drained (or stopped); returns the summary and the exit code."""
        self.ledger.owners.register()
        checkpoints = self._build_sources()
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
            self.cfg, self.queues, strategy, self.ledger, sink, checkpoints
        )
        if self.wall_clock is not None:
            self.loop.wall_clock = self.wall_clock
        self._start_probe_and_metrics(self.loop)
        if self.reporter is not None:
            reporter, loop = self.reporter, self.loop
            self._periodic.add_job(
                lambda: reporter(loop.stats, self.queues), "interval",
                seconds=self.report_every, id="progress", max_instances=1, coalesce=True,
            )
        jobs = {"lease-heartbeat": self._heartbeat, "reaper": self._reap}
        for job_id, job in jobs.items():
            self._periodic.add_job(job, "interval", seconds=self.heartbeat_every, id=job_id,
                                   max_instances=1, coalesce=True)
        if self._config_mtime is not None:
            self._periodic.add_job(self._watch_config, "interval", seconds=2.0,
                                   id="config-reload", max_instances=1, coalesce=True)
        self._periodic.start()
        for queue in self.queues.values():
            queue.start()
        try:
            stats = self.loop.run(until_drained=until_drained)
        finally:
            self._shutdown()
        if self.reporter is not None:
            self.reporter(stats, self.queues)
        failures = tuple(self._failures)
        # A failed source makes the run fail even when a signal also came:
        # exit 1 says "look at this", and the summary still names the signal.
        if failures:
            return RunSummary(stats, 1, self.signal, failures)
        if self.signal is not None:
            return RunSummary(stats, 128 + self.signal, self.signal)
        failed = stats.batches_dead > 0 or stats.rows_rejected > 0
        return RunSummary(stats, 1 if failed else 0)

    def _start_probe_and_metrics(self, loop: MainLoop) -> None:
        probe_cfg = self.cfg.backpressure.probe
        if probe_cfg is not None:
            from scheduler.probe import build_probe, check_sql

            if probe_cfg.sql is not None and probe_cfg.url is not None:
                check_sql(probe_cfg.url, probe_cfg.sql)  # a refused query is a config error
            self.probe = build_probe(probe_cfg, on_change=loop.notify)
            loop.probe = self.probe
            self.probe.schedule(self._periodic)
        if self.cfg.metrics_port is not None:
            from scheduler.observe.metrics import start_metrics

            self._metrics = start_metrics(
                self.cfg.metrics_port, loop, self.queues, probe=self.probe
            )
            log.info("metrics on http://127.0.0.1:%d/metrics", self._metrics.port)

    def _shutdown(self) -> None:
        # Refills first, so nothing new lands while we close.
        self._periodic.shutdown(wait=False)
        for queue in self.queues.values():
            queue.stop(timeout=5.0)
        if self.probe is not None:
            self.probe.stop(timeout=2.0)
        if self._metrics is not None:
            self._metrics.stop()
        # Buffered items no batch claimed: the refills are stopped, so none
        # lands after this; held ones stay with their (failed) batch, whose
        # retry reads its manifest. Before close: SQS needs its client.
        for name, queue in self.queues.items():
            given = queue.give_back()
            log.info("source %s: %d buffered items given back", name, given)
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
        if threading.current_thread() is not threading.main_thread():
            return

        def handle(signum: int, _frame: FrameType | None) -> None:
            if self.signal is not None:
                log.error("second signal: exiting without waiting for in-flight batches")
                os._exit(128 + signum)
            self.signal = signum
            log.warning("%s: no new batches; draining (signal again to force)",
                        signal.Signals(signum).name)
            if self.loop is not None:
                self.loop.request_stop()

        def hangup(_signum: int, _frame: FrameType | None) -> None:
            # Off the main thread: the handler must return at once.
            threading.Thread(target=self.reload, args=("SIGHUP",), daemon=True).start()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
        signal.signal(signal.SIGHUP, hangup)


# Batch states whose keys' messages may be deleted. Dead too: the loop deleted
# a dead batch's messages when it died (the ledger keeps the payloads for
# `sluice retry`); a late duplicate held back would cycle on the queue until an
# operator acts, and the source would never count as drained.
_MESSAGES_DONE = frozenset({"done", "dead"})


def _without_buffers(cfg: SluiceConfig) -> dict[str, Any]:
    """The sources as configured, less their buffers (which may follow ``batch.max_items``)."""
    return {name: src.model_dump(exclude={"buffer"}) for name, src in cfg.sources.items()}


def range_rows(src_cfg: SqlSourceConfig, cfg: SluiceConfig) -> int:
    """Rows per range a keyset source plans: a page, but never more than a batch or the gate's room.

    A range is the smallest piece a batch is made of, so a larger one could
    never be fed whole.
    """
    return max(1, min(src_cfg.page_size, cfg.batch.max_items, cfg.backpressure.max_pending))


def claims_lookup(
    ledger: Ledger, name: str
) -> Callable[[list[KeyTuple]], dict[KeyTuple, bool]]:
    """For an SQS source: which keys some batch claimed, each with whether it is done.

    "Done" here means its messages may be deleted: the batch is done or dead.
    A key held by a batch that is claimed, importing or failed maps to False,
    and its messages are kept until that batch ends (see
    :class:`sources.sqs.SqsSource`). One ledger query per call.
    """

    def lookup(keys: list[KeyTuple]) -> dict[KeyTuple, bool]:
        encoded = {encode_key(key): key for key in keys}
        states = ledger.reads.key_states(name, list(encoded))
        return {encoded[text]: state in _MESSAGES_DONE for text, state in states.items()}

    return lookup


def _check(source: SqlSource | SqsSource) -> None:
    """Run the source's start check; close its connections if it fails."""
    try:
        source.check()
    except BaseException:
        source.close()
        raise


def _resume(source: LimitedSource, checkpoint: Checkpoint) -> None:
    """Start a keyset or incremental SQL source after its claim high-water mark."""
    from sources.sql import SqlSource

    if isinstance(source, SqlSource) and checkpoint.high_water is not None:
        source.reset(tuple(checkpoint.high_water))


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


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
        f"({s.items.get(source, 0):,} claimed)"
        for source in sorted(set(s.items) | set(s.rows_by_source))
    )
    lines.extend(
        f"  target {name:<20} {rows:>12,} rows" for name, rows in sorted(s.rows_by_target.items())
    )
    lines.append(
        f"  failed attempts {s.batches_failed}, dead batches {s.batches_dead}, "
        f"rejected rows {s.rows_rejected}"
    )
    lines.extend(f"  failed: {failure}" for failure in summary.failures)
    if summary.signal is not None:
        lines.append(f"  stopped by {signal.Signals(summary.signal).name}")
    return "\n".join(lines)
