"""PostgreSQL's text COPY format to and from Arrow, column at a time.

The text format is how PostgreSQL prints and parses every value of every
type (``COPY … TO STDOUT`` / ``FROM STDIN``, what pg_dump uses): one line
per row, fields separated by tabs, NULL as ``\\N``, and a backslash before
a backslash, newline, carriage return or tab inside a value. No raw newline
is ever inside a value, so a chunk of whole lines parses on its own.

:func:`parse` turns such lines into an Arrow record batch by pyarrow's CSV
reader (C++, no Python per row): integers, floating point and booleans
into their Arrow types, text and every other type as the server's text,
unescaped, and bytea (printed ``\\x…``) into bytes. :func:`encode` does the
reverse for any Arrow batch whose types have a text form.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.bulk import constant

_PARSE = pcsv.ParseOptions(
    delimiter="\t", quote_char=False, escape_char=False, ignore_empty_lines=False
)
_UNESCAPES = (("\\\\", "\x00"), ("\\n", "\n"), ("\\r", "\r"), ("\\t", "\t"), ("\\b", "\b"),
              ("\\f", "\f"), ("\\v", "\v"), ("\x00", "\\"))  # fmt: skip
"""An escaped backslash is parked as NUL first (no text value holds NUL), then the rest."""
_ESCAPES = (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
"""Backslash first: the escapes that follow add backslashes of their own."""
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)
_NIBBLE = np.full(256, 255, np.uint8)
_NIBBLE[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)

PARSED = (pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.bool_())
"""Arrow types the CSV reader parses straight from PostgreSQL's text."""


def parse(lines: bytes | bytearray | memoryview, schema: pa.Schema) -> pa.RecordBatch:
    """The rows of ``lines`` (whole lines of text COPY output) as a batch of ``schema``.

    ``schema``'s types: :data:`PARSED`, ``string`` (the server's text of any
    type) or ``binary`` (bytea). Raises :class:`pyarrow.ArrowInvalid` when a
    value does not parse as its column's type.
    """
    types = {f.name: (f.type if f.type in PARSED else pa.string()) for f in schema}
    table = pcsv.read_csv(
        pa.py_buffer(lines),
        read_options=pcsv.ReadOptions(column_names=schema.names, use_threads=False,
                                      block_size=max(1 << 20, len(lines) + 1)),
        parse_options=_PARSE,
        convert_options=pcsv.ConvertOptions(
            column_types=types, null_values=["\\N"], strings_can_be_null=True,
            true_values=["t"], false_values=["f"], quoted_strings_can_be_null=False,
        ),
    )  # fmt: skip
    arrays = []
    for field in schema:
        column = table.column(field.name).combine_chunks()
        if field.type not in PARSED:
            column = unescape(column)
            if pa.types.is_binary(field.type):
                column = from_hex(column)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def unescape(array: pa.Array) -> pa.Array:
    """Text COPY's escapes undone (only where a value holds a backslash)."""
    if array.null_count == len(array) or not pc.any(pc.match_substring(array, "\\")).as_py():
        return array
    for escaped, raw in _UNESCAPES:
        array = pc.replace_substring(array, escaped, raw)
    return array


def line_keys(text: str, positions: Sequence[int]) -> list[tuple[str, ...]]:
    """The fields at ``positions`` of each line of ``text`` (whole lines of text COPY), as the
    server printed the values: a key's, never NULL."""
    lines = text.split("\n")[:-1]
    keys: list[tuple[str, ...]]
    if list(positions) == [0]:  # the usual key: the first field, read without a split
        keys = [(line.partition("\t")[0],) for line in lines]
    else:
        keys = [tuple(fields[p] for p in positions)
                for fields in (line.split("\t") for line in lines)]  # fmt: skip
    if "\\" in text:
        keys = [tuple(_unescaped(v) for v in key) for key in keys]
    return keys


def lines_of(rows: Sequence[Sequence[str | None]]) -> str:
    """Rows of values already in PostgreSQL's text (None: NULL) as lines of text COPY."""
    return "".join("\t".join("\\N" if v is None else _escaped(v) for v in row) + "\n"
                   for row in rows)  # fmt: skip


def _escaped(value: str) -> str:
    if "\\" in value or "\n" in value or "\r" in value or "\t" in value:
        for raw, escaped in _ESCAPES:
            value = value.replace(raw, escaped)
    return value


def _unescaped(value: str) -> str:
    if "\\" not in value:
        return value
    for escaped, raw in _UNESCAPES:
        value = value.replace(escaped, raw)
    return value


