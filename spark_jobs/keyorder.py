"""Comparisons of keys in key order, as SQL each dialect can answer from the key's index.

``(a, b) > (x, y)`` is how PostgreSQL and SQLite compare row values, and
they use the key's index for it; MySQL and MariaDB do not, so there the
order is spelled out with the leading column as a plain range.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from config.errors import SourceError


def row_compare(
    columns: list[sa.ColumnClause[Any]], values: Sequence[Any], op: str, dialect: str
) -> ColumnElement[bool]:
    """``(a, b) op (x, y)`` for ``op`` in ``>``, ``>=``, ``<=``, in a form ``dialect`` indexes."""
    if len(columns) != len(values):
        raise SourceError(f"key has {len(columns)} columns but the bound {list(values)} does not")
    literals = [sa.literal(v) for v in values]
    if len(columns) == 1:
        return _OPS[op](columns[0], literals[0])
    if dialect not in ("mysql", "mariadb"):
        # PostgreSQL and SQLite compare row values and use the key's index for them.
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
