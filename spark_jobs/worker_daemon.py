"""PySpark's Python worker daemon, deaf to the stop signal a service manager sends everyone.

Spark starts its Python workers through a daemon (``python -m pyspark.daemon``)
that exits on SIGTERM and resets SIGTERM to its default action in every
worker it forks. systemd's default ``KillMode=control-group`` sends SIGTERM
to every process of the service, so a stop would kill the workers of the
batches sluice is draining. Spark runs this module instead
(``spark.python.daemon.module``, set by :func:`sinks.session.session_conf`):
the same daemon, with SIGTERM kept ignored in it and in its workers.

They still end: the daemon when the JVM closes its stdin (the JVM's stop or
exit), a worker when its socket to the JVM closes or Spark kills it (SIGKILL,
a cancelled task). SIGHUP is left alone: the daemon ignores it already and
sends it to its own process group, never to sluice's, to end its workers.
"""

from __future__ import annotations

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


# pyspark.daemon calls signal.signal() through its module global: only its
# own calls are changed, not those of anything else in the process.
daemon.signal = _deaf_signal_module()  # type: ignore[assignment]

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    daemon.manager()
