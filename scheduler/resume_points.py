"""Incremental sources' resume points, written to the ledger a safety lag behind.

A buffer knows where its incremental walk may resume: before the first row
version it read that is not done yet (:mod:`sources.resume`). That point is
safe as soon as it is known, but a source transaction that commits late may
carry a cursor value below it, and the walk has gone past. So the point
written is the one known ``checkpoint_lag`` ago: a restart reads at least
that much of the walk again, and the ledger skips the versions it has done.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping

from config.models import SluiceConfig, SqlSourceConfig
from scheduler.ledger.checkpoints import SourceBook
from sources.queueing import QueueingLimitedSource
from sources.resume import ResumePoint

log = logging.getLogger("sluice.daemon")


class ResumePoints:
    """Writes each incremental source's resume point, ``lag`` seconds old, when it moves.

    ``save`` runs on the background scheduler and once more at shutdown,
    after the drain and before buffered items are given back.
    """

    def __init__(
        self,
        book: SourceBook,
        queues: Mapping[str, QueueingLimitedSource],
        lags: Mapping[str, float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.book = book
        self.queues = {name: queues[name] for name in lags}
        self.lags = dict(lags)
        self.clock = clock
        self._seen: dict[str, deque[tuple[float, ResumePoint]]] = {n: deque() for n in lags}
        self._saved: dict[str, ResumePoint] = {}
        self._failing = False

    @classmethod
    def of(
        cls, cfg: SluiceConfig, queues: Mapping[str, QueueingLimitedSource], book: SourceBook
    ) -> ResumePoints | None:
        """The resume points of ``cfg``'s incremental sources; None when it has none."""
        lags = {
            name: src.checkpoint_lag
            for name, src in cfg.sources.items()
            if isinstance(src, SqlSourceConfig) and src.mode == "incremental" and name in queues
        }
        return cls(book, queues, lags) if lags else None

    def save(self) -> None:
        """Note each source's point now; write the newest one at least its lag old."""
        now = self.clock()
        for name, queue in self.queues.items():
            seen = self._seen[name]
            point = queue.resume_point()
            if point is not None and (not seen or seen[-1][1] != point):
                seen.append((now, point))
            old_enough = now - self.lags[name]
            while len(seen) > 1 and seen[1][0] <= old_enough:
                seen.popleft()  # a newer point is old enough too
            if seen and seen[0][0] <= old_enough and seen[0][1] != self._saved.get(name):
                self._write(name, seen[0][1])

    def _write(self, name: str, point: ResumePoint) -> None:
        try:
            self.book.save_resume_point(name, point.after)
        except Exception as error:  # the next save writes a point at least as far on
            if not self._failing:
                log.warning("source %s: cannot save its resume point: %s", name, error)
            self._failing = True
            return
        self._failing = False
        self._saved[name] = point
