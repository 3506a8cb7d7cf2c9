"""Spark JDBC reads whose table schema is looked up once, not once per batch.

``spark.read.jdbc`` opens a connection and runs ``SELECT * … WHERE 1=0``
every time it is called, to learn the table's columns: on a loopback
PostgreSQL ~10 ms of a batch, a new server process each time, and more JVM
work than the read of a small batch's plan. A source's table keeps its
columns from one batch to the next, so :func:`jdbc_frame` builds the same
relation ``spark.read.jdbc`` builds (Spark's ``JDBCRelation`` with one
partition per predicate) from a schema it looked up at most
:data:`SCHEMA_TTL` seconds ago. A column added to the source table is read
once that time is up; a failed batch forgets the schema
(:func:`forget_schema`), so its retry sees a dropped or changed column at once.

``JDBCRelation`` is Spark's internal class: when a Spark version builds it
differently, the first call finds out and every read goes through
``spark.read.jdbc`` from then on, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from cachetools import TTLCache
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SCHEMA_TTL = 60.0
"""Seconds a table's schema is reused before it is looked up again."""

_schemas: TTLCache[tuple[str, str, tuple[tuple[str, str], ...]], str] = TTLCache(
    maxsize=256, ttl=SCHEMA_TTL
)
_lock = threading.Lock()
_direct = True
"""False once this Spark version has refused to build the relation directly."""


def jdbc_frame(
    spark: SparkSession,
    url: str,
    table: str,
    predicates: Sequence[str],
    properties: Mapping[str, str],
) -> DataFrame:
    """What ``spark.read.jdbc(url, table, predicates=…, properties=…)`` returns.

    Rows of ``table`` matching each predicate, one partition per predicate;
    the table's schema comes from a recent look-up when there is one.
    """
    global _direct
    if _direct:
        try:
            return _built(spark, url, table, predicates, properties)
        except Py4JJavaError:
            raise  # the database's answer (no such table, refused): as spark.read.jdbc's
        except (Py4JError, TypeError) as error:
            # No such constructor or class in this Spark: its own way from now on.
            _direct = False
            log.debug("JDBC reads go through spark.read.jdbc: %s", str(error).splitlines()[0])
    return spark.read.jdbc(url, table, predicates=list(predicates), properties=dict(properties))


def forget_schema(url: str, table: str) -> None:
    """Look ``table``'s schema up again on its next read (its batch failed: it may have changed)."""
    with _lock:
        for key in [k for k in _schemas if k[:2] == (url, table)]:
            _schemas.pop(key, None)


def _built(
    spark: SparkSession,
    url: str,
    table: str,
    predicates: Sequence[str],
    properties: Mapping[str, str],
) -> DataFrame:
    jvm = spark._jvm
    assert jvm is not None
    package = jvm.org.apache.spark.sql.execution.datasources.jdbc
    relation_class = package.JDBCRelation
    options = package.JDBCOptions(
        url, table, jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(dict(properties))
    )
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    parts = gateway.new_array(jvm.org.apache.spark.Partition, len(predicates))
    for index, predicate in enumerate(predicates):
        parts[index] = package.JDBCPartition(predicate, index)
    session = spark._jsparkSession
    key = (url, table, tuple(sorted(properties.items())))
    with _lock:
        known = _schemas.get(key)
    if known is None:
        # Spark's own path: looks the schema up, as spark.read.jdbc does.
        relation = relation_class.apply(parts, options, session)
        with _lock:
            _schemas[key] = relation.schema().json()
    else:
        schema = jvm.org.apache.spark.sql.types.DataType.fromJson(known)
        metrics = getattr(relation_class, "apply$default$4")()
        relation = relation_class.apply(schema, parts, options, metrics, session)
    return DataFrame(session.baseRelationToDataFrame(relation), spark)
