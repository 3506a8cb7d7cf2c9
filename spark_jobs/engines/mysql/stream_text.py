"""A MariaDB row's Python values as PostgreSQL's text: a ``mode: stream`` source into PostgreSQL.

A stream reads a MariaDB table twice over: its rows once, by a SELECT through
SQLAlchemy and PyMySQL, and every later change from the row binary log
through ``mysql-replication`` (:mod:`sources.binlog_changes`). Both give
Python values, not always the same ones for the same stored value. Here
each becomes the text that PostgreSQL's input function of the column's
mapped type (:meth:`spark_jobs.engines.postgresql.PostgreSQL.target_type`)
reads as exactly the value the keyset path stores (the README's mapping),
for ``COPY … FROM STDIN`` in the text format (the caller escapes the text
for COPY: ``\\``, tab, newline, CR; None is ``\\N``).

What the snapshot's SELECT must do (:func:`select_list` writes it):

- run in ``SET time_zone = '+00:00'`` (:data:`SESSION_TIME_ZONE`): PyMySQL
  gives a ``timestamp`` as a naive value in the session's zone, read here as
  UTC; the library reads the stored epoch as naive UTC
  (``utcfromtimestamp``), whatever the process's ``TZ``;
- read a ``float`` column as ``CAST(col AS DOUBLE)``: the text protocol
  prints 6 digits of it (1.2345678 arrives as 1.23457). A value of a float
  column that is not exactly a 32-bit float is refused.

What the library gives that the SELECT does not, handled here: bit strings
as their digits (PyMySQL: big-endian bytes), a ``binary(n)``, ``uuid`` or
``inet4/6`` without its trailing zero bytes (all zeros: ``''``), an empty
``varbinary`` as ``''``, a set as a Python set (its members in the column's
order here), a zero ``timestamp`` as 1970-01-01 00:00:00 (the epoch 0, which
no real ``timestamp`` holds), the year 0000 as 1900, a zero date as None.
Negative fractional ``time`` values it decodes wrongly in a way no value
shows: :func:`from_binlog` undoes it, for binary-log rows only.

A value the target cannot hold as the keyset path stores it (``tinyint(1)``
other than 0/1, a year-0 date, NUL in text…) raises :class:`RefusedValue`,
naming the column and the value: a rejected row, never a changed value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import math
import re
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from config.errors import SluiceError
from spark_jobs.engines.base import Column, Kind

SESSION_TIME_ZONE = "+00:00"
"""The ``time_zone`` of the snapshot's SELECT session: its naive timestamps are UTC."""

_ZERO_DATE = re.compile(r"^[0-9]{4}-(00-|[0-9]{2}-00)")  # spark_jobs.engines.arrow_transforms' rule
_EPOCH = dt.datetime(1970, 1, 1)  # the library's zero timestamp (the stored epoch 0)
_LIBRARY_ZERO_YEAR = 1900  # the library's YEAR 0000 (it adds 1900 to the stored 0)
_WIDTH = {"binary": None, "uuid": 16, "inet4": 4, "inet6": 16}  # None: the column's length
_SECOND = 1_000_000


class RefusedValue(SluiceError, ValueError):
    """A value PostgreSQL's column cannot hold as the keyset path stores it: its row is a
    rejected row (the message names the column, the value and why). No retry helps."""

    permanent = True


def postgres_text(value: Any, column: Column) -> str | None:
    """``value`` of MariaDB ``column`` (from PyMySQL or ``mysql-replication``) as the text
    PostgreSQL's input of the column's mapped type reads; None for NULL and zero dates.

    Raises :class:`RefusedValue` for a value the keyset path would set aside.
    """
    if value is None:
        # The library gives an empty set as None: in a NOT NULL column it can be nothing else.
        return "{}" if column.kind == Kind.SET and not column.nullable else None
    convert = _BY_KIND.get(column.kind)
    if convert is None:
        raise RefusedValue(f"column {column.name!r} ({column.type}): sluice has no PostgreSQL "
                           "text for its type")  # fmt: skip
    try:
        return convert(value, column)
    except (ValueError, TypeError, OverflowError) as error:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise RefusedValue(f"column {column.name!r} ({column.type}): value {shown} {error}"
                           ) from error  # fmt: skip


def postgres_row(row: Mapping[str, Any], columns: Mapping[str, Column]) -> dict[str, str | None]:
    """:func:`postgres_text` of each of ``columns`` (name → column) in ``row``; a column the
    row lacks raises KeyError."""
    return {name: postgres_text(row[name], column) for name, column in columns.items()}


