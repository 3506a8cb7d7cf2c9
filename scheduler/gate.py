"""The backpressure gate: how many more items the downstream can take now.

Pending work is the items in batches not yet done (plus, later, a probe of the
downstream itself). Above ``max_pending`` the gate closes; it opens again only
once pending falls below ``resume_below``, so feeding does not flap around a
single threshold.
"""

from __future__ import annotations

from config.models import BackpressureConfig


class BackpressureGate:
    """Hysteresis on pending items. Not thread-safe: the main loop owns it."""

    def __init__(self, max_pending: int, resume_below: int) -> None:
        if not 0 <= resume_below <= max_pending:
            raise ValueError(
                f"resume_below ({resume_below}) must be between 0 and max_pending ({max_pending})"
            )
        self.max_pending = max_pending
        self.resume_below = resume_below
        self.is_open = True

    @classmethod
    def from_config(cls, cfg: BackpressureConfig) -> BackpressureGate:
        """The gate a config describes."""
        return cls(cfg.max_pending, cfg.resume_below)

    def observe(self, pending: int) -> None:
        """Update the gate's state for ``pending`` items not yet done.

        The loop calls this right after feeding too: otherwise a downstream
        that drains a little between ticks would keep the gate open at the
        brim, fed in slivers, and the hysteresis would never engage.
        """
        if self.is_open and pending >= self.max_pending:
            self.is_open = False
        elif not self.is_open and (pending < self.resume_below or pending == 0):
            self.is_open = True

    def room(self, pending: int) -> int:
        """Items that may be fed now, given ``pending`` items not yet done."""
        self.observe(pending)
        return max(0, self.max_pending - pending) if self.is_open else 0
