"""Comparisons of keys in key order, as SQL each dialect can answer from the key's index;
and keys read back from JSON made of their columns' types again (:func:`typed_key`).

``(a, b) > (x, y)`` is how PostgreSQL and SQLite compare row values, and
they use the key's index for it; MySQL and MariaDB do not, so there the
order is spelled out with the leading column as a plain range.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import operator
import threading
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from cachetools import TTLCache
from sqlalchemy.sql.elements import ColumnElement

from config.errors import SourceError
from spark_jobs.engines import dialect_traits


def row_compare(
    columns: list[sa.ColumnClause[Any]], values: Sequence[Any], op: str, dialect: str
) -> ColumnElement[bool]:
    """``(a, b) op (x, y)`` for ``op`` in ``>``, ``>=``, ``<=``, in a form ``dialect`` indexes."""
    if len(columns) != len(values):
        raise SourceError(f"key has {len(columns)} columns but the bound {list(values)} does not")
    # An integer past 64 bits (a MySQL bigint unsigned) is bound as a numeric: as an
    # integer it would be cast to bigint, which cannot hold it.
    literals = [
        sa.literal(v, sa.Numeric()) if isinstance(v, int) and not -(2**63) <= v < 2**63
        else sa.literal(v)
        for v in values
    ]  # fmt: skip
    if len(columns) == 1:
        return _OPS[op](columns[0], literals[0])
    if dialect_traits(dialect).row_values_indexed:
        return _OPS[op](sa.tuple_(*columns), sa.tuple_(*literals))
    # MySQL/MariaDB do not use an index for row values: spell the order out,
    # with the leading column as a plain range the optimizer can use.
    strict = _OPS[op[0]]  # > for > and >=, < for <=
    terms = [
        sa.and_(
            *[c == v for c, v in zip(columns[:i], literals[:i], strict=True)],
            strict(columns[i], literals[i]),
        )
        for i in range(len(columns))
    ]
    if op != ">":
        terms.append(sa.and_(*[c == v for c, v in zip(columns, literals, strict=True)]))
    leading = _OPS[op[0] + "="](columns[0], literals[0])
    return sa.and_(leading, sa.or_(*terms))


_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


_PARSERS: dict[type, Callable[[str], Any]] = {
    uuid.UUID: uuid.UUID,
    decimal.Decimal: decimal.Decimal,
    dt.datetime: dt.datetime.fromisoformat,
    dt.date: dt.date.fromisoformat,
    dt.time: dt.time.fromisoformat,
    int: int,
}
_TYPES_TTL = 60.0
_types: TTLCache[tuple[str, str, tuple[str, ...]], list[type | None]] = TTLCache(
    maxsize=256, ttl=_TYPES_TTL
)
_types_lock = threading.Lock()


def key_types(
    bind: sa.Engine | sa.Connection, table: str, key: Sequence[str]
) -> list[type | None]:
    """The Python type of each key column of ``table`` (``schema.table``), as its driver
    reads it (None: not known); looked up once a minute (on ``bind``, an engine or the
    connection of a transaction under way)."""
    engine = bind if isinstance(bind, sa.Engine) else bind.engine
    url = engine.url.render_as_string(hide_password=True)
    cache_key = (url, table, tuple(key))
    with _types_lock:
        known = _types.get(cache_key)
    if known is not None:
        return known
    schema, _, name = table.rpartition(".")
    with warnings.catch_warnings():  # a type SQLAlchemy does not know, in a column not a key
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        columns = {c["name"]: c["type"]
                   for c in sa.inspect(bind).get_columns(name, schema or None)}  # fmt: skip
    found: list[type | None] = []
    for column in key:
        try:
            found.append(columns[column].python_type if column in columns else None)
        except NotImplementedError:
            found.append(None)
    with _types_lock:
        _types[cache_key] = found
    return found


def typed_key(values: Sequence[Any], types: Sequence[type | None]) -> list[Any]:
    """A key's values as its columns' Python types: a key read back from JSON (the ledger,
    a manifest) holds a uuid, a decimal or a timestamp as text, which SQL would compare as
    text (MariaDB: a decimal as a double) or refuse to compare at all (PostgreSQL's uuid)."""
    typed = []
    for value, kind in zip(values, types, strict=False):
        parse = _PARSERS.get(kind) if kind is not None else None
        if isinstance(value, str) and parse is not None:
            # Not of its column's form: the database says so when it compares.
            with contextlib.suppress(ValueError):
                value = parse(value)
        typed.append(value)
    return typed


def key_typer(url: str, table: str, key: Sequence[str]) -> Callable[[Sequence[Any]], list[Any]]:
    """:func:`typed_key` for the key of ``table`` at ``url`` (its types looked up now, on a
    connection closed at once: none is kept idle against a connection limit)."""
    from spark_jobs.common.jdbc import looker_engine

    types = key_types(looker_engine(url), table, key)
    return lambda values: typed_key(values, types)
