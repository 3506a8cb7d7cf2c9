"""Arrow columns as PostgreSQL's binary COPY format, column at a time.

PostgreSQL takes rows fastest through ``COPY … FROM STDIN (FORMAT binary)``:
no text to parse, each value in its type's wire format. A batch arrives from
Spark as Arrow (columnar); :class:`BinaryCopyEncoder` turns it into COPY rows
with array operations only (numpy, pyarrow compute), never a Python loop per
row: each column becomes a binary array of its fields (a 4-byte big-endian
length, -1 for NULL, then the value), and one element-wise join lays the
fields of each row end to end.

The wire format must be the *table's* column type (an ``integer`` column
takes 4 bytes, whatever Spark read), so the encoder is built from the
table's columns (:func:`table_columns`). What it cannot write exactly it
refuses with :class:`CannotEncode` before any byte is sent: a type pair it
does not know, an integer out of the column's range, a decimal that needs
more than 18 digits or would be rounded. The caller then takes the path that
handles those (Spark's JDBC writer, the rejects). :func:`copy_in` streams
Arrow batches through the encoder into a COPY on a psycopg cursor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.dialects import postgresql

from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.bulk import constant
from spark_jobs.engines.postgresql import textcopy

__all__ = ["HEADER", "TRAILER", "BinaryCopyEncoder", "CannotEncode", "quoted", "table_columns"]

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
"""The binary COPY signature, flags (no OIDs) and header extension length."""

TRAILER = b"\xff\xff"
"""The end of a binary COPY stream: a field count of -1."""

_EPOCH_US = 946_684_800_000_000  # 2000-01-01 (PostgreSQL's epoch) in Unix microseconds
_EPOCH_DAYS = 10_957  # the same in days

# Type OIDs (pg_type.oid) of the column types written in binary.
INT2, INT4, INT8 = 21, 23, 20
FLOAT4, FLOAT8 = 700, 701
NUMERIC, BOOL, BYTEA = 1700, 16, 17
TEXT, VARCHAR, BPCHAR, JSON, JSONB = 25, 1043, 1042, 114, 3802
DATE, TIMESTAMP, TIMESTAMPTZ = 1082, 1114, 1184
UUID = 2950
_INT_WIDTH = {INT2: 2, INT4: 4, INT8: 8}
_FLOAT_WIDTH = {FLOAT4: 4, FLOAT8: 8}
_TEXTS = {TEXT, VARCHAR, BPCHAR, JSON}


@dataclass(frozen=True)
class PgColumn:
    """A table column as COPY must write it: name, type OID, and numeric's typmod."""

    name: str
    type_oid: int
    precision: int | None = None
    scale: int | None = None


_PREPARER = postgresql.dialect().identifier_preparer


def quoted(*names: str, sep: str = ", ") -> str:
    """PostgreSQL identifiers, each quoted, joined by ``sep`` (``.`` for schema.table)."""
    return sep.join(_PREPARER.quote_identifier(name) for name in names)


def table_columns(cursor: Any, table_sql: str, names: Sequence[str]) -> list[PgColumn]:
    """The columns ``names`` of ``table_sql`` (quoted), read from a ``LIMIT 0`` query.

    ``cursor`` is a psycopg (3) cursor; its description carries each
    column's type OID and, for numerics, precision and scale.
    """
    cursor.execute(f"SELECT {quoted(*names)} FROM {table_sql} LIMIT 0")
    return [
        PgColumn(column.name, int(column.type_code), column.precision, column.scale)
        for column in cursor.description
    ]


Encode = Callable[[pa.Array], pa.Array]


class BinaryCopyEncoder:
    """Encodes Arrow record batches of one schema into binary COPY rows for ``columns``.

    Built once per batch's schema; raises :class:`CannotEncode` naming the
    column when a column's Arrow type cannot go into its table type.
    """

    def __init__(self, schema: pa.Schema, columns: Sequence[PgColumn]) -> None:
        if len(schema) != len(columns):
            raise CannotEncode(f"{len(schema)} fields for {len(columns)} columns")
        self.columns = list(columns)
        self._encoders = [
            _encoder_for(field.type, column) for field, column in zip(schema, columns, strict=True)
        ]

    def encode(self, table: pa.Table | pa.RecordBatch) -> pa.Buffer:
        """The COPY rows of ``table`` (without :data:`HEADER` and :data:`TRAILER`)."""
        n = table.num_rows
        if n == 0:
            return pa.py_buffer(b"")
        count = np.full(n, len(self.columns), ">i2")
        fields = [_fixed_size(count.view(np.uint8).reshape(n, 2))]
        for i, encode in enumerate(self._encoders):
            column = table.column(i)
            array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            try:
                fields.append(encode(array))
            except CannotEncode as error:
                raise CannotEncode(f"column {self.columns[i].name!r}: {error}") from None
        rows = pc.binary_join_element_wise(*fields, constant(b""))
        offsets = np.frombuffer(rows.buffers()[1], np.int64)
        start, end = offsets[rows.offset], offsets[rows.offset + n]
        return rows.buffers()[2][start:end]


# ------------------------------------------------------------------ per type


