"""Payload batches (SQS): JSON bodies as a DataFrame, one column per top-level field.

The schema is inferred here, in Python, so the column types do not depend on
Spark's JSON inference settings.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from config.errors import SourceError

_INT64 = range(-(2**63), 2**63)

__all__ = ["BadPayload", "parse_payloads", "payload_frame", "payload_schema"]


class BadPayload(SourceError):
    """A payload in the manifest is not a JSON object: retrying cannot help."""

    transient = False



_KIND_TYPES: dict[str, T.DataType] = {
    "bigint": T.LongType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint" if value in _INT64 else "string"
    if isinstance(value, float):
        return "double"
    return "string"  # str, and objects/arrays as JSON text


def _merge(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    if {a, b} == {"bigint", "double"}:
        return "double"
    return "string"  # incompatible kinds: keep every value, as text


def payload_schema(records: Sequence[dict[str, Any]]) -> T.StructType:
    """Columns for JSON records: integer → bigint, number → double, bool →
    boolean, string → string, object/array → JSON text; fields in order of
    first appearance; a field of mixed kinds becomes text.

    A field that is null (or missing) in every record is ``void``: the batch
    says nothing about its type, so the writer takes the target column's own
    type (a JDBC table's column, a Parquet table's files) instead of guessing
    one that may clash with what earlier batches wrote.
    """
    kinds: dict[str, str | None] = {}
    for record in records:
        for name, value in record.items():
            current = kinds.get(name)
            kinds[name] = current if value is None else _merge(current, _kind(value))
    return T.StructType(
        [
            T.StructField(name, _KIND_TYPES[kind] if kind else T.NullType(), True)
            for name, kind in kinds.items()
        ]
    )


def _cell(value: Any, data_type: T.DataType) -> Any:
    if value is None:
        return None
    if isinstance(data_type, T.StringType):
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if isinstance(data_type, T.DoubleType):
        return float(value)
    return value


def parse_payloads(payloads: Sequence[str], key: str | None) -> list[dict[str, Any]]:
    """JSON bodies as dicts; when ``key`` (a.b for nested) is given, the last
    body of each key wins, so a batch never holds a key twice."""
    records: dict[Any, dict[str, Any]] = {}
    for position, text in enumerate(payloads):
        try:
            record = json.loads(text)
        except ValueError as error:
            raise BadPayload(f"payload {position} is not JSON: {error}") from error
        if not isinstance(record, dict):
            raise BadPayload(f"payload {position} is a JSON {type(record).__name__}, not an object")
        identity: Any = position
        if key:
            identity = _lookup(record, key)
            if identity is None:
                raise BadPayload(f"payload {position} has no key field {key!r}")
            identity = json.dumps(identity, sort_keys=True)
        records.pop(identity, None)  # re-insert: the last body takes the last place
        records[identity] = record
    return list(records.values())


def _lookup(record: dict[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def payload_frame(spark: SparkSession, payloads: Sequence[str], key: str | None) -> DataFrame:
    """A DataFrame of JSON bodies, one column per top-level field (see :func:`payload_schema`)."""
    records = parse_payloads(payloads, key)
    schema = payload_schema(records)
    rows = [
        tuple(_cell(record.get(f.name), f.dataType) for f in schema.fields) for record in records
    ]
    return spark.createDataFrame(rows, schema)
