"""Progress while a run goes: rich bars per source on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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


class BarProgress:
    """A bar per source, against a known total of rows when there is one."""

    def __init__(self, totals: Mapping[str, int], console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
        )
        self.tasks = {
            name: self.progress.add_task(name, total=total or None, rate="")
            for name, total in totals.items()
        }
        self.progress.start()

    def __call__(self, stats: RunStats, queues: Mapping[str, QueueingLimitedSource]) -> None:
        elapsed = max(stats.moving(), 1e-9)  # rates from the first batch, not the JVM start
        for name, task in self.tasks.items():
            rows = stats.rows_by_source.get(name, 0)
            self.progress.update(task, completed=rows, rate=f"{rows / elapsed:,.0f} rows/s")

    def close(self) -> None:
        """Leave the final bars on screen."""
        self.progress.stop()


def is_tty() -> bool:
    """Whether progress goes to a terminal a person watches."""
    return sys.stderr.isatty()
