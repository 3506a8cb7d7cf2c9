"""Compare a source table with its target table in Spark, bucket by bucket, then key by key.

What ``sluice verify`` runs (:mod:`scheduler.verify_tables`). Each side
becomes a narrow frame, one row per row: its bucket (a hash of the key's
canonical text, modulo :data:`BUCKETS`, computed in Spark, so neither
database's collation matters), the key's canonical text, a 64-bit hash of
the row's canonical values, and the key's own values. Per bucket, the two
sides' row counts and sums of row hashes are compared: a sum does not depend
on the order rows arrive in. Only the buckets that differ are joined key by
key: each side is read once when the two are equal, and again, for the
differing buckets only, when they are not. Keys the target holds twice are
reported as ``duplicate``.

Canonical text, so that PostgreSQL, MariaDB, SQLite and Parquet agree on
equal values stored in their own types: integers and booleans as digits
(``TRUE`` and MariaDB's ``TINYINT(1)`` 1 are both ``1``); decimals without
trailing zeros (``12.50`` and ``12.5`` agree, as do ``12.00`` and ``12``);
floating point in the narrower of the two sides' types; timestamps with
microseconds in UTC (the session's time zone); dates ISO; bytes as hex;
arrays, maps and structs as JSON. NULL is a marker no text value equals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import types as T

from config.errors import TargetError
from spark_jobs.engines.canonical import neutral_key
from spark_jobs.engines.spark_names import quoted
from spark_jobs.verify.keys import encoded, in_key_order, plain_key

BUCKETS = 4096
"""Buckets the key space is hashed into; a differing bucket is compared key by key."""
SAMPLE = 10
"""Keys listed per kind of difference."""
KINDS = ("missing", "extra", "different", "rejected", "duplicate")
"""Kinds of difference: not in the target, only in the target, unequal, refused by the
target, held by more than one target row."""

_NULL = "\u0000N"  # no text column holds NUL (PostgreSQL refuses it)
_SEP = "\u001f"
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType)


@dataclass
class TableDiff:
    """How a target table differs from its source table.

    ``checked``: source rows compared; ``target_rows``: target rows compared;
    ``counts``: rows per kind of :data:`KINDS`; ``first``: the first keys (in
    key order) of each kind; ``in_flight``: differing rows left out because
    an unfinished batch holds their key. :meth:`keys` lists every key of some
    kinds; :meth:`release` frees what Spark keeps for them.
    """

    checked: int
    target_rows: int
    counts: dict[str, int]
    first: dict[str, list[list[Any]]]
    in_flight: int = 0
    pending: int = 0
    _pending: set[str] = field(default_factory=set, repr=False)
    _flying: set[str] = field(default_factory=set, repr=False)
    _rows: DataFrame | None = field(default=None, repr=False)
    _typed: Callable[[list[Any]], list[Any]] = field(default=list, repr=False)

    @property
    def equal(self) -> bool:
        """No row missing, extra, different or rejected."""
        return not any(self.counts.values())

    def keys(self, kinds: Sequence[str]) -> Iterator[list[Any]]:
        """Every key of these kinds, as values (the source's; the target's for extras)."""
        if self._rows is None:
            return
        rows = self._rows.where(F.col("kind").isin(list(kinds))).select("kind", "skey", "tkey")
        for row in rows.toLocalIterator():
            key = self._typed(plain_key(row.skey or row.tkey))
            text = encoded(key)
            if text not in self._flying and (row.kind != "missing" or text not in self._pending):
                yield key

    def set_in_flight(self, changed: set[str]) -> None:
        """Count the differing rows whose key is in ``changed`` (keys as :func:`encoded`
        texts: a stream's changes not applied yet) as in flight, not as differences."""
        if self._rows is None or not changed:
            return
        kinds = [k for k in KINDS if k != "rejected"]
        left: dict[str, list[list[Any]]] = {kind: [] for kind in kinds}
        found = self._rows.where(F.col("kind").isin(kinds)).select("kind", "skey", "tkey")
        for row in found.orderBy(*in_key_order(found)).toLocalIterator():
            key = self._typed(plain_key(row.skey or row.tkey))
            text = encoded(key)
            if text in self._pending:
                continue
            if text in changed:
                self.counts[row.kind] -= 1
                self.in_flight += text not in self._flying
                self._flying.add(text)
            elif len(left[row.kind]) < SAMPLE:
                left[row.kind].append(key)
        self.first.update(left)  # the first of what is left, in key order

    def set_pending(self, keys: Sequence[Sequence[Any]]) -> None:
        """Count these missing keys as not migrated yet (no batch ever held them), not missing."""
        texts = {encoded(key) for key in keys}
        self._pending |= texts
        self.pending = len(self._pending)
        self.counts["missing"] -= len(texts)
        self.first["missing"] = [k for k in self.first["missing"] if encoded(k) not in texts]

    def release(self) -> None:
        """Let Spark drop the persisted frames."""
        if self._rows is not None:
            self._rows.unpersist()


def compare(
    spark: SparkSession,
    source: DataFrame,
    target: DataFrame,
    key: Sequence[str],
    *,
    label: str,
    held: Sequence[Sequence[Any]] = (),
    rejected: Sequence[Sequence[Any]] = (),
    buckets: int = BUCKETS,
    typed: Callable[[list[Any]], list[Any]] = list,
) -> TableDiff:
    """Compare ``source``'s rows (as they go into the target) with ``target``'s, on ``key``.

    Every source column is compared, with the target column of the same name
    (any case); target-only columns are not. ``held``: keys unfinished
    batches hold (left out); ``rejected``: keys the target refused (reported
    as ``rejected``, not ``missing``). ``label`` names the table in errors. ``typed``:
    a key's values read back as their columns' types (a side read as text gives text).
    Raises :class:`TargetError` when a source column is not in the target.
    """
    target = _aligned(source, target, label)
    types = {name: (source.schema[name].dataType, target.schema[name].dataType)
             for name in source.columns}  # fmt: skip
    # Each side's hash expressions are built once (each piece is a call into the
    # JVM: for a small table, building them costs more than the job) and serve both passes.
    sides = [
        (df, pair, _hash_columns(df, key, pair, buckets))
        for df, pair in ((source, types), (target, {n: (t, s) for n, (s, t) in types.items()}))
    ]
    # First pass: per bucket only, nothing kept; the sides are read again,
    # only when some bucket differs, for the key-by-key pass.
    ours, other = _per_bucket(*[df.select(*hashes) for df, _, hashes in sides])
    differing = sorted(b for b in set(ours) | set(other) if ours.get(b) != other.get(b))
    checked = sum(n for n, *_ in ours.values())
    target_rows = sum(n for n, *_ in other.values())
    if not differing:
        return TableDiff(checked, target_rows, dict.fromkeys(KINDS, 0), {k: [] for k in KINDS},
                         _typed=typed)  # fmt: skip
    mine, theirs = [_narrow(df, key, pair, hashes, differing) for df, pair, hashes in sides]
    rows = _key_by_key(mine, theirs).unionByName(_duplicates(mine, theirs))
    key_types = [types[name][0] for name in key]
    # Held keys are in flight whatever their difference; refused ones are
    # rejected rather than missing.
    for keys, kind, only in ((held, "in_flight", None), (rejected, "rejected", "missing")):
        if keys:
            texts = _key_texts(spark, keys, key, key_types, types).withColumn("_m", F.lit(kind))
            relabel = F.col("_m").isNotNull()
            if only is not None:
                relabel &= F.col("kind") == only
            rows = (
                rows.join(F.broadcast(texts), on="_k", how="left")
                .withColumn("kind", F.when(relabel, F.col("_m")).otherwise(F.col("kind")))
                .drop("_m")
            )
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    counts, first = _counted(rows, typed)
    in_flight = counts.pop("in_flight", 0)
    return TableDiff(checked, target_rows, counts, first, in_flight, _rows=rows, _typed=typed)


def _aligned(source: DataFrame, target: DataFrame, label: str) -> DataFrame:
    """``target`` with the source's columns, by name in any case, in the source's order."""
    by_name = {name.lower(): name for name in target.columns}
    missing = [name for name in source.columns if name.lower() not in by_name]
    if missing:
        raise TargetError(
            f"{label}: the target table has no column {', '.join(map(repr, missing))} "
            "that the source has: verify compares every source column"
        )
    return target.select(
        *[F.col(quoted(by_name[name.lower()])).alias(name) for name in source.columns]
    )


Types = dict[str, tuple[T.DataType, T.DataType]]
"""Column → (this side's type, the other side's)."""


def _values(df: DataFrame, names: Sequence[str], types: Types) -> list[Column]:
    """What is hashed of each column: its value where both sides store the same type
    (nothing to convert), else its canonical text."""
    return [
        F.col(quoted(name))
        if types[name][0].simpleString() == types[name][1].simpleString()
        else canonical(F.col(quoted(name)), *types[name])
        for name in names
    ]


def _row_hash(df: DataFrame, types: Types) -> Column:
    """A 64-bit hash of the row's values. A NULL adds nothing to xxhash64, so which
    columns are NULL is hashed too: (NULL, 5) and (5, NULL) differ."""
    columns = list(df.columns)
    masks = [
        F.expr(" + ".join(f"IF({quoted(n)} IS NULL, {1 << i}L, 0L)"
                          for i, n in enumerate(columns[start : start + 62])))
        for start in range(0, len(columns), 62)
    ]  # fmt: skip
    return F.xxhash64(*masks, *_values(df, columns, types))


def _hash_columns(
    df: DataFrame, key: Sequence[str], types: Types, buckets: int
) -> tuple[Column, Column]:
    """Per row: the bucket ``_b`` (of the key) and the row hash ``_h``."""
    bucket = F.pmod(F.xxhash64(*_values(df, key, types)), F.lit(buckets))
    return bucket.alias("_b"), _row_hash(df, types).alias("_h")


def _narrow(
    df: DataFrame, key: Sequence[str], types: Types, hashes: tuple[Column, Column],
    only: list[int],
) -> DataFrame:  # fmt: skip
    """The rows of buckets ``only``: ``_b``, ``_h``, the key's canonical text ``_k`` (what
    the sides are joined on) and its values ``key``."""
    texts = [canonical(F.col(quoted(name)), *types[name]) for name in key]
    narrow = df.select(
        *hashes,
        F.concat_ws(_SEP, *texts).alias("_k"),
        F.struct(*[F.col(quoted(name)) for name in key]).alias("key"),
    )
    return narrow.where(F.col("_b").isin(only))


def canonical(column: Column, mine: T.DataType, other: T.DataType) -> Column:
    """``column``'s values as text that the other side's equal values share (see the module)."""
    if isinstance(mine, T.BooleanType):
        text = F.when(column, F.lit("1")).when(~column, F.lit("0"))
    elif isinstance(mine, _FRACTIONAL) or isinstance(other, _FRACTIONAL):
        narrow = T.FloatType in (type(mine), type(other))
        text = column.cast("float" if narrow else "double").cast("string")
    elif isinstance(mine, T.DecimalType):
        plain = column.cast("string")
        text = F.when(plain.contains("."), F.regexp_replace(plain, r"\.?0+$", "")).otherwise(plain)
    elif isinstance(mine, T.TimestampType | T.TimestampNTZType):
        text = F.date_format(column, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    elif isinstance(mine, T.DateType):
        text = F.date_format(column, "yyyy-MM-dd")
    elif isinstance(mine, T.BinaryType):
        text = F.lower(F.hex(column))
    elif isinstance(mine, T.ArrayType | T.MapType | T.StructType):
        text = F.to_json(column)
    else:
        text = column.cast("string")
    return F.coalesce(text, F.lit(_NULL))


Sums = dict[int, tuple[int, int, int]]
"""Bucket → (rows, sum of the row hashes' high halves, sum of their low halves)."""


def _per_bucket(mine: DataFrame, theirs: DataFrame) -> tuple[Sums, Sums]:
    """Each side's :data:`Sums`: one Spark job, a few thousand rows to the driver.

    A hash's two 32-bit halves are summed apart: each sum fits a bigint for
    any number of rows a table holds, so no sum overflows (Spark's ANSI mode
    would fail on it) and none needs a decimal.
    """
    sums = [
        side.groupBy("_b")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.shiftright(F.col("_h"), 32)).alias("hi"),
            F.sum(F.col("_h").bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
        )
        .withColumn("side", F.lit(index))
        for index, side in enumerate((mine, theirs))
    ]
    found: tuple[Sums, Sums] = ({}, {})
    for row in sums[0].unionByName(sums[1]).collect():
        found[row.side][row._b] = (row.n, row.hi, row.lo)
    return found


def _key_by_key(mine: DataFrame, theirs: DataFrame) -> DataFrame:
    """The rows of the differing buckets that differ: ``kind``, ``_k``, the key's values.

    ``skey``: the source's (None for an extra row), ``tkey``: the target's.
    """
    s, t = mine.alias("s"), theirs.alias("t")
    joined = s.join(t, on=F.col("s._k") == F.col("t._k"), how="full_outer")
    kind = (
        F.when(F.col("t._h").isNull(), "missing")
        .when(F.col("s._h").isNull(), "extra")
        .when(F.col("s._h") != F.col("t._h"), "different")
    )
    return joined.select(
        kind.alias("kind"),
        F.coalesce(F.col("s._k"), F.col("t._k")).alias("_k"),
        F.col("s.key").alias("skey"),
        F.col("t.key").alias("tkey"),
    ).where(F.col("kind").isNotNull())


def _duplicates(mine: DataFrame, theirs: DataFrame) -> DataFrame:
    """Keys the target holds more than once (one row each), as ``_key_by_key``'s rows."""
    twice = theirs.groupBy("_k").agg(F.count(F.lit(1)).alias("n"), F.first("key").alias("tkey"))
    return twice.where(F.col("n") > 1).select(
        F.lit("duplicate").alias("kind"), "_k",
        F.lit(None).cast(mine.schema["key"].dataType).alias("skey"), "tkey",
    )  # fmt: skip


def _key_texts(
    spark: SparkSession,
    keys: Sequence[Sequence[Any]],
    names: Sequence[str],
    key_types: Sequence[T.DataType],
    types: dict[str, tuple[T.DataType, T.DataType]],
) -> DataFrame:
    """``_k`` of keys given as values (from the ledger or ``_sluice_rejects``), one row each."""
    width = len(names)
    neutral = all(isinstance(types[name][0], T.StringType) for name in names)
    rows = [[neutral_key(v) if neutral else None if v is None else str(v) for v in key]
            for key in keys if len(key) == width]  # fmt: skip
    schema = T.StructType([T.StructField(f"c{i}", T.StringType()) for i in range(width)])
    frame = spark.createDataFrame(rows, schema)
    texts = [
        canonical(F.col(f"c{i}").try_cast(key_types[i]), key_types[i], types[name][1])
        for i, name in enumerate(names)
    ]
    return frame.select(F.concat_ws(_SEP, *texts).alias("_k")).distinct()


def _counted(
    rows: DataFrame, typed: Callable[[list[Any]], list[Any]] = list
) -> tuple[dict[str, int], dict[str, list[list[Any]]]]:
    """Rows per kind, and the first :data:`SAMPLE` keys of each kind in key order.

    One Spark job: each picked row carries its kind's count, so counting and
    picking share one shuffle (a small table's verify is mostly job overhead).
    """
    # A kind's keys are all the source's (skey) or all the target's (tkey, extras).
    kinds = Window.partitionBy("kind")
    picked = (
        rows.withColumn("_n", F.row_number().over(kinds.orderBy(*in_key_order(rows))))
        .withColumn("_c", F.count(F.lit(1)).over(kinds))
        .where(F.col("_n") <= SAMPLE)
        .orderBy("kind", "_n")
    )
    counts = dict.fromkeys(KINDS, 0)
    first: dict[str, list[list[Any]]] = {kind: [] for kind in KINDS}
    for row in picked.collect():
        counts[row.kind] = row._c
        if row.kind in first:
            first[row.kind].append(typed(plain_key(row.skey or row.tkey)))
    return counts, first
