"""How a database takes a batch's rows in bulk (:class:`BulkLoad`): each engine's own path
(:meth:`~spark_jobs.engines.traits.Traits.bulk_load`), which the load wing runs
(:mod:`spark_jobs.load.bulk_paths`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

Load = Callable[[Any, str, Sequence[str], Iterable[pa.RecordBatch]], int]


@dataclass(frozen=True)
class BulkLoad:
    """How one kind of database takes a batch's rows in bulk.

    ``load(cursor, table_sql, names, batches)`` writes the rows of
    ``batches`` (Arrow, columns ``names``) into the quoted ``table_sql`` on
    the DBAPI ``cursor``, in the caller's transaction, and returns how many.
    It raises :class:`~spark_jobs.engines.base.CannotEncode` for values it cannot
    write exactly (before committing anything) and
    :class:`sqlalchemy.exc.DBAPIError` as the database refuses.
    """

    method: str
    quote: Callable[..., str]
    load: Load


@functools.cache
def constant(value: str | bytes) -> pa.Scalar:
    """``value`` as a large string (``str``) or large binary (``bytes``) scalar, made at its
    first use and kept. Not at import: pyarrow imports pandas for the first scalar it makes
    (~0.3 s, which every run's start paid before its first batch)."""
    return pa.scalar(value, pa.large_string() if isinstance(value, str) else pa.large_binary())
