"""Values an existing JDBC target column would silently change.

A batch column and the table's column can be of the same family (numbers)
and still not hold the same values: PostgreSQL and MySQL round ``12.75`` to
``13`` when it goes into an INTEGER column, and ``1.125`` to ``1.13`` into
NUMERIC(12,2), without an error. A :class:`Narrowing` is such a pair of
columns; the commit (:mod:`spark_jobs.load.commit_jdbc`) sets the rows whose value
would change aside in ``_sluice_rejects``, with a reason naming the column,
and lets the others through. Values that fit (``2.00`` into INTEGER) are not
touched.

Checked: an exact number with more decimal places than the table's column
keeps (decimal or floating point into an integer column, a decimal of a
larger scale into a decimal column), and values outside an integer column's
range. Floating point into a decimal column with decimal places is left to
the database: a double has no exact decimal places to lose (0.1 + 0.2 is
0.30000000000000004), and rounding it to the column's scale is what such a
column is for.
"""

from __future__ import annotations

import contextlib
import decimal
import math
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from spark_jobs.engines import dialect_engine


@dataclass(frozen=True)
class Narrowing:
    """A batch column whose values the table's column may not hold unchanged.

    ``scale``: the decimal places the table's column keeps (0: an integer),
    or None when the batch cannot have more. ``low``/``high``: the table's
    integer range, or None when the batch's values all fit in it.
    ``table_type``/``batch_type``: both types as SQL, for messages.
    """

    column: str
    table_type: str
    batch_type: str
    scale: int | None
    low: int | None = None
    high: int | None = None
    staged_as: str | None = None
    """The SQL type the staged values are compared in, when they are staged as text."""

    def changes(self, value: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        """SQL that is true where ``value`` (the staged column) would change in the table.

        NULL stays NULL: false for it. ``round`` is in every dialect
        (SQLite's ``floor`` is not); PostgreSQL has no two-argument
        ``round`` for doubles, which is why a scale > 0 is only checked
        for decimals.
        """
        terms: list[sa.ColumnElement[bool]] = []
        if self.low is not None and self.high is not None:
            terms += [value < self.low, value > self.high]
        if self.scale == 0:
            terms.append(value != sa.func.round(value))
        elif self.scale is not None:
            terms.append(value != sa.func.round(value, self.scale))
        return sa.or_(*terms)

    def reason(self, value: Any) -> str:
        """Why ``value`` is set aside: the column, the value and both types."""
        where = f"column {self.column!r} is {self.table_type} in the table"
        batch = f"(the batch has {self.batch_type})"
        if isinstance(value, str):
            with contextlib.suppress(decimal.InvalidOperation):
                value = decimal.Decimal(value)
        if _not_a_number(value):
            return f"{where}, which cannot hold {value} {batch}"
        if self.low is not None and self.high is not None and not self.low <= value <= self.high:
            return (
                f"{where}, which holds {self.low} to {self.high}: {value} is out of range {batch}"
            )
        kept = "no decimal places" if self.scale == 0 else f"{self.scale} decimal places"
        return f"{where}, which keeps {kept}: {value} would be rounded {batch}"


def narrowing(
    column: str,
    table_type: sa.types.TypeEngine[Any],
    batch_type: sa.types.TypeEngine[Any],
    dialect: sa.Dialect,
) -> Narrowing | None:
    """The :class:`Narrowing` of ``column`` from ``batch_type`` into ``table_type``, if any."""
    if _is_bool(table_type) or _is_bool(batch_type):
        return None  # MySQL's BOOL is a TINYINT: 0 and 1 always fit
    table_type, batch_type = _plain(table_type), _plain(batch_type)
    table_scale = _exact_scale(table_type)
    batch_scale = _batch_scale(batch_type)
    if table_scale is None or batch_scale == _NOT_A_NUMBER:
        return None
    scale: int | None = None
    if batch_scale == _ANY and table_scale == 0:
        scale = 0  # a float into an integer column
    elif isinstance(batch_scale, int) and batch_scale > table_scale:
        scale = table_scale
    low = high = None
    table_range = _int_range(table_type, dialect)
    if table_range is not None:
        batch_range = _batch_range(batch_type)
        if batch_range is None or not (
            table_range[0] <= batch_range[0] and batch_range[1] <= table_range[1]
        ):
            low, high = table_range
    if scale is None and low is None:
        return None
    return Narrowing(
        column,
        str(table_type.compile(dialect)),
        str(batch_type.compile(dialect)),
        scale,
        low,
        high,
    )


_ANY = "any"
"""A batch type with any number of decimal places (floating point)."""
_NOT_A_NUMBER = "nan"
"""A batch type that is not a number: not this module's business."""


def _plain(type_: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    """A catalogue's type as the plain SQLAlchemy type of its values (see ``SqlType``)."""
    like = getattr(type_, "like", None)
    return like if like is not None else type_


def _is_bool(type_: sa.types.TypeEngine[Any]) -> bool:
    return isinstance(type_, sa.Boolean)


def _exact_scale(type_: sa.types.TypeEngine[Any]) -> int | None:
    """Decimal places an exact numeric table column keeps; None when not one (or unbounded)."""
    if isinstance(type_, sa.Integer):
        return 0
    if isinstance(type_, sa.Numeric) and not isinstance(type_, sa.Float):
        return type_.scale  # PostgreSQL's bare NUMERIC keeps any scale: None
    return None


def _batch_scale(type_: sa.types.TypeEngine[Any]) -> int | str:
    if isinstance(type_, sa.Integer):
        return 0
    if isinstance(type_, sa.Float):
        return _ANY
    if isinstance(type_, sa.Numeric):
        return _ANY if type_.scale is None else int(type_.scale)
    return _NOT_A_NUMBER


def _int_range(type_: sa.types.TypeEngine[Any], dialect: sa.Dialect) -> tuple[int, int] | None:
    """The values an integer table column holds; None for other columns."""
    if not isinstance(type_, sa.Integer):
        return None
    held = dialect_engine(dialect).integer_bits
    if held is not None:
        bits = held
    elif isinstance(type_, mysql.TINYINT):
        bits = 8
    elif isinstance(type_, sa.SmallInteger):
        bits = 16
    elif isinstance(type_, mysql.MEDIUMINT):
        bits = 24
    elif isinstance(type_, sa.BigInteger):
        bits = 64
    else:
        bits = 32
    return _bits_range(bits, unsigned=getattr(type_, "unsigned", False))


def _bits_range(bits: int, *, unsigned: bool = False) -> tuple[int, int]:
    """The smallest and largest integer of ``bits`` bits."""
    if unsigned:
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _batch_range(type_: sa.types.TypeEngine[Any]) -> tuple[int, int] | None:
    """The values a batch column can carry, at most; None when unbounded (floats)."""
    if isinstance(type_, sa.Integer):
        # What jdbc.sql_column_type gives Spark's short, int and bigint.
        if isinstance(type_, sa.SmallInteger):
            bits = 16
        elif isinstance(type_, sa.BigInteger):
            bits = 64
        else:
            bits = 32
        return _bits_range(bits)
    if isinstance(type_, sa.Numeric) and not isinstance(type_, sa.Float):
        if type_.precision is None:
            return None
        # NUMERIC(p, s) holds less than 10^(p-s) in magnitude; its integral part at most that.
        limit = 10 ** (type_.precision - (type_.scale or 0))
        return -limit, limit
    return None


def _not_a_number(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, decimal.Decimal):
        return not value.is_finite()
    return False


@dataclass(frozen=True)
class ZeroDate:
    """A MySQL date column whose zero dates (``0000-00-00``, a month or day of ``00``) are
    set aside as rejects rather than made NULL (the source's ``zero_dates: reject``); a
    :class:`Narrowing` to the commit."""

    column: str
    staged_as: str | None = None

    def changes(self, value: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        """SQL, in every dialect: ``value`` (the staged text) is a zero date."""
        return sa.or_(value.like("____-00-%"), value.like("____-__-00%"))

    def reason(self, value: Any) -> str:
        """Why the row is set aside."""
        return (f"column {self.column!r} holds the zero date {value}, which only MySQL has "
                "(zero_dates: reject)")


@dataclass(frozen=True)
class NotANumber:
    """A floating-point column, staged as text, whose NaN and infinities the target has no
    value for (SQLite would store NULL): their rows are set aside, naming the column."""

    column: str
    staged_as: str | None = None

    def changes(self, value: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        """SQL: ``value`` (the staged text) is NaN or an infinity."""
        return value.in_(["NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"])

    def reason(self, value: Any) -> str:
        """Why the row is set aside."""
        return f"column {self.column!r} holds {value}, which the target cannot store"
