"""PySpark's Python worker daemon: deaf to a service manager's stop, quick between tasks.

Spark starts its Python workers through a daemon (``python -m pyspark.daemon``)
that exits on SIGTERM and resets SIGTERM to its default action in every
worker it forks. systemd's default ``KillMode=control-group`` sends SIGTERM
to every process of the service, so a stop would kill the workers of the
batches sluice is draining. Spark runs this module instead
(``spark.python.daemon.module``, set by :func:`spark_jobs.tasks.session.session_conf`
for a local master, whose workers are sluice's own processes):
the same daemon, with SIGTERM kept ignored in it and in its workers.

They still end: the daemon when the JVM closes its stdin (the JVM's stop or
exit), a worker when its socket to the JVM closes or Spark kills it (SIGKILL,
a cancelled task). SIGHUP is left alone: the daemon ignores it already and
sends it to its own process group, never to sluice's, to end its workers.

Between two tasks a reused worker runs a full ``gc.collect()``. A worker
holds pyarrow, SQLAlchemy and psycopg, so each full collection walked
hundreds of thousands of long-lived objects: ~85 ms of CPU per task, more
than a 10,000-row batch's COPY. Here each collection is followed by
``gc.freeze()``: what survived it (modules, the pooled engine) is left out
of later collections, which then walk only what the last task allocated.
Frozen objects are still freed when their last reference goes; only a
reference cycle among them would outlive the worker's next tasks.
"""

from __future__ import annotations

import gc
import signal
import types
from typing import Any

from pyspark import daemon


def _signal_keeping_sigterm_ignored(signum: int, handler: Any) -> Any:
    if signum == signal.SIGTERM:
        handler = signal.SIG_IGN
    return signal.signal(signum, handler)


def _deaf_signal_module() -> types.SimpleNamespace:
    """The ``signal`` module as pyspark's daemon sees it: ``signal()`` never arms SIGTERM."""
    names = {name: getattr(signal, name) for name in dir(signal) if not name.startswith("__")}
    return types.SimpleNamespace(**{**names, "signal": _signal_keeping_sigterm_ignored})


def _collect_then_freeze() -> int:
    found = gc.collect()
    gc.freeze()
    return found


# pyspark.daemon calls signal.signal() and gc.collect() through its module
# globals: only its own calls are changed, not those of anything else in
# the process.
daemon.signal = _deaf_signal_module()  # type: ignore[assignment]
daemon.gc = types.SimpleNamespace(collect=_collect_then_freeze)  # type: ignore[assignment]

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    daemon.manager()
