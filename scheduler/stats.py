"""What a run did: counts the main loop keeps for the summary, progress and metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RunStats:
    """What a run did, for the summary and the progress display."""

    started: float = field(default_factory=time.monotonic)
    first_batch_at: float | None = None  # monotonic time the first batch was fed
    # When the sink could first run an import (its Sink.ready_at; None: still starting).
    sink_ready: Callable[[], float | None] = field(default=lambda: 0.0, repr=False)
    items: dict[str, int] = field(default_factory=dict)
    # Sources whose items are a stream's changes: a batch writes each key once, so fewer rows.
    streams: set[str] = field(default_factory=set)
    rows_by_source: dict[str, int] = field(default_factory=dict)
    rows_by_target: dict[str, int] = field(default_factory=dict)
    batches_done: int = 0
    batches_failed: int = 0
    batches_dead: int = 0
    rows_rejected: int = 0
    # "source.column" -> MySQL zero dates that became NULL on their way to another engine
    zero_dates: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """Rows written to targets so far."""
        return sum(self.rows_by_source.values())

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def moving(self) -> float:
        """Seconds since the first batch could import (0 before): what rates are measured over.

        That is since it was fed, or since the sink got ready when it was fed
        before (the first batches wait for the JVM's start). Start-up (the
        JVM, the sources' checks) is not migration time: a rate over it would
        understate the speed of every run.
        """
        ready = self.sink_ready()
        if self.first_batch_at is None or ready is None:
            return 0.0
        return time.monotonic() - max(self.first_batch_at, ready)
