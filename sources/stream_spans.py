"""A stream source's items: spans of its ordered events, and the full load's progress.

:class:`~sources.stream.StreamSource` orders a table's full load and its changes
into one list of events at positions; :func:`take_spans` hands them out as
items, one span per transaction (or per chunk or range of the load), each carrying the
load's progress after it (:class:`LoadProgress`).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from sources.abc import Item
from spark_jobs.changes.change_batches import StreamEvent

Position = tuple[int, int]

DONE = "done"
"""The full load's progress once every chunk is in the stream."""
CATCH_UP = "catch up after "
"""The start of a full load's progress once every range read as the table then was is handed
out, before the changes since the stream's start (:mod:`sources.stream_catchup`)."""


@dataclass(frozen=True)
class LoadProgress:
    """How far the full load is, as a span's ``version`` carries it: ``""`` (nothing loaded),
    the JSON list of the last loaded key's values (as text), :data:`CATCH_UP` and the
    stream's start, or :data:`DONE`."""

    text: str = ""

    @property
    def done(self) -> bool:
        return self.text == DONE

    @property
    def after(self) -> list[str] | None:
        """The key after which the next chunk starts; None: from the first row."""
        if self.text in ("", DONE) or self.catching_up is not None:
            return None
        return list(json.loads(self.text))

    @property
    def catching_up(self) -> int | None:
        """The stream's start, once every range is handed out and the changes since wait to
        go in as each row's last state (:mod:`sources.stream_catchup`); else None."""
        if not self.text.startswith(CATCH_UP):
            return None
        return int(self.text.removeprefix(CATCH_UP))

    @classmethod
    def catch_up(cls, start: int) -> LoadProgress:
        """The progress once every range is handed out, the stream starting at ``start``."""
        return cls(f"{CATCH_UP}{start}")


def take_spans(
    out: deque[tuple[Position, StreamEvent, LoadProgress]], name: str, limit: int, epoch: int
) -> list[Item]:
    """Up to ``limit`` events from the front of ``out``, one span (an item of source
    ``name``, of ``epoch``) per transaction."""
    items: list[Item] = []
    taken = 0
    while out and taken < limit:
        lsn = out[0][0][0]
        span: list[tuple[Position, StreamEvent, LoadProgress]] = []
        while out and out[0][0][0] == lsn:
            event = out[0][1]
            # A whole chunk is one event of many rows: it waits for room (a buffer of rows
            # would refuse it), which comes as the buffer drains (its reads fit the room).
            # A range holds none of its rows.
            rows = 1 if event.span is not None else event.rows
            if taken + rows > limit:
                break
            span.append(out.popleft())
            taken += rows
            if span[-1][1].span is not None:
                break  # a range of the load is a span alone: its batches load side by side
        if not span:
            break
        last, _, progress = span[-1]
        payload = tuple(e.to_json() for _, e, _ in span)
        ranges = span[-1][1].span is not None  # alone in its span
        items.append(Item(name, last, payload, handle=epoch, version=progress.text,
                          rows=sum(e.rows for _, e, _ in span),
                          held=1 if ranges else None))  # fmt: skip
    return items