def from_binlog(row: Mapping[str, Any], columns: Mapping[str, Column]) -> dict[str, Any]:
    """``row`` as ``mysql-replication`` decoded it from the binary log, with what it decodes
    wrongly put right, before :func:`postgres_row`.

    A negative ``time`` with a fraction: MariaDB stores it negated whole, the
    library negates its seconds and its fraction apart, so that ``-hh:mm:ss.f``
    comes as ``-(hh:mm:ss + 1 - f)`` (``-00:00:00.000001`` as ``-00:00:00.999999``).
    """
    fixed = dict(row)
    for name, column in columns.items():
        value = fixed.get(name)
        if column.kind == Kind.TIME and isinstance(value, dt.timedelta) and value < dt.timedelta(0):
            whole, fraction = divmod(_micros(-value), _SECOND)
            if fraction:
                fixed[name] = -dt.timedelta(microseconds=whole * _SECOND + _SECOND - fraction)
    return fixed


def select_list(columns: Sequence[Column], quote: Callable[[str], str]) -> str:
    """The snapshot SELECT's column list: each column (``quote``: the dialect's quoting) as
    :func:`postgres_text` needs it read, a ``float`` exactly (see the module)."""
    return ", ".join(f"CAST({quote(c.name)} AS DOUBLE) AS {quote(c.name)}" if c.base == "float"
                     else quote(c.name) for c in columns)  # fmt: skip


def _boolean(value: Any, column: Column) -> str:
    if _integer(value, column) not in ("0", "1"):
        raise ValueError("is neither 0 nor 1: tinyint(1) becomes boolean")
    return "t" if value else "f"


def _integer(value: Any, column: Column) -> str:
    if not isinstance(value, int):
        raise TypeError("is no integer")
    return str(int(value))


def _decimal(value: Any, column: Column) -> str:
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise TypeError("is no finite Decimal (a decimal is read exactly, never as a float)")
    return format(value, "f")


def _float(value: Any, column: Column) -> str:
    if isinstance(value, int):
        value = float(value)
    if not isinstance(value, float) or not math.isfinite(value):
        raise ValueError("is no finite float: MariaDB holds no NaN or infinity")
    if column.base != "float":
        return repr(value)  # the shortest text that reads back as this double
    if _single(value) != value:
        raise ValueError("is no 32-bit float: read float columns as CAST(col AS DOUBLE) (the "
                         "text protocol gives 6 digits)")  # fmt: skip
    return next(t for t in (f"{value:.{n}g}" for n in range(1, 10)) if _single(float(t)) == value)


