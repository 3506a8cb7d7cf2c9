"""Prometheus ``/metrics`` for a running daemon (``metrics_port:``).

Pull-based: :class:`SluiceCollector` reads the loop's stats, each buffer's
health, each source's batch size and its database's limits in force, the
ETA's latest estimate (:mod:`.eta`) with the change streams' health its
report carries (:mod:`.streams`), the sink's pending work and the gate
when Prometheus scrapes, on the HTTP server's thread, so the main loop does
no extra work per tick. Ledger
counts (batches per state, rows done, across every daemon on the ledger) need
a query, so they are cached for ``ledger_ttl`` seconds: a scrape storm cannot
load the ledger. Served through prometheus_client's WSGI app on a registry of
its own, so only sluice's metrics appear and two daemons in one process
(tests) do not clash, by the endpoint of :mod:`.http`, which serves the other
paths the caller routes beside it (``/record``, the status page).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler.ledger.reads import LedgerReads, StateCounts
from scheduler.observe.eta import EtaTracker
from scheduler.observe.http import HttpEndpoint, WsgiApp, serve
from sources.queueing import QueueingLimitedSource

if TYPE_CHECKING:
    from scheduler.loop import MainLoop
    from scheduler.probe import Probe

log = logging.getLogger("sluice.metrics")



class SluiceCollector(Collector):
    """Reads a running loop's state at scrape time. Never blocks the loop.

    Everything it reads is either a thread-safe snapshot (``health()``, the
    sink's counters) or a plain value copied under the GIL (the stats dicts).
    """

    def __init__(
        self,
        loop: MainLoop,
        queues: Mapping[str, QueueingLimitedSource],
        *,
        probe: Probe | None = None,
        ledger_ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        eta: EtaTracker | None = None,
    ) -> None:
        self.loop = loop
        self.queues = dict(queues)
        self.probe = probe
        self.eta = eta
        self.ledger_ttl = ledger_ttl
        self.clock = clock
        self._ledger_lock = threading.Lock()  # one query at a time, however many scrapes
        # Not the daemon's reads, which wait out a ledger outage for minutes: a
        # scrape answers at once, with the last counts while the ledger is away.
        self._reads = LedgerReads(loop.ledger.engine)
        self._ledger_counts: StateCounts = {}
        self._ledger_read_at: float | None = None
        self._ledger_errors = 0

    def describe(self) -> Iterable[Metric]:
        # Registering must not run a ledger query: the names need no checking
        # in a registry of our own.
        return []

    def collect(self) -> Iterable[Metric]:
        yield from self._buffers()
        yield from self._sizes_and_limits()
        yield from self._eta()
        yield from self._streams()
        yield from self._flow()
        yield from self._run_totals()
        yield from self._ledger()

    def _buffers(self) -> Iterable[Metric]:
        buffered = GaugeMetricFamily(
            "sluice_buffer_items", "Items buffered in memory, ready to feed.", labels=["source"])
        held = GaugeMetricFamily(
            "sluice_held_items", "Items handed to batches not yet done.", labels=["source"])
        exhausted = GaugeMetricFamily(
            "sluice_source_exhausted", "1 when the last refill found the source empty.",
            labels=["source"])
        refilling = GaugeMetricFamily(
            "sluice_refilling", "1 while a refill runs or waits to retry.", labels=["source"])
        errors = CounterMetricFamily(
            "sluice_refill_errors", "Refills that failed.", labels=["source"])
        in_a_row = GaugeMetricFamily(
            "sluice_refill_consecutive_errors", "Refills failed since the last success.",
            labels=["source"])
        failing = GaugeMetricFamily(
            "sluice_source_failing_seconds", "Seconds its refills have failed in a row, or "
            "its database has not answered after a batch failed (unreachable since); 0 while "
            "they succeed.", labels=["source"])
        away = self.loop.inflight.away
        for name, queue in self.queues.items():
            health = queue.health()
            gone = None if away is None else away.of(name)
            failing.add_metric([name], health.failing_for() or (gone[0] if gone else 0.0))
            buffered.add_metric([name], health.buffered)
            held.add_metric([name], health.held)
            exhausted.add_metric([name], int(health.exhausted))
            refilling.add_metric([name], int(health.refilling))
            errors.add_metric([name], health.errors)
            in_a_row.add_metric([name], health.consecutive_errors)
        return [buffered, held, exhausted, refilling, errors, in_a_row, failing]

    def _sizes_and_limits(self) -> Iterable[Metric]:
        size = GaugeMetricFamily(
            "sluice_batch_size_items", "Items (rows, for ranges) the next batch may hold.",
            labels=["source"])
        rate = GaugeMetricFamily(
            "sluice_source_rows_per_s_limit", "Rows/s this daemon may read from the source's "
            "database now: its share of max_rows_per_s, times the latency factor.",
            labels=["source"])
        factor = GaugeMetricFamily(
            "sluice_source_rate_factor", "The latency feedback's part of the source database's "
            "rate (1: all; halved while its key queries are slow).", labels=["source"])
        conns = GaugeMetricFamily(
            "sluice_source_connections_limit", "Connections this daemon may open to the "
            "source's database (its share of max_connections).", labels=["source"])
        held = GaugeMetricFamily(
            "sluice_source_connections_held", "Connections this daemon holds to the source's "
            "database (key queries and batches' reads).", labels=["source"])
        budgets = self.loop.inflight.budgets
        for name in self.queues:
            size.add_metric([name], self.loop.batch_size(name))
            budget = None if budgets is None else budgets.of(name)
            if budget is None:
                continue
            factor.add_metric([name], budget.factor)
            held.add_metric([name], budget.held)
            if (share := budget.rate_share) is not None:
                rate.add_metric([name], share)
            if (connections := budget.connection_share) is not None:
                conns.add_metric([name], connections)
        return [size, rate, factor, conns, held]

    def _eta(self) -> Iterable[Metric]:
        if self.eta is None:
            return []
        report = self.eta.latest()
        eta = GaugeMetricFamily(
            "sluice_eta_seconds", "Seconds until the source is done, at its recent rate "
            "(0: done; absent: not known yet).", labels=["source"])
        left = GaugeMetricFamily(
            "sluice_left_items", "Rows (keys, messages) still to migrate: the source's "
            "backlog at its last count, less what was done since.", labels=["source"])
        done = GaugeMetricFamily(
            "sluice_source_done", "1 when the source is done: exhausted, nothing buffered or "
            "importing, nothing left.", labels=["source"])
        for name, source in report.sources.items():
            done.add_metric([name], int(source.done))
            if source.eta_s is not None:
                eta.add_metric([name], source.eta_s)
            if source.left is not None:
                left.add_metric([name], source.left)
        overall = GaugeMetricFamily(
            "sluice_overall_eta_seconds", "Seconds until every source is done (absent: not "
            "known yet).")
        if report.eta_s is not None:
            overall.add_metric([], report.eta_s)
        return [eta, left, done, overall]

    def _streams(self) -> Iterable[Metric]:
        """The change streams' health at the watch's last poll (the ETA's report); none
        served by a daemon without a stream source."""
        if self.eta is None or not self.eta.streams.sources:
            return []
        lag = GaugeMetricFamily(
            "sluice_stream_lag_seconds", "Seconds the target is behind the source's change "
            "stream (0: caught up; absent: nothing read yet).", labels=["source"])
        waiting = GaugeMetricFamily(
            "sluice_stream_changes_waiting", "Changes read from the stream and not yet in the "
            "target.", labels=["source"])
        read = CounterMetricFamily(
            "sluice_stream_changes_read", "Changes read from the stream since this daemon "
            "started.", labels=["source"])
        retained = GaugeMetricFamily(
            "sluice_stream_retained_wal_bytes", "WAL the stream's slot keeps on the source "
            "server (absent: unknown).", labels=["source"])
        limit = GaugeMetricFamily(
            "sluice_stream_max_retained_wal_bytes", "The retained WAL over which sluice warns "
            "(stream.max_retained_wal).", labels=["source"])
        caught_up = GaugeMetricFamily(
            "sluice_stream_caught_up", "1 when the stream is at the source's end and every "
            "change read is in the target.", labels=["source"])
        for name, view in sorted(self.eta.latest().streams.items()):
            if view.lag_s is not None:
                lag.add_metric([name], view.lag_s)
            waiting.add_metric([name], view.waiting)
            read.add_metric([name], view.changes_read)
            if view.retained_bytes is not None:
                retained.add_metric([name], view.retained_bytes)
            if view.max_retained_wal:
                limit.add_metric([name], view.max_retained_wal)
            caught_up.add_metric([name], int(view.caught_up))
        return [lag, waiting, read, retained, limit, caught_up]

    def _flow(self) -> Iterable[Metric]:
        loop = self.loop
        gate = loop.gate
        yield _gauge("sluice_pending_items", "Items in batches submitted and not done.",
                     loop.sink.pending_items())
        yield _gauge("sluice_importing_batches", "Batches submitted and not done.",
                     loop.sink.in_flight())
        yield _gauge("sluice_gate_open", "1 while the backpressure gate lets batches through.",
                     int(gate.is_open))
        yield _gauge("sluice_max_pending_items", "Pending items at which the gate closes.",
                     gate.max_pending)
        yield _gauge("sluice_resume_below_items", "Pending items under which it opens again.",
                     gate.resume_below)
        if self.probe is not None:
            reading = self.probe.reading()
            yield _gauge("sluice_probe_up", "1 when the downstream probe's value is known.",
                         int(reading.value is not None))
            yield _gauge("sluice_probe_pending_items", "Pending work the downstream reports.",
                         reading.value or 0)

    def _run_totals(self) -> Iterable[Metric]:
        stats = self.loop.stats
        yield _counter("sluice_items_claimed", "Keys claimed into batches by this run.",
                       "source", dict(stats.items))
        yield _counter("sluice_rows_written", "Rows written by this run, per source.",
                       "source", dict(stats.rows_by_source))
        yield _counter("sluice_target_rows_written", "Rows written by this run, per target.",
                       "target", dict(stats.rows_by_target))
        yield _counter("sluice_batches", "Batch outcomes in this run (failed: attempts).",
                       "outcome", {"done": stats.batches_done, "failed": stats.batches_failed,
                                   "dead": stats.batches_dead})
        yield _counter("sluice_rows_rejected", "Rows the targets refused in this run.",
                       None, {"": stats.rows_rejected})
        yield _counter("sluice_zero_dates", "MySQL zero dates that became NULL in another "
                       "engine in this run, per source.column.", "column", dict(stats.zero_dates))
        yield _gauge("sluice_run_seconds", "Seconds since this run started.", stats.elapsed())

    def _ledger(self) -> Iterable[Metric]:
        counts = self._cached_ledger_counts()
        batches = GaugeMetricFamily(
            "sluice_ledger_batches", "Batches per state in the ledger (every daemon).",
            labels=["source", "state"])
        rows = GaugeMetricFamily(
            "sluice_ledger_rows", "Rows written by done batches, per the ledger.",
            labels=["source"])
        done_rows: dict[str, int] = dict.fromkeys(self.queues, 0)
        for (source, state), (count, written) in sorted(counts.items()):
            batches.add_metric([source, state], count)
            if state == "done":
                done_rows[source] = written
        for source, written in done_rows.items():
            rows.add_metric([source], written)
        errors = CounterMetricFamily(
            "sluice_ledger_read_errors", "Scrapes whose ledger query failed.")
        errors.add_metric([], self._ledger_errors)
        return [batches, rows, errors]

    def _cached_ledger_counts(self) -> StateCounts:
        with self._ledger_lock:
            now = self.clock()
            if self._ledger_read_at is not None and now - self._ledger_read_at < self.ledger_ttl:
                return self._ledger_counts
            try:
                self._ledger_counts = self._reads.state_counts(list(self.queues))
            except Exception as error:  # a scrape must answer; keep the last counts
                self._ledger_errors += 1
                log.warning("metrics: cannot read the ledger: %s", error)
            self._ledger_read_at = now
            return self._ledger_counts


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(
    name: str, doc: str, label: str | None, values: Mapping[str, float]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label] if label else [])
    for key, value in sorted(values.items()):
        family.add_metric([key] if label else [], value)
    return family


MetricsServer = HttpEndpoint
"""The running endpoint (``/metrics`` and the routes beside it); call it to stop serving."""


def start_metrics(
    port: int,
    loop: MainLoop,
    queues: Mapping[str, QueueingLimitedSource],
    *,
    host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
    token: str | None = None,
    probe: Probe | None = None,
    ledger_ttl: float = 5.0,
    routes: Mapping[str, WsgiApp] | None = None,
    eta: EtaTracker | None = None,
) -> MetricsServer:
    """Serve ``/metrics``, and ``routes`` beside it, on ``host:port`` (0: any
    free port); returns the stopper.

    ``routes``: more paths, each with the WSGI app that answers it (say
    ``{"/record": record_route(...)}``); they run on the server's threads.
    ``eta``: the daemon's ETA, served per source and overall.
    Loopback by default: metrics name sources and targets, so exposing them
    beyond the host is the operator's choice (``http.host``), and then every
    path asks for ``token``; ``tls``: HTTPS. Raises ``OSError`` when the
    port is taken.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SluiceCollector(loop, queues, probe=probe, ledger_ttl=ledger_ttl, eta=eta))
    endpoint = serve(port, {**(routes or {}), "/metrics": make_wsgi_app(registry)}, host=host,
                     tls=tls, token=token)  # fmt: skip
    log.info("metrics on %s://%s:%d/metrics%s", endpoint.scheme, host, endpoint.port,
             "" if token is None else " (a token asked)")  # fmt: skip
    return endpoint
