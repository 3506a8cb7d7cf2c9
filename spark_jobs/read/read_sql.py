"""A SQL source table's rows as a Spark DataFrame, read the way its engine reads best.

PostgreSQL: ``COPY (SELECT …) TO STDOUT`` inside Spark tasks, one query per
task (:mod:`spark_jobs.engines.postgresql.read`); MySQL and MariaDB: ConnectorX
inside Spark tasks (:mod:`spark_jobs.engines.mysql.read`), where it is
installed. Other engines: Spark's JDBC reader (:mod:`spark_jobs.read.jdbc_read`), over
a query that reads each column as its carrier takes it.

Either way each column travels in its carrier (see
:mod:`spark_jobs.engines.base`) and carries its source column in its field's
metadata. The table's columns are looked up at most every
:data:`~spark_jobs.read.jdbc_read.SCHEMA_TTL` seconds, and again after a failed
batch (:func:`forget_columns`).

A frame read natively remembers how (:func:`native_queries`), so that a task
that writes its rows straight into a target can run the read itself, the rows
never passing through the JVM.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from cachetools import TTLCache
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from config.errors import SourceError
from spark_jobs.common.jdbc import looker_engine
from spark_jobs.engines import catalogued, engine_of, with_source
from spark_jobs.engines.base import Column, Engine, carriers
from spark_jobs.read.jdbc_read import SCHEMA_TTL

if TYPE_CHECKING:
    from spark_jobs.engines.mysql.read import Queries as MySQLQueries
    from spark_jobs.engines.postgresql.read import Queries

# A schema's tables all fit (a few kB each): 1,000 tables looked up together and then
# each read would otherwise find most of them evicted, and look each up again.
_columns: TTLCache[tuple[str, str], list[Column]] = TTLCache(maxsize=20_000, ttl=SCHEMA_TTL)
_columns_lock = threading.Lock()
_native: weakref.WeakKeyDictionary[DataFrame, object] = weakref.WeakKeyDictionary()


def table_columns(url: str, table: str) -> list[Column]:
    """The columns of ``table`` (``schema.table`` or ``table``) at ``url``, as its engine
    describes them; looked up at most every :data:`SCHEMA_TTL` seconds."""
    found = tables_columns(url, [table]).get(table)
    if not found:
        raise SourceError(f"table {table} not found in the source database")
    return found


def tables_columns(url: str, tables: Sequence[str]) -> dict[str, list[Column]]:
    """The columns of each of ``tables`` found at ``url`` (as :func:`table_columns`), those
    not known yet looked up on one connection: a batch of many small tables looked each
    table up on a connection of its own. A table not found is left out."""
    with _columns_lock:
        known = {t: _columns.get((url, t)) for t in dict.fromkeys(tables)}
    wanted = [t for t, columns in known.items() if columns is None]
    if wanted:
        engine = engine_of(url)
        # A connection of its own, closed at once: none kept idle against a connection limit.
        names = {table: (table.rpartition(".")[0] or None, table.rpartition(".")[2])
                 for table in wanted}  # fmt: skip
        with looker_engine(url).connect() as conn:
            found = engine.describe_many(conn, list(names.values()))
        for table in wanted:
            known[table] = found.get(names[table], [])
        with _columns_lock:
            for table in wanted:
                columns = known[table]
                if columns:
                    _columns[(url, table)] = columns
    return {t: columns for t, columns in known.items() if columns}


def forget_columns(url: str, table: str) -> None:
    """Look ``table``'s columns up again on the next read (a batch failed: it may have changed)."""
    with _columns_lock:
        _columns.pop((url, table), None)


def batch_schema(engine: Engine, columns: Sequence[Column], as_text: bool = False) -> T.StructType:
    """The Spark schema of a batch of ``columns``: carriers (``as_text``: text), each field
    carrying its column."""
    plain = carriers(engine, columns)
    if as_text:
        plain = T.StructType([T.StructField(f.name, T.StringType(), True) for f in plain.fields])
    return T.StructType(
        [with_source(f, engine, c) for f, c in zip(plain.fields, columns, strict=True)]
    )


def native_frame(
    spark: SparkSession, url: str, table_sql: str, columns: Sequence[Column], where: list[str],
    as_text: bool = False, target: str | None = None,
) -> DataFrame:  # fmt: skip
    """The rows matching each of ``where`` (SQL), one Spark task per condition, read by the
    engine's own protocol (PostgreSQL: COPY). ``as_text``: every value as the server
    prints it (:meth:`~spark_jobs.engines.base.Engine.text_sql`), what verify compares."""
    schema, queries = native_read(url, table_sql, columns, where, as_text, target)
    tasks = spark.range(0, len(queries.queries), 1, max(1, len(queries.queries)))
    frame = tasks.mapInArrow(queries.rows, schema)
    _native[frame] = queries
    return frame


