"""How much the main loop may feed now: feeding windows, import slots, the backpressure gate.

Each tick the loop asks :meth:`Throttle.room` before it looks at any buffer:
nothing outside the ``windows:``, nothing while ``max_importing_batches``
batches import, and otherwise what the gate lets through given the work
pending downstream (ours in flight plus what the probe reports).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from config.models import SluiceConfig
from scheduler.gate import BackpressureGate
from scheduler.windows import Windows
from sinks.abc import Sink

if TYPE_CHECKING:
    from scheduler.probe import Probe

# The loop's logger: these lines are the loop's, as they were before the throttle had a module.
log = logging.getLogger("sluice.loop")


class Throttle:
    """The loop's limits on feeding. Not thread-safe: the loop's thread owns it.

    ``gate`` is replaced on :meth:`reconfigure`; readers on other threads
    (metrics) read whichever gate is current.
    """

    def __init__(
        self,
        cfg: SluiceConfig,
        sink: Sink,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], datetime],
    ) -> None:
        self.sink = sink
        self.clock = clock
        self.wall_clock = wall_clock
        self.backpressure = cfg.backpressure
        self.gate = BackpressureGate.from_config(cfg.backpressure)
        self.windows = Windows(cfg.windows)
        self.probe: Probe | None = None  # the downstream's own pending work, if probed
        self._window_open = True
        self._next_window_check = 0.0

    def reconfigure(self, cfg: SluiceConfig) -> None:
        """Take new backpressure and windows; the gate stays open or closed as it was."""
        self.backpressure = cfg.backpressure
        was_open = self.gate.is_open
        self.gate = BackpressureGate.from_config(cfg.backpressure)
        self.gate.is_open = was_open
        self.windows = Windows(cfg.windows)
        self._next_window_check = 0.0

    def pending(self) -> int:
        """Items not yet done downstream: ours in flight plus what the probe reports."""
        probed = self.probe.value() if self.probe is not None else 0
        return self.sink.pending_items() + probed

    def room(self) -> int:
        """Rows that may be fed now (0 or less: none)."""
        if not self._in_window():
            return 0
        if self.sink.in_flight() >= self.backpressure.max_importing_batches:
            return 0
        return self.gate.room(self.pending())

    def observe(self) -> None:
        """Let the gate see what is pending right after a batch was fed."""
        self.gate.observe(self.pending())

    def _in_window(self) -> bool:
        now = self.clock()
        if now >= self._next_window_check:
            self._next_window_check = now + 1.0
            was_open, self._window_open = self._window_open, self.windows.is_open(self.wall_clock())
            if was_open != self._window_open:
                log.info("feeding %s (windows: %s)",
                         "resumes" if self._window_open else "pauses", self.windows.expressions)
        return self._window_open
