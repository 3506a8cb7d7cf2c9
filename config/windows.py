"""Cron windows as the config states them: a crontab expression read as a trigger.

The config checks each ``windows:`` entry with :func:`parse_window`; the
daemon's gate (``scheduler/windows.py``) asks the triggers whether a minute
is open.
"""

from __future__ import annotations

from datetime import tzinfo

from apscheduler.triggers.cron import CronTrigger


def parse_window(expression: str, timezone: tzinfo | str = "UTC") -> CronTrigger:
    """A crontab expression as a trigger; ValueError names what is wrong."""
    try:
        return CronTrigger.from_crontab(expression, timezone=timezone)
    except ValueError as error:
        raise ValueError(f"window {expression!r} is not a crontab expression: {error}") from error
