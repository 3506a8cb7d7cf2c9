"""Named crash points for the exactly-once tests (``SLUICE_FAULT``).

``SLUICE_FAULT=after_claim`` makes the process die, as ``kill -9`` would, the
first time it passes :func:`crash_point("after_claim")`; ``after_claim:3``
on the third pass. Several points may be listed, comma-separated. Unset (as
in production) a crash point costs one dictionary look-up.

Points: ``after_claim`` (a batch is claimed in the ledger, not yet handed to
the sink), ``after_target_commit`` (rows and the commit record are in the
target, the ledger does not know yet; for a stream's batch, its changes and the
target's position), ``before_ledger_done`` (the import
returned, the ledger is about to record it), ``mid_sqs_delete`` (some of a
done batch's messages are deleted, others not).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

_hits: Counter[str] = Counter()
_lock = threading.Lock()


def _armed() -> dict[str, int]:
    armed: dict[str, int] = {}
    for entry in os.environ.get("SLUICE_FAULT", "").split(","):
        name, _, nth = entry.strip().partition(":")
        if name:
            armed[name] = int(nth or 1)
    return armed


_ARMED = _armed()


def crash_point(name: str) -> None:
    """Die here, at once and without cleanup, if ``SLUICE_FAULT`` names this point."""
    if name not in _ARMED:
        return
    with _lock:
        _hits[name] += 1
        if _hits[name] != _ARMED[name]:
            return
    sys.stderr.write(f"SLUICE_FAULT: crashing at {name}\n")
    sys.stderr.flush()
    # Take the Spark JVM (our child) down too when we lead our process group,
    # as kill -9 of the daemon's group would.
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
