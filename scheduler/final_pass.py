"""A cutover's final pass: every source read again by a read that began after the flag.

A source found at its end before the flag (a keyset walk at the table's end,
resting until its next poke) would otherwise count as drained at once, and
the rows written since its last read would be left to whoever runs after
this daemon.
"""

from __future__ import annotations

from collections.abc import Mapping

from sources.queueing import QueueingLimitedSource


class FinalPass:
    """A final pass, asked for on any thread; it begins at the loop's first look
    (:meth:`read_all`, on the loop's thread: the queues are the loop's)."""

    def __init__(self) -> None:
        self._marks: dict[str, int] | None = None

    def read_all(self, queues: Mapping[str, QueueingLimitedSource]) -> bool:
        """Whether every queue (one added since counts from its first read) saw its source
        through a read that began after this pass did and succeeded. The first call begins
        the pass: it marks each queue's reads so far, asks each source again, and says no."""
        if self._marks is None:
            self._marks = {name: q.health().reads_begun for name, q in queues.items()}
            for queue in queues.values():
                queue.poke()  # a read running now began before: the next one counts
            return False
        marks = self._marks
        return all(q.health().last_read_ok > marks.get(n, 0) for n, q in queues.items())
