"""Parents first: a source with ``depends_on`` is fed only once its parents' first pass is done.

A target with enforced foreign keys rejects a child row whose parent is not
there yet. ``order: foreign_keys`` on a ``tables:`` source (or an explicit
``depends_on:``) makes each table wait for the tables it refers to: a parent's
first pass is done when its buffer found the end of the source (keyset: no
row past the high-water mark; sweep: a whole pass found nothing unclaimed;
incremental: caught up) and the ledger holds no unfinished batch of it (a
dead batch is finished: the run ends with exit 1 and the child's rows that
point at its rows land in ``_sluice_rejects``). That holds across daemons on
one ledger: the mark and the batches are the ledger's.

Once done, a parent stays done for the rest of the run: sweep and
incremental parents keep running, only their first pass gates. A child's
buffer fills while it waits (keys only, bounded by its capacity); nothing of
it is claimed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from config.models import SluiceConfig
from scheduler.ledger import UNFINISHED, Ledger
from sources.queueing import QueueingLimitedSource

log = logging.getLogger(__name__)

CHECK_EVERY = 1.0
"""Seconds between two ledger reads for the parents a held source waits for."""


class FirstPasses:
    """Which sources wait for their parents' first pass, and which parents are done."""

    def __init__(
        self,
        cfg: SluiceConfig,
        queues: Mapping[str, QueueingLimitedSource],
        ledger: Ledger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queues = queues
        self.ledger = ledger
        self.clock = clock
        self.done: set[str] = set()  # parents whose first pass is done (for good)
        self._next_check = 0.0
        self.reconfigure(cfg)

    def reconfigure(self, cfg: SluiceConfig) -> None:
        """Take the ``depends_on`` of a new config (parents already done stay done)."""
        self.parents = cfg.waits

    def waiting_for(self, source: str) -> list[str]:
        """The parents whose first pass ``source`` still waits for (none: it may be fed)."""
        return [p for p in self.parents.get(source, ()) if p not in self.done]

    def holds(self, source: str) -> bool:
        """Whether ``source`` must not be fed yet; reads the ledger at most once a second."""
        waiting = self.waiting_for(source)
        if not waiting:
            return False
        self._check()
        return bool(self.waiting_for(source))

    def _check(self) -> None:
        now = self.clock()
        if now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY
        parents = {p for ps in self.parents.values() for p in ps if p not in self.done}
        # Settled, not only exhausted: a batch the loop took from a buffer is in the ledger
        # only once its claim is written.
        at_end = [p for p in sorted(parents) if p in self.queues and self.queues[p].settled]
        if not at_end:
            return
        unfinished = {m.source for m in self.ledger.reads.batches((*UNFINISHED, "failed"), at_end)}
        for parent in at_end:
            if parent not in unfinished:
                self.done.add(parent)
                children = sorted(c for c, ps in self.parents.items() if parent in ps)
                log.info("source %s: first pass done; %s may be fed once their other parents "
                         "are done too", parent, ", ".join(children))  # fmt: skip
