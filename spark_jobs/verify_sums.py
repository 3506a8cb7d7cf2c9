"""Prove a target table equal to its source where both servers can count and hash their own
rows (:mod:`spark_jobs.engines.postgresql.sums`), before any row is read into Spark.

``sluice verify`` asks :func:`proven_equal` first. Between two PostgreSQL
tables each server sums its rows' record hashes over the verify's scope
(the source's ``where:`` and done keys, the target's same keys), the two
sides at once, a big table in key ranges (``parts`` queries a side, within
the source's connection share). Equal counts and sums: the table is equal,
and no JVM, no row transfer was needed. Anything else (unequal sums, an
engine or a config this cannot judge) answers None, and the table is compared
in Spark, bucket by bucket then key by key (:mod:`spark_jobs.verify`), which
names the keys that differ.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from config.errors import SourceError
from config.models import ParquetTargetConfig, SqlSourceConfig
from spark_jobs.engines.base import Kind
from spark_jobs.extract import SqlReader, split_int_range
from spark_jobs.jdbc import dialect_name
from spark_jobs.read_sql import table_columns
from spark_jobs.target import TargetTable
from spark_jobs.verify_read import Scope, min_max, qualified

log = logging.getLogger("sluice.verify")

SPLIT_ROWS = 1_000_000
"""The fewest rows (the server's estimate) a table's sums are split into key ranges for."""


@dataclass(frozen=True)
class Proof:
    """Both sides counted the same rows with the same hashes: ``rows`` on each."""

    rows: int


Range = tuple[Sequence[Any] | None, Sequence[Any] | None]


def proven_equal(
    source: SqlSourceConfig, target: TargetTable, scope: Scope, parts: int
) -> Proof | None:
    """A :class:`Proof` that ``target`` holds exactly ``source``'s rows in ``scope``, or None:
    they differ, or this cannot tell (compare them in Spark then).

    At most ``parts`` queries run on each side at once. Errors of either
    database are raised, as a Spark read's would be.
    """
    if (
        source.columns is not None  # the rows that go in are computed by Spark
        or isinstance(target.config, ParquetTargetConfig)
        or dialect_name(source.url) != "postgresql"
        or dialect_name(target.config.url) != "postgresql"
    ):
        return None
    if scope.nothing:
        return Proof(0)
    from spark_jobs.engines.postgresql.read import conninfo
    from spark_jobs.engines.postgresql.sums import Sums, sums_sql, table_sums

    table = qualified(target)
    mine = table_columns(source.url, source.table)
    try:
        theirs = {c.name.lower(): c.name for c in table_columns(target.config.url, table)}
    except SourceError:  # no target table yet
        return None
    if any(c.name.lower() not in theirs for c in mine):
        return None  # Spark's comparison names the missing column
    mirror = SqlSourceConfig(kind="sql", url=target.config.url, table=table,
                             key=list(target.key), target=target.label)  # fmt: skip
    sides = [(source, [c.name for c in mine]), (mirror, [theirs[c.name.lower()] for c in mine])]
    ranges = _ranges(source, mine, target, scope, parts)
    queries: list[tuple[str, str]] = []
    for side, names in sides:
        reader = SqlReader(None, side)
        quote = reader.dialect.identifier_preparer.quote
        # The target's rows past the done keys count too once no batch is unfinished.
        last = scope.upto if side is source or not scope.target_open else None
        wanted = [(lo, last if i == len(ranges) - 1 else hi) for i, (lo, hi) in enumerate(ranges)]
        info = conninfo(side.url)
        queries += [(info, sums_sql(reader.table_sql, [quote(n) for n in names], where))
                    for where in reader.range_conditions(wanted)]  # fmt: skip
    with ThreadPoolExecutor(len(queries), thread_name_prefix="verify-sums") as pool:
        found: list[Sums] = list(pool.map(lambda q: table_sums(*q), queries))
    ours, others = found[: len(ranges)], found[len(ranges) :]
    if ours != others:
        log.info("%s: the servers' row sums differ; comparing it row by row", target.label)
        return None
    return Proof(sum(s.rows for s in ours))


def _ranges(
    source: SqlSourceConfig, columns: Sequence[Any], target: TargetTable, scope: Scope, parts: int
) -> list[Range]:
    """Key ranges covering the scope on both sides: one, or ``parts`` for a big table with
    a single integer key (split between the two sides' first and last keys)."""
    whole: list[Range] = [(None, scope.upto)]
    key = source.key_columns
    kinds = {c.name: c.kind for c in columns}
    if parts < 2 or len(key) != 1 or kinds.get(key[0]) not in (Kind.INT, Kind.UINT):
        return whole
    if _estimate(source) < SPLIT_ROWS:
        return whole
    assert not isinstance(target.config, ParquetTargetConfig)
    ends = [
        min_max(source.url, source.table, key[0]),
        min_max(target.config.url, qualified(target), target.key[0], missing_ok=True),
    ]
    lows = [lo for lo, _ in ends if isinstance(lo, int)]
    highs = [hi for _, hi in ends if isinstance(hi, int)]
    if not lows or not highs:
        return whole
    top = max(highs) if scope.upto is None else min(max(highs), int(scope.upto[0]))
    bounds = split_int_range([min(lows) - 1], [top], parts)
    if bounds is None:
        return whole
    # Open at both ends: a key below the first or past the last still falls in a range.
    inner = bounds[1:-1]
    edges: list[Any] = [None, *inner, None]
    return [(None if a is None else [a], None if b is None else [b])
            for a, b in zip(edges, edges[1:], strict=False)]  # fmt: skip


def _estimate(source: SqlSourceConfig) -> float:
    """The server's estimate of the source table's rows (from its statistics; -1 unknown)."""
    import sqlalchemy as sa

    from spark_jobs.jdbc import sql_engine

    with sql_engine(source.url).connect() as conn:
        found = conn.scalar(sa.text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"),
                           {"t": source.table})  # fmt: skip
    return -1.0 if found is None else float(found)
