"""Processes sluice starts for Spark, started deaf to the signals that stop sluice.

A service manager stops a service by signalling all of it: ``kill -TERM
-PGID`` from a shell's job control, every process of the cgroup under
systemd's default ``KillMode=control-group``. The Spark JVM (and each
``spark-submit`` of the submit sink) would die at once, in the middle of the
batches sluice is draining. So they start with SIGTERM, SIGHUP and SIGINT
ignored: an ignored disposition survives ``exec``, and the JVM installs no
handler for a stop signal it finds ignored (that is how PySpark already
keeps SIGINT from it). sluice alone decides when they end: after the drain
it stops the SparkContext, and the JVM exits when sluice's end of its stdin
closes; a forced stop kills them (SIGKILL). Python workers are covered by
:mod:`spark_jobs.tasks.worker_daemon`.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

_installed = threading.Lock()
_output: list[Path] = []  # where JVMs started from now on write their stdout and stderr


def send_spark_output_to(path: Path | None) -> None:
    """Spark JVMs started from now on write their output to ``path`` (None: the terminal).

    The JVM writes its start-up lines (``WARNING: Using incubator
    modules``, ``Setting default log level``) and its log to the file
    descriptors it inherits: across a live progress display, unless they
    go to a file. Takes effect through :func:`deafen_spark_jvm`.
    """
    _output[:] = [] if path is None else [path]


def ignore_stop_signals() -> None:
    """A ``preexec_fn``: the child ignores SIGTERM, SIGHUP and SIGINT (and so does its ``exec``)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _chain(first: Callable[[], Any] | None) -> Callable[[], None]:
    def preexec() -> None:
        if first is not None:
            first()
        ignore_stop_signals()

    return preexec


class _DeafPopen(subprocess.Popen):
    """``Popen`` whose child ignores the stop signals, after the caller's own ``preexec_fn``."""

    def __init__(self, args: Any, **kwargs: Any) -> None:
        kwargs["preexec_fn"] = _chain(kwargs.get("preexec_fn"))
        if not _output or "stdout" in kwargs or "stderr" in kwargs:
            super().__init__(args, **kwargs)
            return
        with _output[0].open("ab") as log:  # the child keeps its own copy of the descriptor
            super().__init__(args, stdout=log, stderr=subprocess.STDOUT, **kwargs)


def deafen_spark_jvm() -> None:
    """Make every Spark JVM this process launches from now on ignore the stop signals.

    PySpark starts its JVM in ``pyspark.java_gateway.launch_gateway`` with a
    ``preexec_fn`` of its own (SIGINT ignored) that a caller cannot extend;
    its module's ``Popen`` is replaced, which is used for nothing else.
    Idempotent and thread-safe.
    """
    import pyspark.java_gateway as gateway

    with _installed:
        if gateway.Popen is not _DeafPopen:
            gateway.Popen = _DeafPopen  # type: ignore[misc, assignment]
