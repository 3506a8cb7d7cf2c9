"""What the ledger says is done for a source: the part of it ``sluice verify`` compares.

A keyset source is done up to where its oldest unfinished range (claimed,
importing or failed) begins, or, with none, up to its high-water mark. Any
source may have key-list batches unfinished (sweep, incremental, repairs):
their keys are in flight, left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from scheduler.ledger.schema import (
    UNFINISHED,
    batches_table,
    decode_key,
    keys_table,
    sources_table,
)
from spark_jobs.common.manifest import Manifest

_NOT_DONE = (*UNFINISHED, "failed")


@dataclass(frozen=True)
class DoneScope:
    """A source's done part. ``known``: the ledger has a record of the source.

    ``upto``: keyset rows with keys at or below it are done (None with
    ``ranged``: no range is done yet); ``ranged``: the source has claimed
    ranges; ``open_range``: one of them is unfinished, and ``upto`` is where
    it begins. ``held``: keys of unfinished key-list batches.
    """

    known: bool
    ranged: bool = False
    upto: list[Any] | None = None
    held: list[list[Any]] = field(default_factory=list)
    open_range: bool = False


def done_scope(engine: sa.Engine, source: str) -> DoneScope:
    """Read ``source``'s done part from the ledger in ``engine`` (three short queries)."""
    s, b, k = sources_table, batches_table, keys_table
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(s.name):
            return DoneScope(known=False)
        high_water = conn.scalar(sa.select(s.c.high_water).where(s.c.name == source))
        known = conn.scalar(sa.select(sa.func.count()).where(s.c.name == source))
        first_open = conn.scalar(
            sa.select(b.c.manifest)
            .where(b.c.source == source, b.c.kind == "range", b.c.state.in_(_NOT_DONE))
            .order_by(b.c.range_seq, b.c.created_at)
            .limit(1)
        )
        held = conn.scalars(
            sa.select(k.c.key).join(b, b.c.id == k.c.batch_id)
            .where(k.c.source == source, b.c.state.in_(_NOT_DONE))
        ).all()  # fmt: skip
    keys = [decode_key(text) or [] for text in dict.fromkeys(held)]
    if first_open is not None:
        return DoneScope(True, True, Manifest.from_json(first_open).lo, keys, open_range=True)
    return DoneScope(bool(known), high_water is not None, decode_key(high_water), keys)


def never_claimed(engine: sa.Engine, source: str, encoded: Sequence[str]) -> set[str]:
    """Which of the encoded keys no batch of ``source`` ever held (at any version)."""
    seen: set[str] = set()
    with engine.connect() as conn:
        for start in range(0, len(encoded), 500):
            chunk = list(encoded[start : start + 500])
            seen.update(
                conn.scalars(
                    sa.select(keys_table.c.key).where(
                        keys_table.c.source == source, keys_table.c.key.in_(chunk)
                    )
                )
            )
    return set(encoded) - seen


__all__ = ["DoneScope", "done_scope", "never_claimed"]
