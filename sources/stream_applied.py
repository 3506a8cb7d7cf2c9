"""What a stream source handed out, against what its target holds.

A :class:`~sources.stream.StreamSource` hands out the transactions it read as
spans; its target records the position of the last change it applied
(:mod:`spark_jobs.changes.apply_changes`). :class:`Applied` keeps, per transaction read
and not yet acknowledged, its events, commit time, commit LSN and rows, and
answers from the target's position what the slot may forget, what still waits
and how far behind the target is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import cast

Position = tuple[int, int]

FRESH_END = 2.0
"""Seconds after a read that reached the source's end that the stream counts as caught up
(a daemon asks a stream at its end every 0.2 s)."""


class Applied:
    """The transactions handed out (by end LSN) against the target's position, which
    ``committed`` reads; thread-safe under ``lock`` (the source's own)."""

    def __init__(
        self, committed: Callable[[], list[int] | None] | None, lock: threading.Lock
    ) -> None:
        self._committed = committed
        self._lock = lock
        # Per transaction read, not yet acknowledged: events, commit time, commit LSN, rows.
        self._txns: dict[int, tuple[int, float, int, int]] = {}
        self.position: tuple[Position, float] | None = None  # the target's, and its commit
        self.held: Position | None = None  # the target's position, as last read
        self.acked = 0  # the slot was acknowledged up to here
        self.at_end = False  # the last read reached the source's end, nothing left to hand out
        self.at_end_seen = 0.0  # when a read last did (time.time())

    def read(self, end: int, events: int, committed_at: float, begin: int, rows: int) -> None:
        """A transaction handed out (under the lock): ``events`` of ``rows`` rows."""
        self._txns[end] = (events, committed_at, begin, rows)

    def messages(self) -> int:
        """About how many of the slot's messages the transactions kept took."""
        with self._lock:
            return sum(n + 3 for n, _, _, _ in self._txns.values())

    def learn(self) -> int:
        """Read the target's position; the last transaction whose every event it holds: the
        one at that position when all its events are in (the target's truth, not a batch's
        end: a dead batch is not in, and a restart knows only that), else what was
        acknowledged before."""
        held = None if self._committed is None else self._committed()
        if not held:
            return 0
        at = cast(Position, tuple(held))
        with self._lock:
            self.held = at
            events, committed, _, _ = self._txns.get(at[0], (-1, 0.0, 0, 0))
            # A transaction the target holds part of (or one not read in this process) stays
            # in the slot: the server skips a transaction whose commit lies before the slot's
            # position, and an end LSN minus one is past its commit, so its other changes
            # would never come again after a restart.
            complete = at[0] if events == at[1] else self.acked
            for lsn in [lsn for lsn in self._txns if lsn <= complete]:
                del self._txns[lsn]
            if committed:
                self.position = (at, committed)
        return complete

    def needs_from(self, fed: bool, resumed: Position | None, read_to: int) -> int | None:
        """Of a shared slot, the position before which this table needs nothing again (under
        the lock): the commit of the first transaction read whose events the target does
        not all hold (a slot at a commit still has that transaction), or, with none, as far
        as the slot was read, ``read_to`` (what lies between is other tables' or applied).
        None holds the slot where it is: nothing read since the start (``fed``), or batches
        claimed before it (up to ``resumed``) not yet in the target."""
        if not fed:
            return None
        if resumed is not None and (self.held is None or self.held < resumed):
            return None
        waiting = self.begins()
        return min(waiting) if waiting else read_to

    def begins(self) -> list[int]:
        """The commit LSNs of the transactions kept (under the lock)."""
        return [begin for _, _, begin, _ in self._txns.values()]

    def waiting(self) -> tuple[int, list[float]]:
        """The rows handed out that the target does not hold, and their commit times."""
        with self._lock:
            applied = self.position[0][0] if self.position is not None else 0
            ahead = [(r, at) for lsn, (_, at, _, r) in self._txns.items() if lsn > applied]
        return sum(r for r, _ in ahead), [at for _, at in ahead]

    def saw_end(self, at_end: bool) -> None:
        """Whether the last read reached the source's end with nothing left to hand out."""
        self.at_end = at_end
        if at_end:
            self.at_end_seen = time.time()

    def fresh_end(self, now: float | None = None) -> bool:
        """The last read reached the source's end, and not long ago."""
        return self.at_end and (now or time.time()) - self.at_end_seen <= FRESH_END

    def lag(self, now: float | None = None) -> float | None:
        """Seconds the target is behind the source: the commit time of the oldest change not
        yet applied against ``now``; 0 when every change read is applied and a read reached
        the source's end in the last :data:`FRESH_END` seconds (else the time since it did);
        None before anything was read."""
        _, waiting = self.waiting()
        if waiting:
            return max(0.0, (now or time.time()) - min(waiting))
        if not self.at_end:
            return None
        # At the end when last read: behind by no more than the time since (that read may
        # be a while ago when the source was not asked again).
        since = (now or time.time()) - self.at_end_seen
        return 0.0 if self.fresh_end(now) else since
