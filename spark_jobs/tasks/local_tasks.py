"""Spark tasks that need no Spark, run by worker processes of this machine: no JVM to start.

A direct load's task (:func:`spark_jobs.load.write_direct.load_directly`) reads
its batches from the source and loads them into the target itself, in
Python: on a local master Spark only schedules it, and starting Spark's JVM
for that costs ~10 s of a run and ~17 s of CPU on two cores. On a local
master :class:`sinks.spark.SparkSink` hands the imports that go that way a
:class:`SessionOnDemand` whose :class:`LocalTasks` run those tasks in worker
processes of their own, as many as the master's cores, each reused from
task to task as Spark's Python workers are; a batch that needs Spark (a
staged load, a Parquet target) starts the session then.

A worker ignores the signals that stop the service gracefully (the batch
it loads ends, as a Spark task would), and kills itself once the process
that started it is gone (a thread of its own waits on that process's
pidfd): a ``kill -9`` of sluice leaves no load running, and an uncommitted
load's transaction dies with its connection.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import SparkSession

from config.processes import pid_alive

log = logging.getLogger(__name__)

# The server that forks the workers imports what their tasks run, once, and each worker
# starts with it (each worker imported it itself in ~0.7 s, both at once on two cores).
# Process-wide, and read when the server starts: set here, before any worker.
multiprocessing.get_context("forkserver").set_forkserver_preload(
    ["spark_jobs.tasks.local_tasks", "spark_jobs.load.write_direct"]
)


class WorkerLost(RuntimeError):
    """A local task's worker process died before it answered (killed, out of memory)."""


class LocalTasks:
    """Up to ``workers`` functions at once, each in a worker process of its own."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._free: list[_Worker] = []
        self._all: list[_Worker] = []
        self._slots = threading.Semaphore(self.workers)
        self._lock = threading.Lock()
        self._closed = False

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a worker (blocks until one is free); what it returns or raises."""
        with self._slots:
            worker = self._take()
            try:
                outcome = worker.call(fn, args)
            except BaseException:
                worker.stop()  # its state is unknown: a new one takes its place
                with self._lock:
                    if worker in self._all:  # not when close() took them all
                        self._all.remove(worker)
                raise
            with self._lock:
                self._free.append(worker)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def warm(self) -> None:
        """Start the workers now, on a thread of their own: the first tasks find them
        waiting (a worker's start and its imports took ~1.4 s of the first batch's load)."""
        threading.Thread(target=self._warm, name="sluice-tasks-start", daemon=True).start()

    def _warm(self) -> None:
        try:
            for _ in range(self.workers):
                with self._lock:
                    if self._closed or len(self._all) >= self.workers:
                        return
                # Started outside the lock: the first start waits for the server's imports,
                # and a task meanwhile takes a worker of its own.
                worker = _Worker()
                with self._lock:
                    kept = not self._closed and len(self._all) < self.workers
                    if kept:
                        self._all.append(worker)
                        self._free.append(worker)
                if not kept:
                    worker.stop()
        except Exception as error:  # noqa: BLE001 - the first task starts its own, and says why
            log.warning("local task workers not started ahead: %s", error)

    def close(self) -> None:
        """Stop every worker, a running task's too (its load's transaction rolls back)."""
        with self._lock:
            self._closed = True
            workers, self._all, self._free = self._all, [], []
        for worker in workers:
            worker.stop()

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise WorkerLost("the local tasks are closed")
            if self._free:
                return self._free.pop()
            worker = _Worker()
            self._all.append(worker)
            return worker


class _Worker:
    """One worker process and the pipe its calls go through."""

    def __init__(self) -> None:
        # Forked from a single-threaded server, never from the threaded daemon.
        context = multiprocessing.get_context("forkserver")
        self._pipe, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(theirs, os.getpid()), name="sluice-task", daemon=True
        )
        self._process.start()
        theirs.close()
        self._stopping = threading.Lock()
        self._stopped = False

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        self._pipe.send_bytes(cloudpickle.dumps((fn, args)))
        try:
            return cloudpickle.loads(self._pipe.recv_bytes())
        except (EOFError, OSError) as error:
            raise WorkerLost(
                f"a local task's worker (pid {self._process.pid}) died, exit code "
                f"{self._process.exitcode}"
            ) from error

    def stop(self) -> None:
        """Kill the process and close its pipe; once, whoever calls (close() and a
        failed call may both)."""
        with self._stopping:
            if self._stopped:
                return
            self._stopped = True
        if self._process.is_alive():
            self._process.kill()
        self._process.join(10)
        with contextlib.suppress(OSError):
            self._pipe.close()


def _serve(pipe: Connection, parent: int) -> None:
    """A worker's loop: run each call it is sent, answer what it returned or raised."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_die_with, args=(parent,), name="sluice-parent", daemon=True).start()
    while True:
        try:
            fn, args = cloudpickle.loads(pipe.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            outcome: Any = fn(*args)
        except Exception as error:  # noqa: BLE001 - raised again in the caller
            outcome = error
        try:
            pipe.send_bytes(cloudpickle.dumps(outcome))
        except Exception as error:  # noqa: BLE001 - an outcome that will not pickle
            pipe.send_bytes(cloudpickle.dumps(RuntimeError(f"{type(error).__name__}: {error}")))


def _die_with(parent: int) -> None:
    """Kill this worker once ``parent`` has ended (its parent is the forkserver, which
    outlives sluice while a worker lives: no parent-death signal would come)."""
    try:
        watched = os.pidfd_open(parent)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
    except (OSError, AttributeError):  # no pidfd (Linux before 5.3): look every second
        while pid_alive(parent):
            time.sleep(1.0)
    else:
        select.select([watched], [], [])
    os.kill(os.getpid(), signal.SIGKILL)


class SessionOnDemand:
    """A SparkSession started when first used, and the :class:`LocalTasks` (if any) that
    run the tasks needing no Spark until then (and after: Spark's job costs them nothing).

    Stands in for the SparkSession it starts: any attribute starts it. ``start``
    may be called again after the first time: it must return the same session.
    """

    def __init__(self, start: Callable[[], SparkSession], tasks: LocalTasks | None = None) -> None:
        self._start = start
        self.local_tasks = tasks

    @classmethod
    def once(cls, start: Callable[[], SparkSession]) -> SessionOnDemand:
        """A stand-in for the session ``start`` makes, calling it at most once."""
        lock = threading.Lock()
        made: list[SparkSession] = []

        def started() -> SparkSession:
            with lock:
                if not made:
                    made.append(start())
                return made[0]

        return cls(started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._start(), name)


def started(spark: SparkSession | SessionOnDemand) -> SparkSession:
    """The SparkSession itself behind ``spark`` (started now when it is a stand-in): what
    PySpark's own constructors must be given."""
    return spark._start() if isinstance(spark, SessionOnDemand) else spark


def local_tasks(spark: SparkSession | SessionOnDemand) -> LocalTasks | None:
    """The local tasks of ``spark``, when it is a :class:`SessionOnDemand`; None otherwise."""
    return spark.local_tasks if isinstance(spark, SessionOnDemand) else None
