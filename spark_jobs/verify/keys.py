"""Keys in verify's reports: as values again, as the ledger writes them, in key order."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T


def plain_key(values: Any) -> list[Any]:
    """A key's values as the scheduler read them from the database, to look them up in
    the ledger and to claim them: Spark hands TIMESTAMP values back as naive local
    times (here: aware, UTC), integral decimals of scale 0 (MariaDB's BIGINT UNSIGNED)
    as decimals (here: ints), and PostgreSQL's unconstrained numeric with 18 zeros."""
    plain = []
    for value in values:
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            # TimestampNTZ comes back naive too; it is rare in keys, and local-as-UTC
            # is what the scheduler's drivers give for it on a UTC machine.
            value = value.astimezone(dt.UTC)
        elif isinstance(value, Decimal):
            exponent = value.as_tuple().exponent
            if value == value.to_integral_value() and exponent == 0:
                value = int(value)
            elif isinstance(exponent, int) and exponent == -18:
                value = Decimal(format(value.normalize(), "f"))
        plain.append(value)
    return plain


def encoded(key: Sequence[Any]) -> str:
    """A key as JSON text, as the ledger writes keys."""
    return json.dumps(list(key), separators=(",", ":"), default=str)


def in_key_order(rows: DataFrame) -> list[Column]:
    """The order of keys (source's, then target's): a key read as text in its number's order
    where it is one ("9" before "10"), else in its text's."""
    order: list[Column] = []
    for side in ("skey", "tkey"):
        struct = rows.schema[side].dataType
        assert isinstance(struct, T.StructType)
        for f in struct.fields:
            part = F.col(side).getField(f.name)
            if isinstance(f.dataType, T.StringType):
                order.append(part.try_cast("decimal(38,10)"))
            order.append(part)
    return order


def at_or_below(columns: Sequence[Column], bound: Sequence[Any]) -> Column:
    """Spark: ``(c1, c2, …) <= (b1, b2, …)`` in key order (a Parquet side's scope)."""
    head, value = columns[0], F.lit(bound[0])
    if len(columns) == 1:
        return head <= value
    return (head < value) | ((head == value) & at_or_below(columns[1:], bound[1:]))