def native_read(
    url: str, table_sql: str, columns: Sequence[Column], where: Sequence[str | tuple[str, ...]],
    as_text: bool = False, target: str | None = None, zero_dates: str | None = None,
) -> tuple[T.StructType, Queries | MySQLQueries]:  # fmt: skip
    """What :func:`native_frame` reads, without Spark: the rows' schema and the queries,
    one per condition of ``where``, whose ``rows`` a Spark task runs (a MySQL source's
    condition may be a tuple of conditions, read one after the other by the same task).

    ``zero_dates`` (a load's own task, into engine ``target``): the rows come
    with the transforms :func:`~spark_jobs.engines.transforms.for_target` would apply
    in Spark (a MySQL source's; PostgreSQL's need none).
    """
    engine = engine_of(url)
    schema = batch_schema(engine, columns, as_text)
    arrow = to_arrow_schema(T.StructType([T.StructField(f.name, f.dataType) for f in schema]))
    quote = sa.make_url(url).get_dialect()().identifier_preparer.quote

    def read(c: Column) -> str:
        name = quote(c.name)
        return engine.text_sql(c, name) if as_text else engine.read_sql(c, name, target)

    names = [quote(c.name) for c in columns]
    finish = None if zero_dates is None or target is None else (target, zero_dates)
    queries = engine.native_queries(url, table_sql, columns, [read(c) for c in columns], names,
                                    arrow, where, as_text, finish)  # fmt: skip
    return schema, queries


def jdbc_catalogued_frame(
    spark: SparkSession,
    url: str,
    table_sql: str,
    columns: Sequence[Column],
    key: Sequence[str],
    where: list[str],
    read_url: str,
    properties: dict[str, str],
    as_text: bool = False,
    target: str | None = None,
) -> DataFrame:
    """The rows matching each of ``where`` through Spark's JDBC reader, one partition per
    condition, each column read by its rule's SQL into its carrier (``as_text``: as the
    server prints it, see :func:`native_frame`).

    The conditions compare the key's own columns (by its index, in its own order); a key
    column read by other SQL (a datetime as text) is read twice, as it is and as text.
    """
    import pyspark.sql.functions as F

    from spark_jobs.read.jdbc_read import jdbc_frame

    engine = engine_of(url)
    schema = batch_schema(engine, columns, as_text)
    quote = sa.make_url(url).get_dialect()().identifier_preparer.quote
    selected, fields, final = [], [], []
    for column, field in zip(columns, schema.fields, strict=True):
        name = quote(column.name)
        read = (engine.text_sql(column, name) if as_text
                else engine.read_sql(column, name, target))  # fmt: skip
        alias = column.name
        if read != name and column.name in key:
            selected.append(f"{name} AS {name}")  # for the conditions, not read
            alias = f"_sluice_text_{len(selected)}"
        selected.append(f"{read} AS {quote(alias)}")
        fields.append(f"{_spark_name(alias)} {field.dataType.simpleString()}")
        final.append(F.col(_spark_name(alias)).alias(column.name, metadata=field.metadata))
    plain = len(selected) == len(columns) and all(
        part == f"{quote(c.name)} AS {quote(c.name)}"
        for part, c in zip(selected, columns, strict=True)
    )
    relation = table_sql if plain else f"(SELECT {', '.join(selected)} FROM {table_sql}) rows_"
    frame = jdbc_frame(spark, read_url, relation, where,
                       {**properties, "customSchema": ", ".join(fields)})  # fmt: skip
    return frame.select(*final)


def _spark_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def native_queries(frame: DataFrame) -> object | None:
    """How ``frame`` reads its rows in its tasks, when it was made by :func:`native_frame`
    and nothing since (a ``columns:`` mapping makes a new frame): the queries, one per
    partition, whose ``rows(tasks)`` a task may run itself. None otherwise."""
    return _native.get(frame)


def has_native_reader(url: str, as_text: bool = False) -> bool:
    """Whether the engine of ``url`` is read natively here: PostgreSQL through psycopg 3;
    MySQL and MariaDB through ConnectorX, for imports (``as_text``, verify's reads: by
    Spark's JDBC reader, whose text verify compares)."""
    return catalogued(url) and engine_of(url).reads_natively(as_text)
