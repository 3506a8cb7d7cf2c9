"""What the daemon runs beside the main loop: periodic jobs, the downstream probe, metrics.

The periodic jobs run on one APScheduler: the lease heartbeat and the reaper
(every ``heartbeat_every`` seconds), each SQS source's visibility heartbeat,
the progress report and the config watch. The daemon adds them in its start
order, starts them once the loop is built, and stops them first on shutdown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from config.models import SluiceConfig
from scheduler.ledger import Ledger
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource

if TYPE_CHECKING:
    from scheduler.loop import MainLoop
    from scheduler.observe.eta import EtaReport
    from scheduler.observe.http import WsgiApp
    from scheduler.observe.metrics import MetricsServer
    from scheduler.observe.snapshot import StatusBoard
    from scheduler.probe import Probe

# The daemon's logger: these lines are the daemon's, as they were before this module existed.
log = logging.getLogger("sluice.daemon")

STATUS_SHARE = 0.05
"""The most of the daemon's time the status board's jobs take (measured: with 1,200
tables a refresh took over a second, every second, and the loop starved)."""


def at_most(
    job: Callable[[], object], seconds: float, share: float,
    clock: Callable[[], float] = time.monotonic,
    cost: Callable[[], float] = time.thread_time,
) -> Callable[[], None]:  # fmt: skip
    """``job`` run every ``seconds``, but skipped until ``1 / share`` times its last run's
    cost has passed (``clock``: seconds; ``cost``: the job's thread's CPU seconds; both
    injected in tests).

    The cost is the CPU time the job took from the interpreter, not its wall time: on a
    busy machine a job waits for the interpreter and the CPU, and counting that wait
    spaced a quick status job 20-60 s apart (the page then showed nothing new)."""
    due = [float("-inf")]

    def run() -> None:
        start = clock()
        if start < due[0]:
            return
        spent = cost()
        try:
            job()
        finally:
            took = cost() - spent
            due[0] = start + max(seconds, took / share) - seconds / 2  # the tick's own jitter

    return run


class Background:
    """The daemon's background work, started with the loop and stopped before the sources."""

    def __init__(
        self, ledger: Ledger, queues: Mapping[str, QueueingLimitedSource], lease_ttl: float,
        budgets: Budgets | None = None,
    ) -> None:  # fmt: skip
        self.ledger = ledger
        self.queues = queues
        self.budgets = budgets  # divided anew among the live daemons at each heartbeat
        # Leases are renewed, and dead owners' batches reaped, this often.
        self.heartbeat_every = min(5.0, lease_ttl / 3)
        self.probe: Probe | None = None
        self._periodic = BackgroundScheduler(daemon=True)
        self._metrics: MetricsServer | None = None
        self._loop: MainLoop | None = None
        self.status: StatusBoard | None = None

    def every(
        self, seconds: float, job: Callable[[], object], job_id: str, *, share: float | None = None
    ) -> None:
        """Run ``job`` every ``seconds`` once started; a run still going is not doubled.

        ``share``: the most of the daemon's time the job may take; a job that
        takes longer (a status of 1,000 tables) runs less often, so that it
        never competes with the main loop for the interpreter.
        """
        run = job if share is None else at_most(job, seconds, share)
        # misfire_grace_time None: a run made late by a busy machine runs late (coalesced
        # into one), never skipped; APScheduler's default skips a run more than 1 s late.
        self._periodic.add_job(run, "interval", seconds=seconds, id=job_id,
                               max_instances=1, coalesce=True, misfire_grace_time=None)

    def keep_status(self, loop: MainLoop) -> None:
        """Publish ``loop``'s status each second (the ETA, the page, ``/status.json``)
        and count the sources' backlogs, once started."""
        from scheduler.observe.snapshot import LEDGER_EVERY, SNAPSHOT_EVERY, status_board

        self.status = status_board(loop, self.queues)
        self.every(SNAPSHOT_EVERY, self.status.refresh, "status", share=STATUS_SHARE)
        self.every(LEDGER_EVERY, self.status.read_ledger, "status-ledger", share=STATUS_SHARE)
        # The ledger's figures (rows done, daemons, dead batches) from the
        # start, not only after the first interval; a ledger away is shown. And a
        # first snapshot now: the page answers from the moment it is served.
        self.status.read_ledger()
        self.status.refresh()

    def eta(self, *, now: bool = False) -> EtaReport | None:
        """The latest ETA (``now``: sampled now, as at the end of a run)."""
        if self.status is None:
            return None
        return self.status.eta.sample() if now else self.status.eta.latest()

    def start_probe_and_metrics(self, loop: MainLoop, cfg: SluiceConfig) -> None:
        """Probe the downstream for ``loop``'s gate, and serve metrics, as ``cfg`` asks."""
        probe_cfg = cfg.backpressure.probe
        if probe_cfg is not None:
            from scheduler.probe import build_probe, check_sql

            if probe_cfg.sql is not None and probe_cfg.url is not None:
                check_sql(probe_cfg.url, probe_cfg.sql)  # a refused query is a config error
            self.probe = build_probe(probe_cfg, on_change=loop.notify)
            loop.probe = self.probe
            self.probe.schedule(self._periodic)
        http = cfg.endpoint
        if http is not None:
            from scheduler.observe.metrics import start_metrics
            from scheduler.observe.page import status_routes
            from scheduler.observe.record import RecordRoute

            # /record reads the running config (a reload may change it) and the
            # ledger on the server's threads, with connections of its own; the
            # page and /status.json, the board's latest snapshot.
            routes: dict[str, WsgiApp] = {"/record": RecordRoute(lambda: loop.cfg)}
            if self.status is not None:
                routes.update(status_routes(self.status))
            self._metrics = start_metrics(
                http.port, loop, self.queues, host=http.host,
                tls=None if http.tls is None else http.tls.context(),
                token=None if http.token is None else http.token.get_secret_value(),
                probe=self.probe, routes=routes,
                eta=None if self.status is None else self.status.eta,
            )  # fmt: skip

    def keep_leases(self, loop: MainLoop) -> None:
        """Renew our leases, and hand ``loop`` the batches of owners that died."""
        self._loop = loop
        jobs = {"lease-heartbeat": self._heartbeat, "reaper": self._reap}
        for job_id, job in jobs.items():
            self.every(self.heartbeat_every, job, job_id)

    def start(self) -> None:
        """Start running the periodic jobs (and the backlog counts)."""
        self._periodic.start()
        if self.status is not None:
            self.status.eta.counter.start()

    def stop_schedule(self) -> None:
        """Run no more periodic jobs; one running now is not waited for (a backlog
        count, for two seconds at most)."""
        self._periodic.shutdown(wait=False)
        if self.status is not None:
            self.status.eta.counter.stop(timeout=2.0)

    def stop_probe_and_metrics(self) -> None:
        """Stop probing the downstream and serving metrics and the status page."""
        if self.probe is not None:
            self.probe.stop(timeout=2.0)
        if self._metrics is not None:
            self._metrics.stop()
        if self.status is not None:
            self.status.close()

    def _heartbeat(self) -> None:
        self.ledger.owners.heartbeat()
        self.share_budgets()

    def share_budgets(self, *, joining: bool = False) -> None:
        """Take this daemon's share of each source database's limits, by the live daemons.

        ``joining`` (at start): with other daemons live, open no connection
        to a limited database for a heartbeat and a second, by when each of
        them has taken its smaller share at its own heartbeat.
        """
        if self.budgets is None or not self.budgets.limited():
            return
        owners = self.ledger.owners
        live = owners.live()
        wait = self.heartbeat_every + 1.0 if joining and len(live) > 1 else 0.0
        if wait:
            log.info("limits: %d daemons share them; connecting to limited databases in %.0f s",
                     len(live), wait)
        self.budgets.share(live, owners.owner, join_wait=wait)

    def _reap(self) -> None:
        if self._loop is not None:
            self._loop.adopt(
                self.ledger.orphans(self.queues, dead_after=6 * self.heartbeat_every)
            )