def _encoder_for(arrow: pa.DataType, column: PgColumn) -> Encode:
    """The encoder of one column, or :class:`CannotEncode` for an unknown pairing."""
    oid = column.type_oid
    if pa.types.is_null(arrow):
        return _all_null  # a field no row of the batch has: NULL in any type
    if pa.types.is_integer(arrow) and oid in _INT_WIDTH:
        return lambda a: _integer(a, _INT_WIDTH[oid])
    if pa.types.is_integer(arrow) and oid == NUMERIC:
        return lambda a: _numeric(a, column)
    if pa.types.is_floating(arrow) and oid in _FLOAT_WIDTH:
        return lambda a: _float(a, _FLOAT_WIDTH[oid])
    if pa.types.is_decimal128(arrow) and oid == NUMERIC:
        return lambda a: _numeric(a, column)
    if pa.types.is_boolean(arrow) and oid == BOOL:
        return _boolean
    if (pa.types.is_string(arrow) or pa.types.is_large_string(arrow)) and oid in _TEXTS:
        return _bytes
    if (pa.types.is_string(arrow) or pa.types.is_large_string(arrow)) and oid == JSONB:
        return _jsonb
    if (pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow)) and oid == BYTEA:
        return _bytes
    if pa.types.is_timestamp(arrow) and oid in (TIMESTAMP, TIMESTAMPTZ):
        return _timestamp  # a naive one is UTC: sluice's sessions run in UTC
    if pa.types.is_date(arrow) and oid == DATE:
        return _date
    if _is_text(arrow):
        # Text carried from a source (PostgreSQL's own text of the value): parsed here
        # where it parses exactly, else the batch goes in text for the server to parse.
        if oid == NUMERIC and column.scale is not None and column.precision:
            scale = column.scale
            return lambda a: _numeric(_parsed(a, pa.decimal128(38, scale)), column)
        if oid in (TIMESTAMP, TIMESTAMPTZ):
            unit = pa.timestamp("us", "UTC" if oid == TIMESTAMPTZ else None)
            return lambda a: _timestamp(_parsed(a, unit))
        if oid == DATE:
            return lambda a: _date(_parsed(a, pa.date32()))
        if oid == UUID:
            return _uuid
    raise CannotEncode(f"column {column.name!r}: {arrow} into type OID {oid} is not written here")


def _is_text(arrow: pa.DataType) -> bool:
    return pa.types.is_string(arrow) or pa.types.is_large_string(arrow)


def _parsed(array: pa.Array, into: pa.DataType) -> pa.Array:
    """Text values as ``into``; :class:`CannotEncode` when one does not parse exactly
    (``NaN``, ``infinity``, a BC date, more decimals than the column keeps)."""
    try:
        return pc.cast(array, into)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise CannotEncode(str(error).splitlines()[0]) from None


def _uuid(array: pa.Array) -> pa.Array:
    """uuid's wire format: its 16 bytes, from its text (hyphens anywhere, any case)."""
    digits = pc.replace_substring(array.cast(pa.large_string()), "-", "")
    if len(digits) and not pc.all(pc.equal(pc.binary_length(pc.fill_null(digits, "0" * 32)),
                                           32)).as_py():  # fmt: skip
        raise CannotEncode("a uuid that is not 32 hex digits")
    prefix, none = pa.scalar("\\x", pa.large_string()), pa.scalar("", pa.large_string())
    raw = textcopy.from_hex(pc.binary_join_element_wise(prefix, digits, none))
    return _bytes(raw)


def _valid(array: pa.Array) -> np.ndarray | None:
    """The rows with a value (None: all of them)."""
    if array.null_count == 0:
        return None
    return np.asarray(array.is_valid(), dtype=bool)


