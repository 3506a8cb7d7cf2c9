"""Progress while a run goes: rich bars per source on a terminal, log lines otherwise.

The bars stay whole only if nothing else writes to the terminal under them:
while they are shown, sluice's log lines go through rich's console (printed
above the bars), and Spark's JVM, whose output Python cannot route, writes
to a file (:func:`sinks.children.send_spark_output_to`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from scheduler.loop import RunStats
from sources.queueing import QueueingLimitedSource

log = logging.getLogger("sluice.progress")


class LogProgress:
    """One line per report: rows so far, rows/s (since the first batch), buffered per source."""

    def __call__(self, stats: RunStats, queues: Mapping[str, QueueingLimitedSource]) -> None:
        elapsed = max(stats.moving(), 1e-9)
        parts = ", ".join(
            f"{name} {stats.rows_by_source.get(name, 0):,} (buffer {q.buffered:,})"
            for name, q in queues.items()
        )
        log.info("%s rows, %.0f rows/s: %s", f"{stats.rows:,}", stats.rows / elapsed, parts)


RATE_WINDOW = 60.0
"""Seconds of progress the rows/s and the ETA of a bar are measured over."""


class _RateColumn(ProgressColumn):
    """Rows per second over the last :data:`RATE_WINDOW` seconds."""

    def render(self, task: Task) -> Text:
        speed = task.speed
        if task.finished:  # the window may hold one step only: the whole run's rate
            speed = task.finished_speed or (
                task.completed / task.finished_time if task.finished_time else None
            )
        return Text("" if speed is None else f"{speed:,.0f} rows/s", style="progress.data.speed")


class _EtaColumn(ProgressColumn):
    """``eta 0:01:23`` at the recent rate; ``done`` once a source is done."""

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("done", style="progress.remaining")
        left = task.time_remaining
        if left is None:
            return Text("eta -:--:--", style="progress.remaining")
        minutes, seconds = divmod(int(left), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"eta {hours}:{minutes:02d}:{seconds:02d}", style="progress.remaining")


class BarProgress:
    """A bar per source, against a known total of rows when there is one.

    While the bars are shown, the root logger's handlers that write to the
    terminal write through the bars' console instead, above the bars.
    """

    def __init__(self, totals: Mapping[str, int], console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            _EtaColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            speed_estimate_period=RATE_WINDOW,
        )
        self.tasks = {
            name: self.progress.add_task(name, total=total or None)
            for name, total in totals.items()
        }
        self.progress.start()
        # On a terminal, starting replaced sys.stderr with a proxy that prints above the bars.
        self._streams = _through(sys.stderr)

    def __call__(self, stats: RunStats, queues: Mapping[str, QueueingLimitedSource]) -> None:
        for name, task in self.tasks.items():
            self.progress.update(task, completed=stats.rows_by_source.get(name, 0))

    def close(self) -> None:
        """Leave the final bars on screen; log lines go to the terminal again."""
        self.progress.stop()
        for handler, stream in self._streams.items():
            handler.setStream(stream)


def _through(proxy: TextIO) -> dict[logging.StreamHandler[TextIO], TextIO]:
    """Point the root logger's stderr/stdout handlers at ``proxy``; their old streams."""
    terminal = {sys.__stderr__, sys.__stdout__, sys.stderr, sys.stdout}
    moved: dict[logging.StreamHandler[TextIO], TextIO] = {}
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in terminal:
            moved[handler] = handler.stream
            handler.setStream(proxy)
    return moved


def is_tty() -> bool:
    """Whether progress goes to a terminal a person watches."""
    return sys.stderr.isatty()
