"""Prove a target table equal to its source where both servers can count and hash their own
rows, before any row is read into Spark.

``sluice verify`` asks :func:`proven_equal` first. Each server sums its
rows' hashes over the verify's scope (the source's ``where:`` and done keys,
the target's same keys), the two sides at once, a big table in key ranges
(``parts`` queries a side, within the source's connection share). Between two
PostgreSQL tables a row's hash is its record text's
(:mod:`spark_jobs.engines.postgresql.sums`); between MySQL/MariaDB and
PostgreSQL (either way) or two MySQL tables, it is the hash of verify's
neutral text of each value, which each server prints in its own SQL
(:mod:`spark_jobs.engines.neutral_sql`). Equal counts and sums: the table is
equal, and no JVM, no row transfer was needed. Anything else (unequal sums,
an engine, a column kind or a config this cannot judge) answers None, and
the table is compared in Spark, bucket by bucket then key by key
(:mod:`spark_jobs.verify.compare`), which names the keys that differ.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from config.errors import SourceError
from config.models import ParquetTargetConfig, SqlSourceConfig
from spark_jobs.common.jdbc import dialect_name, looker_engine, sql_engine
from spark_jobs.engines import dialect_engine, engine_of, neutral_sql
from spark_jobs.engines.base import Column, Kind
from spark_jobs.engines.postgresql.sums import Sums
from spark_jobs.load.target import TargetTable
from spark_jobs.read.extract import SqlReader, split_int_range
from spark_jobs.read.read_sql import table_columns
from spark_jobs.verify.read import Scope, min_max, qualified

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
    if isinstance(target.config, ParquetTargetConfig) or not _hashable(source, target.config.url):
        return None
    if scope.nothing:
        return Proof(0)
    engines = (dialect_name(source.url), dialect_name(target.config.url))
    table = qualified(target)
    mine = table_columns(source.url, source.table)
    try:
        theirs = {c.name.lower(): c for c in table_columns(target.config.url, table)}
    except SourceError:  # no target table yet
        return None
    if any(c.name.lower() not in theirs for c in mine):
        return None  # Spark's comparison names the missing column
    mirror = SqlSourceConfig(kind="sql", url=target.config.url, table=table,
                             key=list(target.key), target=target.label)  # fmt: skip
    sides = [(source, mine), (mirror, [theirs[c.name.lower()] for c in mine])]
    ranges = [] if scope.keys is not None else _ranges(source, mine, target, scope, parts)
    queries: list[tuple[SqlSourceConfig, str]] = []
    for (side, columns), other in zip(sides, reversed(engines), strict=True):
        reader = SqlReader(None, side)
        quote = reader.dialect.identifier_preparer.quote
        engine = engine_of(side.url)
        printed = [(quote(c.name), engine.text_sql(c, quote(c.name))) for c in columns]
        values = _row_values(side, columns, printed, other, engines, source.key_columns)
        if values is None:
            return None  # a column whose neutral form only Spark prints
        if scope.keys is not None:  # the same lists of keys on each side
            conditions = reader.key_conditions(scope.keys, parts)
        else:
            # The target's rows past the done keys count too once no batch is unfinished.
            last = scope.upto if side is source or not scope.target_open else None
            conditions = reader.range_conditions(
                [(lo, last if i == len(ranges) - 1 else hi) for i, (lo, hi) in enumerate(ranges)])
        queries += [(side, _sums_sql(side, engines, reader.table_sql, values, where, printed))
                    for where in conditions]  # fmt: skip
    with ThreadPoolExecutor(len(queries), thread_name_prefix="verify-sums") as pool:
        found: list[Sums] = list(pool.map(lambda q: _table_sums(*q), queries))
    if any(s.lost for s in found):
        log.info("%s: a value too long for the server to print whole; comparing it in Spark",
                 target.label)  # fmt: skip
        return None
    ours, others = found[: len(found) // 2], found[len(found) // 2 :]
    if ours != others:
        log.info("%s: the servers' row sums differ; comparing it row by row", target.label)
        return None
    return Proof(sum(s.rows for s in ours))


def provable(source: SqlSourceConfig, target_url: str) -> bool:
    """Whether :func:`proven_equal` can judge ``source``'s table against a table at
    ``target_url`` holding the types sluice maps it to (else verify compares it in Spark).

    Looks up the source's columns (between two engines); errors of the database are raised.
    """
    if not _hashable(source, target_url):
        return False
    engines = {dialect_name(source.url), dialect_name(target_url)}
    if len(engines) == 1 and dialect_engine(engines.pop()).hashes_records:
        return True
    return all(neutral_sql.provable(c) for c in table_columns(source.url, source.table))


def _hashable(source: SqlSourceConfig, target_url: str) -> bool:
    """Both servers can hash rows, and the source's rows go in as they are (no ``columns:``)."""
    engines = {dialect_name(source.url), dialect_name(target_url)}
    return source.columns is None and engines <= set(neutral_sql.DIALECTS)


def _row_values(
    side: SqlSourceConfig, columns: Sequence[Column], printed: Sequence[tuple[str, str]],
    other: str, engines: Sequence[str], key: Sequence[str],
) -> list[str] | None:  # fmt: skip
    """The SQL of each of ``side``'s ``columns`` (``printed``: each one's quoted name and the
    SQL printing it) as its sums hash it; None: one that cannot be.

    Between two PostgreSQL tables, the columns themselves (the record is hashed);
    else each value's neutral text, a non-key value between two tables of one
    engine as its server prints it (as Spark's comparison takes them).
    """
    if engines[0] == engines[1] and dialect_engine(engines[0]).hashes_records:
        return [name for name, _ in printed]
    dialect = neutral_sql.DIALECTS[dialect_name(side.url)]
    keys = {k.lower() for k in key}
    values = []
    for column, (_, text) in zip(columns, printed, strict=True):
        raw = engines[0] == engines[1] and column.name.lower() not in keys
        value = neutral_sql.neutral_sql(dialect, column, text, other, raw)
        if value is None:
            return None
        values.append(value)
    return values


def _sums_sql(
    side: SqlSourceConfig, engines: Sequence[str], table_sql: str, values: Sequence[str],
    where: str, printed: Sequence[tuple[str, str]],
) -> str:  # fmt: skip
    if engines[0] == engines[1] and dialect_engine(engines[0]).hashes_records:
        return dialect_engine(engines[0]).record_sums_sql(table_sql, values, where)
    dialect = neutral_sql.DIALECTS[dialect_name(side.url)]
    # MySQL prints a value past its max_allowed_packet as NULL: such a row is counted apart.
    guard = printed if dialect is neutral_sql.MYSQL else ()
    return neutral_sql.sums_sql(dialect, table_sql, values, where, guard)


def _table_sums(side: SqlSourceConfig, query: str) -> Sums:
    sums: Sums = dialect_engine(dialect_name(side.url)).table_sums(side.url, query, looker_engine)
    return sums


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
    with sql_engine(source.url).connect() as conn:
        found = dialect_engine(dialect_name(source.url)).estimated_rows(conn, source.table)
    return -1.0 if found is None else found
