"""Where an incremental walk may resume after a restart.

Each item an incremental source reads carries a :class:`ReadMark`: its place
in read order and the walk's positions before and at its row. A buffer holds
every item read and not yet done (queued, parked, or held by a batch in
flight), so the walk may resume right before the first of them in read order,
or, when none is left, after the last item stored. Read order is the
database's walk order, so no key is ever compared in Python (whose order of
text is not the database's collation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sources.abc import Item

Position = tuple[Any, ...]
"""A place in an incremental walk: ``(cursor, *key)`` of a row."""


@dataclass(frozen=True, slots=True)
class ReadMark:
    """An incremental item's place: ``seq`` in read order, the positions ``before`` and ``at`` it.

    ``before`` is None for the first row of a walk from the start.
    """

    seq: int
    before: Position | None
    at: Position


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Resume the walk past ``after``; None: from the start."""

    after: Position | None


def resume_point(outstanding: Iterable[Item], last: ReadMark | None) -> ResumePoint | None:
    """Where to resume, given the items not yet done and the last one stored.

    None when nothing was read (nothing to say). Items without a read mark
    (not from an incremental walk) are ignored.
    """
    first: ReadMark | None = None
    for item in outstanding:
        mark = item.handle
        if isinstance(mark, ReadMark) and (first is None or mark.seq < first.seq):
            first = mark
    if first is not None:
        return ResumePoint(first.before)
    return None if last is None else ResumePoint(last.at)
