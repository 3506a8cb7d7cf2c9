"""Sizes that follow the batch: buffer and backpressure defaults from ``batch.max_items``.

``batch.max_items`` is the one number a user sets for speed; a config that
leaves the other sizes out gets them from it (docs/architecture.md, "Sizes
that follow the batch").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from config.settings import KEY_BATCH, ROWS_BATCH, SparkConfig


@dataclass(frozen=True)
class DerivedSizes:
    """Defaults that follow ``batch.max_items`` (see :func:`derived_sizes`)."""

    max_items: int
    key_items: int
    """The most keys a sweep or incremental source's batch holds."""
    max_pending: int
    range_buffer: int
    key_buffer: int
    max_importing_batches: int

    def resume_for(self, max_pending: int) -> int:
        """``resume_below`` for a ``max_pending``: one batch under it, at least half of it."""
        return max(max_pending - self.max_items, max_pending // 2)


JOB_GROUP = 32
"""Most batches one Spark job of the in-process sink imports together (keyset ranges of
one source waiting for a thread together: see :class:`sinks.spark.SparkSink`). A group's
fixed costs (its commits and columns looked up, its tables described and made ready in one
transaction, its loads handed to the tasks) are paid once for them all: 1,000 small tables
went ~10 % faster in groups of 32 than of 8."""

JOB_ROWS = 100_000
"""Rows a Spark job should carry when batches are small: a job costs the driver
~0.1-0.25 s whatever its size, which is then a small part of it."""


def derived_sizes(
    max_items: int, imports: int, group: int = JOB_GROUP, key_items: int | None = None
) -> DerivedSizes:
    """The buffer and backpressure sizes a config gets when it does not set them.

    ``group``: how many batches one import job may take together (1 when
    each batch is a ``spark-submit`` of its own). An import slot is busy
    with a job's worth of rows: one batch, or as many small ones as make
    :data:`JOB_ROWS` (at most ``group``).

    - ``backpressure.max_pending``: every import slot busy and one job's
      worth waiting for the next free one (at least 50,000); ``resume_below``:
      one batch's room under it (at least half of it), so that a batch is
      fed as soon as one is done; ``max_importing_batches``: as many batches
      as that many rows in flight make, and at least a job's worth of
      batches (``group``) per import slot and one more: a source's last,
      small batch (a whole small table is one) leaves rows to spare, and
      small tables' batches then share Spark jobs (at least 4).
    - a keyset source's ``buffer`` (counted in rows; its items are ranges,
      a few bytes each): what may be in flight and a batch more, and at
      least the batches in flight and two more; ``replenish_below`` one
      batch under it.
    - a sweep or incremental source's ``buffer`` (one item per key): two
      batches of ``key_items`` (default ``max_items``; at least 20,000
      keys), refilled at one batch.

    SQS buffers keep their fixed default (2,000 messages, refilled at 500):
    messages held in a buffer stay invisible to every other consumer.
    """
    slot = max(max_items, min(JOB_ROWS, group * max_items))
    in_flight = (imports + 1) * slot
    return DerivedSizes(
        max_items=max_items,
        key_items=key_items or max_items,
        max_pending=max(50_000, in_flight),
        range_buffer=max(20_000, (imports + 2) * max_items, in_flight + max_items),
        key_buffer=max(20_000, 2 * (key_items or max_items)),
        max_importing_batches=max(4, -(-in_flight // max_items), (imports + 1) * group),
    )


def with_derived_sizes(data: Any) -> Any:
    """A whole config's raw data with the buffer and backpressure sizes it left out filled in.

    Runs before validation, on what the user wrote: values given are kept,
    and a value of the wrong type is left for validation to report.
    """
    if not isinstance(data, dict):
        return data
    spark = _as_dict(data.get("spark"))
    submits = isinstance(spark, dict) and spark.get("deploy") == "submit"
    # Left out, max_items is sluice's to choose per source (BatchConfig.chosen):
    # the sizes follow the largest batch a source may then get.
    sources = data.get("sources")
    walks = isinstance(sources, dict) and any(_walks_ranges(s) for s in sources.values())
    chosen = ROWS_BATCH if walks else KEY_BATCH
    set_items = _given(data, "batch", "max_items", 0)
    sizes = derived_sizes(
        set_items or chosen,
        _given(data, "spark", "max_concurrent_imports", SparkConfig().max_concurrent_imports),
        group=1 if submits else JOB_GROUP,
        key_items=set_items or KEY_BATCH,
    )
    data = dict(data)
    backpressure = _as_dict(data.get("backpressure"))
    if isinstance(backpressure, dict):
        given = "max_pending" in backpressure
        backpressure.setdefault("max_pending", sizes.max_pending)
        max_pending = _as_int(backpressure["max_pending"], sizes.max_pending)
        if not given or "resume_below" not in backpressure:
            backpressure.setdefault("resume_below", sizes.resume_for(max_pending))
        backpressure.setdefault("max_importing_batches", sizes.max_importing_batches)
        data["backpressure"] = backpressure
    if isinstance(sources, dict):
        data["sources"] = {name: _with_buffer(source, sizes) for name, source in sources.items()}
    return data


def _as_dict(value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    return dict(value) if isinstance(value, dict) else value


def _as_int(value: Any, default: int) -> int:
    valid = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if valid else default


def _given(data: dict[str, Any], section: str, key: str, default: int) -> int:
    part = _as_dict(data.get(section))
    return _as_int(part.get(key), default) if isinstance(part, dict) else default


def _walks_ranges(source: Any) -> bool:
    """Whether a source's raw config is a keyset source (its batches: key ranges of rows)."""
    raw = _as_dict(source)
    return (isinstance(raw, dict) and raw.get("kind") == "sql"
            and raw.get("mode", "keyset") == "keyset")  # fmt: skip


def _with_buffer(source: Any, sizes: DerivedSizes) -> Any:
    """A SQL source's raw config with its derived buffer, unless it sets one."""
    raw = _as_dict(source)
    if not isinstance(raw, dict) or raw.get("kind") != "sql" or "buffer" in raw:
        return source
    keyset = raw.get("mode", "keyset") == "keyset"
    capacity = sizes.range_buffer if keyset else sizes.key_buffer
    batch = sizes.max_items if keyset else sizes.key_items
    refill = capacity - batch if capacity > batch else capacity // 4
    return {**raw, "buffer": {"capacity": capacity, "replenish_below": refill}}
