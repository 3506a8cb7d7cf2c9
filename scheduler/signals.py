"""The daemon's signals: SIGTERM/SIGINT drain (a second one exits at once), SIGHUP reloads.

A drain stops feeding and lets in-flight batches finish; the exit code is
then ``128 + signal``. The forced exit leaves batches ``importing``: they are
re-run on the next start (every write is idempotent).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

# The daemon's logger: these lines are the daemon's, as they were before this module existed.
log = logging.getLogger("sluice.daemon")


class SignalHandlers:
    """Turns signals into a drain, a forced exit or a reload.

    ``stop`` asks the loop to stop feeding and drain (it runs in the signal
    handler, so it must not block); ``reload`` re-reads the config (it runs
    on a thread of its own). ``received`` is the first stop signal, if any.
    """

    def __init__(self, stop: Callable[[], None], reload: Callable[[str], object]) -> None:
        self.received: int | None = None
        self._stop = stop
        self._reload = reload

    def install(self) -> None:
        """First SIGTERM/SIGINT: stop feeding and drain. Second: exit at once."""
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGHUP, self._hangup)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None:
            log.error("second signal: exiting without waiting for in-flight batches")
            os._exit(128 + signum)
        self.received = signum
        log.warning("%s: no new batches; draining (signal again to force)",
                    signal.Signals(signum).name)
        self._stop()

    def _hangup(self, _signum: int, _frame: FrameType | None) -> None:
        # Off the main thread: the handler must return at once.
        threading.Thread(target=self._reload, args=("SIGHUP",), daemon=True).start()
