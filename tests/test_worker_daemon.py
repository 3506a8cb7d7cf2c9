"""The Python worker daemon sluice gives Spark: deaf to SIGTERM, cheap between tasks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> str:
    """Run ``code`` in a fresh interpreter: freezing the GC must not touch pytest's."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_collection_between_tasks_leaves_long_lived_objects_out_of_the_next():
    out = _run(
        """
        import gc
        import spark_jobs.tasks.worker_daemon
        from pyspark import daemon

        assert gc.get_freeze_count() == 0
        long_lived = [[i] for i in range(50_000)]
        daemon.gc.collect()                      # what pyspark runs after each task
        frozen = gc.get_freeze_count()
        garbage = []
        garbage.append(garbage)                  # a cycle made by the next task
        del garbage
        found = daemon.gc.collect()
        print(frozen >= 50_000, found >= 1, len(long_lived))
        """
    )
    assert out == "True True 50000"


def test_the_daemon_never_arms_sigterm():
    out = _run(
        """
        import signal
        import spark_jobs.tasks.worker_daemon
        from pyspark import daemon

        daemon.signal.signal(signal.SIGTERM, lambda *a: None)
        daemon.signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_IGN,
              signal.getsignal(signal.SIGCHLD) is signal.SIG_DFL)
        """
    )
    assert out == "True True"
