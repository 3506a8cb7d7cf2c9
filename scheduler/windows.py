"""Cron windows: feeding happens only inside them (``windows:`` in YAML).

Each window is a crontab expression read at minute granularity: the minutes
it matches are open. ``"* 22-23,0-5 * * *"`` feeds from 22:00 to 05:59;
``"* 8-17 * * mon-fri"`` during office hours. No windows: always open.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, tzinfo

from config.windows import parse_window


class Windows:
    """Whether a moment falls in one of the configured windows."""

    def __init__(self, expressions: Sequence[str], timezone: tzinfo | str = "UTC") -> None:
        self.expressions = list(expressions)
        self.triggers = [parse_window(e, timezone) for e in expressions]

    def is_open(self, now: datetime) -> bool:
        """True when ``now`` (timezone-aware) lies in a window, or when there are none."""
        if not self.triggers:
            return True
        minute = now.replace(second=0, microsecond=0)
        before = minute - timedelta(microseconds=1)
        return any(
            trigger.get_next_fire_time(None, before) == minute for trigger in self.triggers
        )
