"""Progress while a run goes: rich bars per source on a terminal, log lines otherwise.

The bars stay whole only if nothing else writes to the terminal under them:
while they are shown, sluice's log lines go through rich's console (printed
above the bars), and Spark's JVM, whose output Python cannot route, writes
to a file (:func:`spark_jobs.tasks.children.send_spark_output_to`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO

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
from scheduler.observe.eta import EtaReport, SourceEta, format_eta
from scheduler.observe.streams import describe
from sources.queueing import QueueingLimitedSource

log = logging.getLogger("sluice.progress")


LISTED = 8
"""The most sources one progress line names: a whole database's tables would make each
line tens of kilobytes; the rest are counted."""


class LogProgress:
    """One line per report: rows so far, rows/s (since the first batch), and per source its
    rows, buffer and ETA (:mod:`.eta`), a change stream's health too (:mod:`.streams`), then
    the run's ETA.

    Of more than :data:`LISTED` sources, those not done are named first, up to
    that many; the others are counted (how many, how many of them done).
    """

    def __call__(
        self, stats: RunStats, queues: Mapping[str, QueueingLimitedSource],
        eta: EtaReport | None = None,
    ) -> None:  # fmt: skip
        elapsed = max(stats.moving(), 1e-9)
        sources = {} if eta is None else eta.sources
        streams = {} if eta is None else eta.streams
        names = list(queues)
        if len(names) > LISTED:
            names.sort(key=lambda n: bool((s := sources.get(n)) and s.done))
        listed = [
            f"{name} {stats.rows_by_source.get(name, 0):,} (buffer {queues[name].buffered:,}"
            + (f", {_eta(s.eta_s, s.done, s.caught_up)}" if (s := sources.get(name)) else "")
            + (f"; {describe(v)})" if (v := streams.get(name)) else ")")
            for name in names[:LISTED]
        ]
        if rest := names[LISTED:]:
            done = sum(1 for n in rest if (s := sources.get(n)) and s.done)
            listed.append(f"{len(rest)} more ({done} done)")
        parts = ", ".join(listed)
        overall = "" if eta is None else f"; {_eta(eta.eta_s, eta.done, eta.caught_up)}"
        log.info("%s rows, %.0f rows/s: %s%s", f"{stats.rows:,}", stats.rows / elapsed, parts,
                 overall)  # fmt: skip


def _eta(seconds: float | None, done: bool, caught_up: bool = False) -> str:
    if done or caught_up:
        return format_eta(seconds, done, caught_up)
    return f"eta {format_eta(seconds)}"


RATE_WINDOW = 60.0
"""Seconds of progress rich's own rows/s and ETA are measured over, until the ETA's
estimate (:mod:`.eta`: over a shorter window, knowing the limits in force) is known."""
TOTAL = "total"
"""The description of the run's bar, under the sources' (there when there are several)."""


class _RateColumn(ProgressColumn):
    """Rows per second: the ETA's recent rate, or rich's over :data:`RATE_WINDOW` seconds."""

    def render(self, task: Task) -> Text:
        speed = task.fields.get("rate", task.speed)
        if task.finished:  # the window may hold one step only: the whole run's rate
            speed = task.finished_speed or (
                task.completed / task.finished_time if task.finished_time else None
            )
        return Text("" if speed is None else f"{speed:,.0f} rows/s", style="progress.data.speed")


class _EtaColumn(ProgressColumn):
    """``eta 0:01:23`` (the ETA's estimate, or rich's at the recent rate); ``done`` once done;
    ``caught up`` for a change stream at the source's end."""

    def render(self, task: Task) -> Text:
        if task.finished or task.fields.get("done"):
            return Text("done", style="progress.remaining")
        if task.fields.get("caught_up"):
            return Text("caught up", style="progress.remaining")
        left = task.fields.get("eta", task.time_remaining)
        return Text(f"eta {format_eta(left)}", style="progress.remaining")


class BarProgress:
    """A bar per source, against a known total of rows when there is one; a change
    stream's health beside its bar.

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
            TextColumn("{task.fields[stream]}", style="progress.data.speed"),
            console=console or Console(stderr=True),
            speed_estimate_period=RATE_WINDOW,
        )
        self.tasks = {
            name: self.progress.add_task(name, total=total or None, stream="")
            for name, total in totals.items()
        }
        self._counted = {name for name, total in totals.items() if not total}
        self.total = None if len(totals) < 2 else self.progress.add_task(
            TOTAL, total=sum(totals.values()) if all(totals.values()) else None,
            stream="")  # fmt: skip
        self.progress.start()
        # On a terminal, starting replaced sys.stderr with a proxy that prints above the bars.
        self._streams = _through(sys.stderr)

    def __call__(
        self, stats: RunStats, queues: Mapping[str, QueueingLimitedSource],
        eta: EtaReport | None = None,
    ) -> None:  # fmt: skip
        sources = {} if eta is None else eta.sources
        streams = {} if eta is None else eta.streams
        for name, task in self.tasks.items():
            done = stats.rows_by_source.get(name, 0)
            fields = _fields(sources.get(name))
            if (view := streams.get(name)) is not None:
                fields["stream"] = describe(view)
            # No total given: the count's; a stream has none (it has no end).
            if name in self._counted and (estimate := sources.get(name)) is not None \
                    and estimate.left is not None and not estimate.stream:  # fmt: skip
                fields["total"] = done + estimate.left
            self.progress.update(task, completed=done, **fields)
        if self.total is not None:
            fields = {} if eta is None or eta.eta_s is None and not eta.done else {
                "eta": eta.eta_s, "done": eta.done, "rate": eta.rows_per_s,
                "caught_up": eta.caught_up}  # fmt: skip
            self.progress.update(self.total, completed=stats.rows, **fields)

    def close(self) -> None:
        """Leave the final bars on screen; log lines go to the terminal again."""
        self.progress.stop()
        for handler, stream in self._streams.items():
            handler.setStream(stream)


def _fields(estimate: SourceEta | None) -> dict[str, Any]:
    """A bar's ETA and rate from the source's estimate, once it has a rate."""
    # A change stream's ETA is its own (its waiting changes, or its lag): not of the rate.
    if estimate is None or estimate.rows_per_s is None and not estimate.done \
            and not estimate.stream:  # fmt: skip
        return {}
    return {"eta": estimate.eta_s, "done": estimate.done, "rate": estimate.rows_per_s,
            "caught_up": estimate.caught_up}


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
