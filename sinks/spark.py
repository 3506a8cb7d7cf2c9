"""The default sink: import jobs on an in-process SparkSession.

Each import runs on its own thread, so several batches share one Spark
application; the FAIR scheduler gives each source its own pool, so a big
batch of one source does not starve the others' jobs.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from pyspark import SparkContext
from pyspark.sql import SparkSession

from config.models import JOB_GROUP, SluiceConfig
from sinks.abc import PoolSink
from sinks.pyfiles import build_pyfiles_zip, executor_archives
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_group import TABLES, group_key, run_imports, runs_without_spark
from spark_jobs.jobs.import_job import ImportResult, run_import
from spark_jobs.tasks.local_tasks import LocalTasks, SessionOnDemand
from spark_jobs.tasks.session import SparkUnavailable, build_session, local_cores

log = logging.getLogger(__name__)

T = TypeVar("T")


class SparkSink(PoolSink):
    """Runs :func:`~spark_jobs.jobs.import_job.run_import` on ``spark.max_concurrent_imports``
    threads.

    The session is built on first use when none is given (starting the JVM
    takes seconds: it happens on an import thread, not in :meth:`submit`),
    or with ``warm_up`` at once on a thread of its own, while the scheduler
    gets its first batch ready. A session built here is stopped by
    :meth:`close`; a given one, or one the process already had, is not.
    For a cluster master, sluice's code is zipped into ``work_dir`` here and
    shipped to the executors on ``spark.submit.pyFiles``, and the Python
    packages it imports there on ``spark.archives``.

    Keyset ranges waiting for a thread together (of one source, or of any
    table read natively) are imported by one Spark job
    (:func:`~spark_jobs.jobs.import_group.run_imports`), up to :attr:`max_group`
    of them: a Spark job's fixed cost is most of a small batch's.

    On a local master, with no session given, those ranges are loaded by
    local tasks (:mod:`spark_jobs.tasks.local_tasks`), not by Spark jobs: a run
    whose every batch goes that way never starts the JVM (no warm-up then),
    and a batch that needs Spark starts it. ``local_tasks``: whether they are
    (on a local master only); by default, when no session is given, which is
    what ``sluice run`` does. A given session is used by every batch unless
    ``local_tasks`` is True: then it is what a batch that needs Spark runs on
    (a test's shared session, standing in for the one ``sluice run`` starts).
    """

    label = "Spark sink"
    max_group = JOB_GROUP

    def __init__(
        self,
        cfg: SluiceConfig,
        spark: SparkSession | None = None,
        *,
        warm_up: bool = False,
        local_tasks: bool | None = None,
    ) -> None:
        self.cfg = cfg
        self._spark = spark
        self._owns_session = spark is None
        self.py_files: list[str] = []
        self.archives: list[str] = []
        if spark is None:
            self.py_files, self.archives = shipped(cfg)
        self._session_lock = threading.Lock()
        self._start_failed: SparkUnavailable | None = None
        self.ready_at: float | None = 0.0 if spark is not None else None
        if local_tasks is None:
            local_tasks = spark is None
        cores = local_cores(cfg.spark.master) if local_tasks else None
        self._tasks = LocalTasks(cores) if cores else None
        self._on_demand = SessionOnDemand(self.session, self._tasks) if self._tasks else None
        if self._tasks is not None:
            self.ready_at = time.monotonic()  # local tasks need no JVM to start
            if warm_up:
                self._tasks.warm()
            warm_up = warm_up and not runs_without_spark(cfg)
        super().__init__(cfg.spark.max_concurrent_imports, "sluice-import")
        # Job groups are per SparkContext: a prefix per sink keeps another
        # sink's close(wait=False) from cancelling this one's jobs.
        self._group_prefix = f"sluice-import-{uuid.uuid4().hex[:8]}"
        self._warm_up: threading.Thread | None = None
        if spark is None and warm_up:
            self._warm_up = threading.Thread(
                target=self._start_session, name="sluice-spark-start", daemon=True
            )
            self._warm_up.start()

    def session(self) -> SparkSession:
        """The SparkSession, started on first call (may block for seconds)."""
        with self._session_lock:
            if self._spark is None:
                # getOrCreate would hand back a context this process already
                # runs (PySpark keeps it there): then it is not ours to stop.
                if SparkContext._active_spark_context is not None:
                    self._owns_session = False
                if self._start_failed is not None:
                    # One JVM that would not start is enough: the batches
                    # queued behind the first do not each try again for seconds.
                    raise self._start_failed
                log.debug("Spark session starting (master %s)", self.cfg.spark.master)
                try:
                    self._spark = build_session(
                        self.cfg.spark, "sluice", py_files=self.py_files, archives=self.archives
                    )
                except SparkUnavailable as error:
                    self._start_failed = error
                    raise
                log.debug("Spark session started")
                self.ready_at = time.monotonic()
            return self._spark

    def _start_session(self) -> None:
        try:
            self.session()
        except Exception as error:  # the first import tries again and fails with it
            log.warning("Spark did not start: %s", error)

    def close(self, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._pending)
        self._shutdown(wait)
        if self._tasks is not None:
            self._tasks.close()  # after a wait, idle; else their loads end uncommitted
        if wait and self._warm_up is not None:
            self._warm_up.join()  # a JVM still starting would outlive the sink
        if not wait and self._spark is not None:
            for ticket in running:
                # Ends the Spark jobs of running imports; their futures fail.
                self._spark.sparkContext.cancelJobGroup(self.job_group(ticket))
        if self._owns_session and self._spark is not None:
            _stop_session(self._spark)

    def job_group(self, ticket: int) -> str:
        """The Spark job group of the ``ticket``-th batch submitted (0, 1, …)."""
        return f"{self._group_prefix}-{ticket}"

    def _group_key(self, manifest: Manifest) -> Hashable | None:
        return group_key(self.cfg, manifest)

    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        if manifest.kind == "changes":  # applied by the target's transaction alone: no Spark
            return run_import(self._on_demand, self.cfg, manifest)  # type: ignore[arg-type]
        if self._on_demand is not None and self._group_key(manifest) == TABLES:
            [outcome] = run_imports(self._on_demand, self.cfg, [manifest])  # type: ignore[arg-type]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return self._in_job_group(
            ticket, [manifest], lambda: run_import(self.session(), self.cfg, manifest)
        )

    def _run_group(
        self, tickets: list[int], manifests: list[Manifest]
    ) -> list[ImportResult | BaseException]:
        if self._on_demand is not None and self._group_key(manifests[0]) == TABLES:
            return run_imports(self._on_demand, self.cfg, manifests)  # type: ignore[arg-type]
        return self._in_job_group(
            tickets[0], manifests, lambda: run_imports(self.session(), self.cfg, manifests)
        )

    def _in_job_group(self, ticket: int, manifests: list[Manifest], run: Callable[[], T]) -> T:
        """``run()`` in the Spark pool of the batches' source and the first batch's job group."""
        sc = self.session().sparkContext
        first = manifests[0]
        names = ", ".join(m.batch_id for m in manifests)
        log.debug("batch %s: import starts", names)
        # Local properties belong to this thread (PySpark pins Python threads
        # to JVM threads), and pool threads are reused: set them every time.
        sc.setLocalProperty("spark.scheduler.pool", f"sluice-{first.source}")
        # The description is shown in the Spark UI and logs: names only, no URL.
        items = sum(m.items for m in manifests)
        sc.setJobGroup(
            self.job_group(ticket),
            f"sluice import {names}: {first.source} -> {first.target} "
            f"({first.kind}, {items} items, token {first.token})",
            interruptOnCancel=True,
        )
        try:
            return run()
        finally:
            _clear_local_properties(sc)


def shipped(cfg: SluiceConfig) -> tuple[list[str], list[str]]:
    """What a session of ``cfg`` ships to its executors: the zip of sluice's code (for
    ``spark.submit.pyFiles``) and the archive of the packages it imports there (for
    ``spark.archives``); nothing for a local master, whose tasks run on this machine.

    Built into ``work_dir`` (the packages' archive reused once built). The code's zip
    has the same bytes for the same code, and is replaced whole: a daemon's session
    and a verify's may ship it side by side.
    """
    if cfg.spark.master.startswith("local"):
        return [], []
    work = Path(cfg.work_dir)
    code = build_pyfiles_zip(work / "pyfiles" / "sluice.zip")
    return [str(code)], executor_archives(cfg.spark, work)


def start_session(cfg: SluiceConfig, app_name: str = "sluice") -> SparkSession:
    """Start (or join) ``cfg``'s SparkSession as ``sluice run``'s sink does: on a cluster,
    with sluice's code and packages shipped to the executors (:func:`shipped`), which
    need not have sluice installed. For the commands that run Spark jobs of their own
    (verify, cutover, import-batch). Raises :class:`SparkUnavailable` as
    :func:`~spark_jobs.tasks.session.build_session` does."""
    py_files, archives = shipped(cfg)
    return build_session(cfg.spark, app_name, py_files=py_files, archives=archives)


def _stop_session(spark: SparkSession) -> None:
    """Stop the session without waiting on PySpark's accumulator server.

    ``SparkContext.stop()`` stops the JVM's side in ~70 ms, then shuts down
    the Python server Spark sends accumulator updates to, and waits for its
    poll loop to notice: ~0.9 s once a Python task has connected to it, a
    second added to every run. Nothing is waiting for an update any more,
    so that shutdown finishes on a daemon thread of its own.
    """
    sc = spark.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    sc._accumulatorServer = None  # type: ignore[assignment]
    spark.stop()
    if server is not None:
        threading.Thread(
            target=server.shutdown, name="sluice-accumulators-stop", daemon=True
        ).start()


def _clear_local_properties(sc: Any) -> None:
    for key in (
        "spark.scheduler.pool",
        "spark.jobGroup.id",
        "spark.job.description",
        "spark.job.interruptOnCancel",
    ):
        sc.setLocalProperty(key, None)
