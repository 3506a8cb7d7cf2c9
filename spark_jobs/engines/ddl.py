"""Column types as SQLAlchemy takes them: a catalogue's type written as it is.

:class:`SqlType` renders the exact text of a type (``numeric(12,2)``,
``"public"."mood"[]``, ``bigint unsigned``) in DDL and casts, and stands for
its values in the checks that look at SQLAlchemy types (``like``: a plain
SQLAlchemy type of the same values, or None).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import UserDefinedType

from spark_jobs.engines.base import Column, Kind


class SqlType(UserDefinedType[Any]):
    """A column type given as its SQL text."""

    cache_ok = True

    def __init__(self, sql: str, like: sa.types.TypeEngine[Any] | None = None) -> None:
        self.sql = sql
        self.like = like

    def get_col_spec(self, **kw: Any) -> str:
        return self.sql

    @property
    def python_type(self) -> type:
        if self.like is None:
            raise NotImplementedError
        return self.like.python_type

    def __repr__(self) -> str:
        return f"SqlType({self.sql!r})"


def plain_type(type_: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    """The SQLAlchemy type a :class:`SqlType` stands for (itself when none)."""
    if isinstance(type_, SqlType) and type_.like is not None:
        return type_.like
    return type_


def like(column: Column) -> sa.types.TypeEngine[Any] | None:
    """A plain SQLAlchemy type holding ``column``'s values, for the checks (None: none)."""
    kind = column.kind
    if kind in (Kind.INT, Kind.UINT, Kind.YEAR):
        base = column.base.split()[0]
        if base in ("int2", "smallint", "tinyint", "year"):
            return sa.SmallInteger()
        if base in ("int4", "integer", "int", "mediumint") and kind != Kind.UINT:
            return sa.Integer()
        if kind == Kind.UINT and base == "bigint":
            return sa.Numeric(20, 0)
        return sa.BigInteger()
    if kind == Kind.DECIMAL:
        return sa.Numeric(column.precision, column.scale)
    if kind == Kind.FLOAT:
        return sa.Double()
    if kind == Kind.BOOL:
        return sa.Boolean()
    if kind in (Kind.TEXT, Kind.CHAR):
        return sa.Text()
    return None


def column_type(sql: str, column: Column | None = None) -> SqlType:
    """``sql`` as a column type, standing for ``column``'s values in checks."""
    return SqlType(sql, like(column) if column is not None else None)