def _from_buffers(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    n = len(offsets) - 1
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _fixed_size(values: np.ndarray) -> pa.Array:
    """A binary array of the rows of an (n, width) uint8 matrix (no length header)."""
    n, width = values.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    return _from_buffers(offsets, np.ascontiguousarray(values).reshape(-1))


def _fields(values: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """Fixed-width fields: (n, width) uint8 values behind a length header, -1 for NULL rows."""
    n, width = values.shape
    header = np.full(n, width, ">i4")
    if valid is not None:
        header[~valid] = -1
    rows = np.empty((n, 4 + width), np.uint8)
    rows[:, :4] = header.view(np.uint8).reshape(n, 4)
    rows[:, 4:] = values
    if valid is None:
        return _fixed_size(rows)
    keep = np.ones((n, 4 + width), bool)
    keep[~valid, 4:] = False  # a NULL is its header alone
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.where(valid, 4 + width, 4), out=offsets[1:])
    return _from_buffers(offsets, rows[keep])


def _big_endian(values: np.ndarray, dtype: str) -> np.ndarray:
    n = len(values)
    return values.astype(dtype).view(np.uint8).reshape(n, np.dtype(dtype).itemsize)


def _numbers(array: pa.Array, fill: Any = 0) -> np.ndarray:
    return np.asarray(array.fill_null(fill).to_numpy(zero_copy_only=False))


def _all_null(array: pa.Array) -> pa.Array:
    header = np.full(len(array), -1, ">i4").view(np.uint8).reshape(len(array), 4)
    return _fixed_size(header)


def _integer(array: pa.Array, width: int) -> pa.Array:
    values = _numbers(array).astype(np.int64)
    info = np.iinfo(f"i{width}")
    if len(values) and (values.min() < info.min or values.max() > info.max):
        raise CannotEncode(f"a value does not fit a {8 * width}-bit integer")
    return _fields(_big_endian(values, f">i{width}"), _valid(array))


def _float(array: pa.Array, width: int) -> pa.Array:
    return _fields(_big_endian(_numbers(array, 0.0), f">f{width}"), _valid(array))


def _boolean(array: pa.Array) -> pa.Array:
    values = _numbers(array, False).astype(np.uint8).reshape(len(array), 1)
    return _fields(values, _valid(array))


def _timestamp(array: pa.Array) -> pa.Array:
    micros = pc.cast(array.cast(pa.timestamp("us", array.type.tz)), pa.int64())
    return _fields(_big_endian(_numbers(micros) - _EPOCH_US, ">i8"), _valid(array))


def _date(array: pa.Array) -> pa.Array:
    days = pc.cast(array.cast(pa.date32()), pa.int32())
    return _fields(_big_endian(_numbers(days).astype(np.int64) - _EPOCH_DAYS, ">i4"), _valid(array))


def _bytes(array: pa.Array) -> pa.Array:
    """Text (UTF-8, the client encoding) or bytea: the bytes behind their length."""
    data = array.cast(pa.large_binary())
    valid = _valid(array)
    if valid is not None:
        data = data.fill_null(b"")
    lengths = np.asarray(pc.binary_length(data).to_numpy(zero_copy_only=False), ">i4")
    if valid is not None:
        lengths[~valid] = -1
    n = len(array)
    header = _fixed_size(lengths.view(np.uint8).reshape(n, 4))
    return pc.binary_join_element_wise(header, data, constant(b""))


def _jsonb(array: pa.Array) -> pa.Array:
    """jsonb's wire format is a version byte (1) and the JSON text."""
    version = pa.array(np.full(len(array), 1, np.uint8).view("S1"), pa.binary(1))
    text = pc.binary_join_element_wise(version.cast(pa.large_binary()),
                                       array.cast(pa.large_binary()), constant(b""))  # fmt: skip
    return _bytes(text)


def _numeric(array: pa.Array, column: PgColumn) -> pa.Array:
    """numeric's wire format: digit count, weight, sign, display scale, base-10000 digits.

    Every row gets the same number of digits (enough for the batch's largest
    value and the column's scale); PostgreSQL strips leading and trailing
    zero digits when it stores the value.
    """
    arrow = array.type
    source_scale = arrow.scale if pa.types.is_decimal(arrow) else 0
    scale = source_scale if column.scale is None or column.precision in (None, 0) else column.scale
    if source_scale > scale:
        raise CannotEncode(f"{source_scale} decimals would be rounded to {scale}")
    unscaled = _unscaled(array)
    negative = unscaled < 0
    magnitude = np.abs(unscaled)
    whole, fraction = np.divmod(magnitude, 10**source_scale)
    largest = int(whole.max()) if len(whole) else 0
    int_groups = 0 if largest == 0 else math.floor(math.log10(largest) / 4) + 1
    frac_groups = -(-scale // 4)
    groups = [(whole // 10 ** (4 * k)) % 10_000 for k in range(int_groups - 1, -1, -1)]
    for k in range(frac_groups):
        shift = 4 * (k + 1) - source_scale  # decimal places past the source's own
        if shift <= 0:
            groups.append((fraction // 10 ** (-shift)) % 10_000)
        elif shift < 4:
            groups.append((fraction % 10 ** (4 - shift)) * 10**shift)
        else:
            groups.append(np.zeros(len(array), np.int64))
    digits = int_groups + frac_groups
    words = np.empty((len(array), 4 + digits), ">i2")
    words[:, 0] = digits
    words[:, 1] = int_groups - 1
    words[:, 2] = np.where(negative, 0x4000, 0)
    words[:, 3] = scale
    for i, group in enumerate(groups):
        words[:, 4 + i] = group
    return _fields(words.view(np.uint8).reshape(len(array), -1), _valid(array))


def _unscaled(array: pa.Array) -> np.ndarray:
    """A decimal's (or an integer's) unscaled values as int64; NULLs as 0."""
    if not pa.types.is_decimal128(array.type):
        return _numbers(array).astype(np.int64)
    n = len(array)
    words = np.frombuffer(array.buffers()[1], "<i8")[2 * array.offset : 2 * (array.offset + n)]
    low, high = words[0::2], words[1::2]
    valid = _valid(array)
    # A value fits in 64 bits when the high word only repeats the low word's sign.
    fits = high == (low >> 63)
    if valid is not None:
        fits |= ~valid
        low = np.where(valid, low, 0)
    if not fits.all():
        raise CannotEncode("a value needs more than 18 digits")
    if len(low) and low.min() == np.iinfo(np.int64).min:
        raise CannotEncode("a value needs more than 18 digits")
    return low