def from_hex(array: pa.Array) -> pa.Array:
    """bytea's hex text (``\\x0a1b``) as bytes."""
    text = pc.utf8_slice_codeunits(array.cast(pa.large_string()), 2)
    offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(text.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
    pairs = _NIBBLE[data].reshape(-1, 2)
    if (pairs == 255).any():
        raise CannotEncode("a bytea value is not in hex")
    raw = (pairs[:, 0] << 4) | pairs[:, 1]
    halves = (offsets - offsets[0]) // 2
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(text), [text.buffers()[0], pa.py_buffer(halves),
                                       pa.py_buffer(raw.astype(np.uint8))],
        null_count=text.null_count, offset=0,
    ).cast(pa.binary())  # fmt: skip


def to_hex(array: pa.Array) -> pa.Array:
    """Bytes as bytea's hex input (``\\x0a1b``), text."""
    data = array.cast(pa.large_binary())
    offsets = np.frombuffer(data.buffers()[1], np.int64)[data.offset : data.offset + len(data) + 1]
    raw = np.frombuffer(data.buffers()[2], np.uint8)[offsets[0] : offsets[-1]] if len(data) else (
        np.empty(0, np.uint8))  # fmt: skip
    digits = np.empty((len(raw), 2), np.uint8)
    digits[:, 0] = _HEX_DIGITS[raw >> 4]
    digits[:, 1] = _HEX_DIGITS[raw & 15]
    body = pa.LargeStringArray.from_buffers(
        len(data), pa.py_buffer((offsets - offsets[0]) * 2), pa.py_buffer(digits.reshape(-1)),
        data.buffers()[0], data.null_count,
    )  # fmt: skip
    return pc.binary_join_element_wise(pa.scalar("\\x", pa.large_string()), body, constant(""))


def encode(batch: pa.RecordBatch | pa.Table, names: Sequence[str] | None = None) -> pa.Buffer:
    """The rows of ``batch`` as text COPY lines; raises :class:`CannotEncode` naming a
    column whose Arrow type has no text form here."""
    n = batch.num_rows
    if n == 0:
        return pa.py_buffer(b"")
    fields = []
    for i in range(batch.num_columns):
        column = batch.column(i)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        try:
            text = text_of(array)
        except CannotEncode as error:
            raise CannotEncode(f"column {(names or batch.schema.names)[i]!r}: {error}") from None
        fields.append(pc.fill_null(text, constant("\\N")) if text.null_count else text)
    fields[-1] = pc.binary_join_element_wise(fields[-1], constant("\n"), constant(""))
    lines = pc.binary_join_element_wise(*fields, constant("\t"))
    offsets = np.frombuffer(lines.buffers()[1], np.int64)
    start, end = offsets[lines.offset], offsets[lines.offset + n]
    return lines.buffers()[2][start:end]


def text_of(array: pa.Array) -> pa.Array:
    """An Arrow column as PostgreSQL's text input of its values (large_string; nulls kept)."""
    kind = array.type
    if pa.types.is_null(kind):
        return pa.nulls(len(array), pa.large_string())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = array.cast(pa.large_string())
        if pc.any(pc.match_substring_regex(text, r"[\\\n\r\t]")).as_py():
            for raw, escaped in _ESCAPES:
                text = pc.replace_substring(text, raw, escaped)
        return text
    if pa.types.is_boolean(kind):
        return pc.if_else(array, "t", "f").cast(pa.large_string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.binary_join_element_wise(pa.scalar("\\", pa.large_string()),
                                           to_hex(array), constant(""))  # fmt: skip
    if pa.types.is_decimal(kind):
        return _plain_decimal(array)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        utc = array.cast(pa.timestamp(kind.unit))
        return pc.binary_join_element_wise(utc.cast(pa.large_string()),
                                           pa.scalar("+00", pa.large_string()), constant(""))
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_date(kind)
            or pa.types.is_timestamp(kind) or pa.types.is_time(kind)):  # fmt: skip
        return array.cast(pa.large_string())
    raise CannotEncode(f"{kind} has no text form here")


def _plain_decimal(array: pa.Array) -> pa.Array:
    """Plain digits: Arrow writes 0.0000001 as "1E-7"."""
    text = array.cast(pa.large_string())
    exponent = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(exponent).as_py():
        return text
    plain = [format(value, "f") for value in pc.filter(array, exponent).to_pylist()]
    return pc.replace_with_mask(text, exponent, pa.array(plain, pa.large_string()))
