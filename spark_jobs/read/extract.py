"""Extract one batch's rows into a DataFrame.

SQL sources are read through Spark JDBC with the batch's predicate pushed
down, one JDBC partition per predicate. The predicates are rendered by
SQLAlchemy for the source's dialect: identifiers quoted, values as literals
escaped by the dialect, never pasted into SQL by hand. Payload batches (SQS)
become a DataFrame whose schema is inferred here, in Python, so the column
types do not depend on Spark's JSON inference settings.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pyspark.sql.functions as F
import sqlalchemy as sa
from cachetools import TTLCache, cached
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from sqlalchemy.sql.elements import ColumnElement

from config.errors import SourceError
from config.models import SqlSourceConfig, SqsSourceConfig
from spark_jobs.common.jdbc import JdbcEndpoint, looker_engine, sql_engine
from spark_jobs.common.keyorder import key_types, row_compare, typed_key
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import catalogued, dialect_engine, dialect_traits
from spark_jobs.engines.spark_names import quoted
from spark_jobs.read.jdbc_read import SCHEMA_TTL, forget_schema, jdbc_frame
from spark_jobs.read.payloads import payload_frame
from spark_jobs.read.read_sql import (
    forget_columns,
    has_native_reader,
    jdbc_catalogued_frame,
    native_frame,
    native_read,
    table_columns,
)

if TYPE_CHECKING:
    from spark_jobs.engines.mysql.read import Queries as MySQLQueries
    from spark_jobs.engines.postgresql.read import Queries

_INT64 = range(-(2**63), 2**63)
_MAX_IN_LIST = 1000
"""Most keys one JDBC query looks up by value (non-integer keys of a keys batch)."""
_MAX_NATIVE_LIST = 20_000
"""Most keys one native read looks up by value."""


def extract(
    spark: SparkSession,
    source: SqlSourceConfig | SqsSourceConfig,
    manifest: Manifest,
    one_task: bool = False,
    target: str | None = None,
) -> DataFrame:
    """The batch's rows, with the source's columns (lazy: nothing runs yet).

    ``one_task``: the rows will be consumed by one Spark task (a direct
    COPY): a range is then read by one query, not split into
    ``read.num_partitions`` queries that the task would run one after the
    other, each on a connection of its own. ``target``: the engine the rows go
    to, whose form of a value the read may give at once (see
    :meth:`~spark_jobs.engines.base.Engine.read_sql`).
    """
    if manifest.kind == "payloads":
        key = source.key if isinstance(source.key, str) else None
        return payload_frame(spark, manifest.payloads, key)
    if not isinstance(source, SqlSourceConfig):
        raise SourceError(
            f"source {manifest.source!r} is not SQL: a {manifest.kind} batch needs one"
        )
    reader = SqlReader(spark, source, target=target)
    parts = manifest.read_parts or source.read.num_partitions
    if manifest.kind == "range":
        return reader.read_range(manifest.lo, manifest.hi, manifest.items, 1 if one_task else parts)
    return reader.read_keys(manifest.keys, parts, bounded=manifest.read_parts is not None)


def extract_ranges(
    spark: SparkSession, source: SqlSourceConfig, manifests: Sequence[Manifest],
    target: str | None = None,
) -> DataFrame:  # fmt: skip
    """The rows of several range batches of ``source``: partition i holds ``manifests[i]``'s.

    One JDBC query per batch, as a range batch read by one task; the batches
    of one Spark job (:func:`spark_jobs.jobs.import_group.run_imports`) each keep
    a task of their own.
    """
    if any(m.kind != "range" for m in manifests):
        raise ValueError("extract_ranges reads range batches only")
    return SqlReader(spark, source, target=target).read_ranges([(m.lo, m.hi) for m in manifests])


def native_ranges(
    source: SqlSourceConfig, manifests: Sequence[Manifest], target: str, zero_dates: str
) -> tuple[T.StructType, Queries | MySQLQueries]:
    """What :func:`extract_ranges` reads from a source read natively, without Spark, for a
    load's own task into engine ``target``: the rows' schema and a query per batch (query
    i reads ``manifests[i]``'s rows, with the transforms of
    :func:`~spark_jobs.engines.transforms.for_target`, ``zero_dates`` as the target says)."""
    if any(m.kind != "range" for m in manifests):
        raise ValueError("native_ranges reads range batches only")
    reader = SqlReader(None, source, target=target)
    columns = table_columns(source.url, source.table)
    if not dialect_engine(reader.endpoint.dialect).native_reads_in_pieces:
        where: list[str | tuple[str, ...]] = list(
            reader.range_conditions([(m.lo, m.hi) for m in manifests]))
    else:
        where = [tuple(reader.range_conditions(_pieces(m))) for m in manifests]
    return native_read(source.url, reader.table_sql, columns, where, target=target,
                       zero_dates=zero_dates)


PIECE_ROWS = 250_000
"""About the most rows of a MySQL batch's range read by one query (see :func:`_pieces`)."""


