"""The batch's column transforms (:mod:`spark_jobs.engines.transforms`) on an Arrow record
batch, for a load's own task that reads a MySQL source's rows itself (no Spark): the same
values, the same counting columns. Beneath the engines' packages (a MySQL read uses it),
it looks no engine up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_jobs.engines.base import Column as EngineColumn
from spark_jobs.engines.base import Kind

if TYPE_CHECKING:
    import pyarrow as pa

ZERO_PREFIX = "_sluice_zero__"
"""Columns the transforms add: a 1 where a zero date became NULL."""

ZERO_DATE = r"^[0-9]{4}-(00-|[0-9]{2}-00)"
"""A MySQL zero date's text (``0000-00-00``, a month or day of ``00``)."""

DATES = (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
"""The kinds whose values may be zero dates."""


def arrow_for_target(
    rows: pa.RecordBatch, columns: Sequence[EngineColumn], target: str, zero_dates: str = "null"
) -> pa.RecordBatch:  # fmt: skip
    """:func:`~spark_jobs.engines.transforms.for_target` on a record batch of a MySQL
    source's ``columns`` (in order), for a load's own task: the same values, the same
    counting columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays, names = list(rows.columns), list(rows.schema.names)
    before = list(arrays)
    counted: dict[str, pa.Array] = {}
    for i, column in enumerate(columns):
        value = arrays[i]
        if target != "mysql" and column.kind in DATES and zero_dates != "reject":
            zero = pc.fill_null(pc.match_substring_regex(value, ZERO_DATE), False)
            arrays[i] = pc.if_else(zero, pa.scalar(None, value.type), value)
            counted[f"{ZERO_PREFIX}{names[i]}"] = zero.cast(pa.int32())
        elif target == "postgresql" and column.kind == Kind.SET:
            escaped = pc.replace_substring(pc.replace_substring(value, "\\", "\\\\"), '"', '\\"')
            members = pc.binary_join_element_wise(
                '{"', pc.replace_substring(escaped, ",", '","'), '"}', "")
            arrays[i] = pc.if_else(pc.equal(value, ""), "{}", members).cast(value.type)
        elif target == "parquet" and column.kind == Kind.SET:
            split = pc.split_pattern(value, ",")
            arrays[i] = pc.if_else(pc.equal(value, ""), pa.scalar([], split.type), split)
    if not counted and all(a is b for a, b in zip(arrays, before, strict=True)):
        return rows
    return pa.RecordBatch.from_arrays(arrays + list(counted.values()),
                                      names=names + list(counted))  # fmt: skip
