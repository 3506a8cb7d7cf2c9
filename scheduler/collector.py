"""Garbage collection between the main loop's ticks, never inside one.

CPython's cyclic collector runs whenever allocations cross a threshold, on
whichever thread happens to allocate, and holds the GIL while it scans. With
tens of thousands of buffered records alive, a full collection takes tens of
milliseconds; landing inside a tick (while the loop claims a batch or waits on
the ledger's writer thread) it stretches that tick past the loop's latency
budget, whichever thread triggered it.

:class:`TickCollector` moves that work to a moment the loop chooses: while the
loop runs, automatic collection is off and the loop calls
:meth:`TickCollector.between_ticks` after each tick and each idle wait. It
applies the interpreter's own thresholds for the young generations, so memory
behaves as before, and runs a full collection at most every ``full_every``
seconds, and never more than :data:`FULL_SHARE` of the time: a heap that takes
0.7 s to scan (a thousand sources, their batches in flight) is scanned every
35 s, not every 10 s, where it held the GIL for a tenth of the run. Records are freed by
reference counting as always; only cycles wait for the next collection.

This is the "collect at frame boundaries" technique of latency-bound
programs, combined with the ``gc.freeze()`` the daemon applies after start-up.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["FULL_SHARE", "TickCollector"]

FULL_SHARE = 0.02
"""At most this part of the time goes to full collections
(see :meth:`TickCollector.between_ticks`)."""


class TickCollector:
    """Context manager: automatic GC off inside, collections on request.

    ``full_every`` is the time between full collections (cycles among old
    objects wait at most that long).
    """

    def __init__(self, full_every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every = full_every
        self.clock = clock
        self.collections = [0, 0, 0]  # per generation, for tests and metrics
        self.longest = 0.0  # seconds, the longest collection run here
        self._was_enabled = False
        self._last_full = clock()
        self._full_took = 0.0  # seconds, the last full collection

    def __enter__(self) -> TickCollector:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._last_full = self.clock()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._was_enabled:
            gc.enable()

    def between_ticks(self) -> None:
        """Collect what the thresholds call for; cheap when nothing is due."""
        if not self._was_enabled:
            return  # the program turned GC off itself: respect that
        young, middle, _ = gc.get_count()
        first, second, _ = gc.get_threshold()
        if first <= 0:
            return
        now = self.clock()
        if now - self._last_full >= max(self.full_every, self._full_took / FULL_SHARE):
            generation = 2
            self._last_full = now
        elif middle >= second:
            generation = 1
        elif young >= first:
            generation = 0
        else:
            return
        start = self.clock()
        gc.collect(generation)
        took = self.clock() - start
        self.longest = max(self.longest, took)
        if generation == 2:
            self._full_took = took
        self.collections[generation] += 1