def _pieces(manifest: Manifest) -> list[tuple[Sequence[Any] | None, Sequence[Any] | None]]:
    """A range batch's range in consecutive pieces of about :data:`PIECE_ROWS` rows, read
    one after the other: ConnectorX reads a query's rows ahead of a slower writer without
    bound, a whole 2 M-row batch (450 MB) where the target takes them slower. Only a single
    integer key is split (by arithmetic: pieces of a sparse range hold fewer rows)."""
    parts = -(-manifest.items // PIECE_ROWS)
    bounds = split_int_range(manifest.lo, manifest.hi, parts, manifest.items)
    if bounds is None:
        return [(manifest.lo, manifest.hi)]
    return [(None if a is None else [a], [b]) for a, b in pairwise(bounds)]


class SqlReader:
    """Reads a SQL source with rendered, pushed-down predicates, by its engine's reader.

    ``as_text``: every value as the server prints it (what verify compares), not in
    the carriers an import takes.
    """

    def __init__(
        self, spark: SparkSession | None, source: SqlSourceConfig, as_text: bool = False,
        target: str | None = None,
    ) -> None:  # fmt: skip
        self._spark = spark
        self.source = source
        self.as_text = as_text
        self.target = target
        self.endpoint = JdbcEndpoint.from_url(source.url)
        self.dialect = self.endpoint.sql_dialect()
        self.key_names = list(source.key_columns)
        self.keys: list[sa.ColumnClause[Any]] = [sa.column(name) for name in self.key_names]
        schema, _, name = source.table.rpartition(".")
        table = sa.table(name, schema=schema or None)
        self.table_sql = self.dialect.identifier_preparer.format_table(table)
        self.native = has_native_reader(source.url, as_text)

    @property
    def spark(self) -> SparkSession:
        """The session the reads run in (a reader made without one only plans reads)."""
        if self._spark is None:
            raise RuntimeError("this SqlReader has no SparkSession: it only plans reads")
        return self._spark

    def read_range(
        self,
        lo: Sequence[Any] | None,
        hi: Sequence[Any] | None,
        items: int = 0,
        parts: int | None = None,
    ) -> DataFrame:
        """Rows with ``lo < key <= hi`` (either bound may be None: open).

        ``items``: how many keys the scheduler saw in the range, which lets
        the first range of a walk (``lo`` None) be split as well. ``parts``:
        read partitions, the source's ``read.num_partitions`` unless given.
        """
        parts = self.source.read.num_partitions if parts is None else parts
        bounds = split_int_range(lo, hi, parts, items)
        if bounds is None:
            return self._read([self._range(lo, hi)])
        # Partitioned read: one JDBC query per sub-range (b[i], b[i+1]]; the
        # first one open below when lo is None.
        return self._read(
            [
                self._range(None if a is None else [a], [b])
                for a, b in zip(bounds, bounds[1:], strict=False)
            ]
        )

    def read_ranges(
        self, ranges: Sequence[tuple[Sequence[Any] | None, Sequence[Any] | None]]
    ) -> DataFrame:
        """Rows with ``lo < key <= hi`` for each ``(lo, hi)``: one partition per range, in order."""
        return self._read([self._range(lo, hi) for lo, hi in ranges])

    def read_keys(
        self, keys: Sequence[Sequence[Any]], parts: int | None = None, *, bounded: bool = False
    ) -> DataFrame:
        """Exactly the rows whose key is listed (plus the source's ``where:``).

        ``parts``: read partitions, the source's ``read.num_partitions``
        unless given. ``bounded``: at most that many queries run at once
        (the database's connections are limited); more lists of keys are
        read one after the other within those partitions.

        Integer keys: each JDBC partition reads min..max of its chunk of the
        sorted keys, and a semi-join with the keys keeps the listed rows — a
        range scan on the key's index rather than an IN list of 10,000
        literals. Other keys are looked up by value, at most 1,000 per query:
        text sorts by the database's collation ('a' < 'B' under most), which
        Python cannot reproduce, so a min..max range could miss rows.
        """
        unique = list(dict.fromkeys(tuple(k) for k in keys))
        if not unique:
            return self._read([sa.false()])
        parts = self.source.read.num_partitions if parts is None else parts
        if self.native:
            # Read by the listed keys themselves: the rows' keys are the source's text
            # forms, which a join with the manifest's JSON values could miss.
            size = min(_MAX_NATIVE_LIST, -(-len(unique) // parts))
            return self._read([self._listed(chunk) for chunk in _chunks(unique, size)])
        if all(_is_int(v) for key in unique for v in key):
            chunks = _chunks(sorted(unique), -(-len(unique) // parts))
            predicates = [self._between(chunk[0], chunk[-1]) for chunk in chunks]
        else:
            chunks = _chunks(unique, min(_MAX_IN_LIST, -(-len(unique) // parts)))
            predicates = [self._listed(chunk) for chunk in chunks]
        rows = self._read(predicates)
        if bounded and len(predicates) > parts:
            # Each JDBC partition opens its connection when its task runs:
            # fewer tasks, each reading its partitions in turn, open fewer.
            rows = rows.coalesce(parts)
        wanted = self._keys_frame(unique, rows.schema)
        return rows.join(F.broadcast(wanted), on=self.key_names, how="left_semi")

    def _range(self, lo: Sequence[Any] | None, hi: Sequence[Any] | None) -> ColumnElement[bool]:
        parts = []
        if lo is not None:
            parts.append(row_compare(self.keys, self._typed(lo), ">", self.endpoint.dialect))
        if hi is not None:
            parts.append(row_compare(self.keys, self._typed(hi), "<=", self.endpoint.dialect))
        return sa.and_(sa.true(), *parts)

    def _between(self, first: Sequence[Any], last: Sequence[Any]) -> ColumnElement[bool]:
        return sa.and_(
            row_compare(self.keys, self._typed(first), ">=", self.endpoint.dialect),
            row_compare(self.keys, self._typed(last), "<=", self.endpoint.dialect),
        )

    def _listed(self, keys: list[tuple[Any, ...]]) -> ColumnElement[bool]:
        typed = [tuple(self._typed(k)) for k in keys]
        if len(self.keys) == 1:
            return self.keys[0].in_([k[0] for k in typed])
        return sa.tuple_(*self.keys).in_(typed)

    def _typed(self, values: Sequence[Any]) -> list[Any]:
        """A bound as its key columns' types (from a manifest's JSON, a uuid is text)."""
        if all(isinstance(v, int | float | None) for v in values):
            return list(values)  # nothing to retype: no look-up
        types = key_types(looker_engine(self.source.url), self.source.table, self.key_names)
        return typed_key(values, types)

    def key_conditions(self, keys: Sequence[Sequence[Any]], parts: int) -> list[str]:
        """The SQL conditions that pick exactly the rows of ``keys``: ``parts`` lists of
        them (fewer where there are few keys), in the order given."""
        listed = [tuple(k) for k in keys]
        if not listed:
            return self.conditions([sa.false()])
        size = -(-len(listed) // max(1, parts))
        return self.conditions([self._listed(chunk) for chunk in _chunks(listed, size)])

    def range_conditions(
        self, ranges: Sequence[tuple[Sequence[Any] | None, Sequence[Any] | None]]
    ) -> list[str]:
        """The SQL condition of each ``(lo, hi)`` range (see :meth:`read_ranges`)."""
        return self.conditions([self._range(lo, hi) for lo, hi in ranges])

    def conditions(self, predicates: list[ColumnElement[bool]]) -> list[str]:
        """``predicates`` as the source's SQL, each with the source's ``where:``."""
        where = self.source.where
        return [self._render(p) + (f" AND ({where})" if where else "") for p in predicates]

    def _read(self, predicates: list[ColumnElement[bool]]) -> DataFrame:
        rendered = self.conditions(predicates)
        if self.native:
            columns = table_columns(self.source.url, self.source.table)
            return native_frame(self.spark, self.source.url, self.table_sql, columns, rendered,
                                self.as_text, self.target)  # fmt: skip
        options = {"fetchsize": str(self.source.read.fetchsize), "preferTimestampNTZ": "true"}
        if catalogued(self.source.url):
            columns = table_columns(self.source.url, self.source.table)
            return jdbc_catalogued_frame(
                self.spark, self.source.url, self.table_sql, columns, self.key_names, rendered,
                self.endpoint.read_url, self.endpoint.connection_properties(**options),
                self.as_text, self.target,
            )  # fmt: skip
        custom = _custom_schema(self.source.url, self.source.table, self.as_text)
        if custom:
            options["customSchema"] = custom
        return jdbc_frame(
            self.spark,
            self.endpoint.read_url,
            self.table_sql,
            rendered,
            self.endpoint.connection_properties(**options),
        )

    def forget_schema(self) -> None:
        """Look the table's columns up again on the next read (see
        :mod:`spark_jobs.read.jdbc_read`)."""
        forget_schema(self.endpoint.read_url, self.table_sql)
        forget_columns(self.source.url, self.source.table)
        _custom_schemas.pop((self.source.url, self.source.table), None)

    def _render(self, clause: ColumnElement[bool]) -> str:
        return str(clause.compile(dialect=self.dialect, compile_kwargs={"literal_binds": True}))

    def _keys_frame(self, keys: list[tuple[Any, ...]], schema: T.StructType) -> DataFrame:
        # Build the keys as bigint or text, then cast to the source column's
        # own type: a JSON manifest cannot carry decimals or dates exactly.
        fields = [
            T.StructField(name, _key_type([k[i] for k in keys]), nullable=False)
            for i, name in enumerate(self.key_names)
        ]
        rows = [
            tuple(_key_value(v, f.dataType) for v, f in zip(k, fields, strict=True)) for k in keys
        ]
        frame = self.spark.createDataFrame(rows, T.StructType(fields))
        by_name = {f.name.lower(): f.dataType for f in schema.fields}
        missing = [n for n in self.key_names if n.lower() not in by_name]
        if missing:
            raise SourceError(f"key column(s) {missing} not found in {self.source.table}")
        return frame.select(*[F.col(n).cast(by_name[n.lower()]).alias(n) for n in self.key_names])


_custom_schemas: TTLCache[tuple[str, str], str] = TTLCache(maxsize=64, ttl=SCHEMA_TTL)


@cached(_custom_schemas, lock=threading.Lock())
def _custom_schema(url: str, table: str, stored: bool = False) -> str:
    """Spark's ``customSchema`` for the columns its JDBC reader would read wrong from a
    table outside the catalogue, as the engine says
    (:meth:`~spark_jobs.engines.traits.Traits.jdbc_read_type`; ``stored``: as stored).
    Empty when the table has no such column. Looked up once per :data:`SCHEMA_TTL`, as
    the table's schema is (:mod:`spark_jobs.read.jdbc_read`)."""
    engine = dialect_traits(sa.make_url(url).get_backend_name())
    schema, _, name = table.rpartition(".")
    with sql_engine(url).connect() as conn:
        columns = sa.inspect(conn).get_columns(name, schema=schema or None)
    types = {column["name"]: read for column in columns
             if (read := engine.jdbc_read_type(column["type"], stored)) is not None}  # fmt: skip
    return ", ".join(f"{quoted(c)} {t}" for c, t in types.items())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def split_int_range(
    lo: Sequence[Any] | None, hi: Sequence[Any] | None, parts: int, items: int = 0
) -> list[int | None] | None:
    """Boundaries b0 < … < bn splitting (lo, hi] evenly, or None when it cannot be split.

    Only a single integer key can be split by arithmetic. Without ``lo`` (the
    first batch of a walk), the range is split as if it began ``items`` keys
    below ``hi``, and b0 is None: the first part stays open below, so the
    parts still cover the whole range, however the keys are spread.
    """
    if hi is None or len(hi) != 1 or (lo is not None and len(lo) != 1):
        return None
    high = hi[0]
    if lo is None:
        if not _is_int(high) or items < 2:
            return None
        low = high - items
    else:
        low = lo[0]
    if not (_is_int(low) and _is_int(high)) or high - low < 2 or parts < 2:
        return None
    n = min(parts, high - low)
    bounds: list[int | None] = [low + (high - low) * i // n for i in range(n + 1)]
    if lo is None:
        bounds[0] = None
    return bounds


def _chunks(items: list[tuple[Any, ...]], size: int) -> list[list[tuple[Any, ...]]]:
    return [items[i : i + size] for i in range(0, len(items), max(1, size))]


def _key_type(values: list[Any]) -> T.DataType:
    return T.LongType() if all(_is_int(v) and v in _INT64 for v in values) else T.StringType()


def _key_value(value: Any, data_type: T.DataType) -> Any:
    return value if isinstance(data_type, T.LongType) else str(value)