def _single(value: float) -> float:
    """``value`` rounded to a 32-bit float (as PostgreSQL's ``real`` input rounds it)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:  # past the largest float: it would round to an infinity
        return math.copysign(math.inf, value)


def _bit(value: Any, column: Column) -> str:
    if isinstance(value, bytes | bytearray):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str) and value and set(value) <= {"0", "1"}:
        number = int(value, 2)  # the library's digits
    elif isinstance(value, int):
        number = value
    else:
        raise TypeError("is no bit string (bytes, digits or an integer)")
    width = column.length or 1
    if not 0 <= number < 2**width:
        raise ValueError(f"does not fit bit({width})")
    if column.length == 1:
        return "t" if number else "f"  # the mapping: bit(1) as boolean
    return format(number, f"0{width}b") if column.length else format(number, "b")


def _text(value: Any, column: Column) -> str:
    if isinstance(value, bytes | bytearray):
        # A character set the library does not decode (ucs2, swe7…): read as utf8mb4.
        value = bytes(value).decode("utf-8")
    if not isinstance(value, str):
        raise TypeError("is no text")
    if "\x00" in value:
        raise ValueError("holds a NUL character, which PostgreSQL text cannot")
    return value


def _enum(value: Any, column: Column) -> str:
    if isinstance(value, int) and not isinstance(value, bool):  # MariaDB's index: 0 is ''
        if not 0 <= value <= len(column.labels):
            raise ValueError(f"is no index of the column's {len(column.labels)} labels")
        return ([""] + list(column.labels))[value]
    return _text(value, column)


def _set(value: Any, column: Column) -> str:
    if isinstance(value, int) and not isinstance(value, bool):  # MariaDB's bit mask
        members = [m for i, m in enumerate(column.labels) if value >> i & 1]
    elif isinstance(value, set | frozenset):  # the library's: in the column's order
        unknown = value - set(column.labels)
        if unknown:
            raise ValueError(f"has members {sorted(unknown)} the column does not name")
        members = [m for m in column.labels if m in value]
    else:
        text = _text(value, column)
        members = text.split(",") if text else []
    quoted = ('"' + _text(m, column).replace("\\", "\\\\").replace('"', '\\"') + '"'
              for m in members)  # fmt: skip
    return "{" + ",".join(quoted) + "}"


def _bytes(value: Any, column: Column) -> str:
    return "\\x" + _raw(value, column).hex()


def _raw(value: Any, column: Column) -> bytes:
    """The stored bytes; those of a fixed width with the trailing zeros the library drops."""
    if value == "":
        value = b""  # the library's empty (or all-zero fixed-width) value
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("is no bytes")
    raw = bytes(value)
    if column.base in _WIDTH:
        width = _WIDTH[column.base] or column.length or len(raw)
        if len(raw) > width:
            raise ValueError(f"is longer than {width} bytes")
        raw = raw.ljust(width, b"\x00")
    return raw


def _uuid(value: Any, column: Column) -> str:
    if isinstance(value, str) and value:
        return str(uuid.UUID(value))
    return str(uuid.UUID(bytes=_raw(value, column)))


def _inet(value: Any, column: Column) -> str:
    if isinstance(value, str) and value:
        return str(ipaddress.ip_address(value))
    raw = _raw(value, column)
    return str(ipaddress.IPv4Address(raw) if len(raw) == 4 else ipaddress.IPv6Address(raw))


def _date(value: Any, column: Column) -> str | None:
    if isinstance(value, str):
        return _zero(value)  # None, or raises
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise TypeError("is no date")
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _timestamp(value: Any, column: Column) -> str | None:
    if isinstance(value, str):
        return _zero(value)  # None, or raises
    if not isinstance(value, dt.datetime) or value.tzinfo is not None:
        raise TypeError("is no naive datetime")
    return _datetime(value, column)


def _timestamptz(value: Any, column: Column) -> str | None:
    if isinstance(value, str):
        return _zero(value)  # None, or raises
    if not isinstance(value, dt.datetime):
        raise TypeError("is no datetime")
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    elif value == _EPOCH:
        return None  # the library's zero timestamp: no timestamp holds the epoch itself
    return _datetime(value, column) + "+00"  # naive: UTC (the session's, the library's)


def _datetime(value: dt.datetime, column: Column) -> str:
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:"
            f"{value.minute:02d}:{value.second:02d}{_fraction(value.microsecond, column)}")


def _zero(text: str) -> str | None:
    """PyMySQL's text of a date it could not parse: a zero date is NULL (None); any other (a
    year 0, an invalid date) is none PostgreSQL holds (raises)."""
    if not _ZERO_DATE.match(text):
        raise ValueError("is no date PostgreSQL holds")
    return None


def _interval(value: Any, column: Column) -> str:
    if not isinstance(value, dt.timedelta):
        raise TypeError("is no timedelta")
    micros = _micros(value)
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    hours, rest = divmod(micros, 3600 * _SECOND)
    minutes, rest = divmod(rest, 60 * _SECOND)
    seconds, fraction = divmod(rest, _SECOND)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{_fraction(fraction, column)}"


def _micros(value: dt.timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * _SECOND + value.microseconds


def _fraction(micros: int, column: Column) -> str:
    """A fraction of a second in the column's digits (MariaDB's ``(n)``)."""
    digits = 6 if column.precision is None else min(column.precision, 6)
    if micros % 10 ** (6 - digits):
        raise ValueError(f"has more fractional digits than the column's {digits}")
    return "." + f"{micros:06d}"[:digits] if digits else ""


def _year(value: Any, column: Column) -> str:
    year = int(_integer(value, column))
    year = 0 if year == _LIBRARY_ZERO_YEAR else year
    if year != 0 and not 1901 <= year <= 2155:
        raise ValueError("is no MariaDB year")
    return str(year)


_BY_KIND: dict[Kind, Callable[[Any, Column], str | None]] = {
    Kind.BOOL: _boolean,
    Kind.INT: _integer,
    Kind.UINT: _integer,
    Kind.DECIMAL: _decimal,
    Kind.FLOAT: _float,
    Kind.BIT: _bit,
    Kind.CHAR: _text,
    Kind.TEXT: _text,
    Kind.JSON: _text,  # MariaDB's JSON is text; jsonb parses it
    Kind.ENUM: _enum,
    Kind.SET: _set,
    Kind.BYTES: _bytes,
    Kind.UUID: _uuid,
    Kind.NETWORK: _inet,
    Kind.DATE: _date,
    Kind.TIMESTAMP: _timestamp,
    Kind.TIMESTAMPTZ: _timestamptz,
    Kind.TIME: _interval,
    Kind.YEAR: _year,
}
"""Each MariaDB kind's text (the catalogue's kinds, :mod:`.types`)."""
