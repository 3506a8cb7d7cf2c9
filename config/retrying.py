"""Retries with exponential backoff: the one helper for refills, the ledger and batch retries.

:class:`Backoff` says how long to wait before a retry; :func:`retrying`
calls a function until it succeeds, fails in a way a retry cannot help, or
has failed for longer than a grace period. Callers decide what is worth
retrying (for databases: :func:`config.errors.is_transient`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """``base * 2**(attempt-1)`` seconds, at most ``cap``.

    With ``jitter`` a delay is drawn uniformly between 0 and that ("full
    jitter"): many clients retrying against one server that came back do not
    all knock at once.
    """

    base: float
    cap: float
    jitter: bool = False

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1 for the first)."""
        ceiling = min(self.cap, self.base * 2 ** min(max(attempt - 1, 0), 32))
        return (rng or random).uniform(0, ceiling) if self.jitter else ceiling


def retrying(
    fn: Callable[[], T],
    *,
    should_retry: Callable[[BaseException], bool],
    backoff: Backoff,
    grace: float,
    on_retry: Callable[[int, float, BaseException], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``fn()``, retried while it raises what ``should_retry`` accepts, for up to ``grace`` s.

    The first failure starts the grace period; the last retry is made as it
    ends (a wait is cut short to end there), and its error is raised.
    ``on_retry(attempt, delay, error)`` is called before each wait (to log
    it). ``grace`` 0: no retry at all.
    """
    attempt = 0
    started: float | None = None
    while True:
        try:
            return fn()
        except Exception as error:
            now = clock()
            started = now if started is None else started
            left = started + grace - now
            if not should_retry(error) or left <= 0:
                raise
            attempt += 1
            delay = min(backoff.delay(attempt), left)
            if on_retry is not None:
                on_retry(attempt, delay, error)
            sleep(delay)
