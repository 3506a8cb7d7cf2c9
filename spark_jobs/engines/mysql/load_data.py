"""Arrow columns as ``LOAD DATA LOCAL INFILE`` text for MySQL and MariaDB, streamed from memory.

MySQL and MariaDB take rows fastest through ``LOAD DATA``: one statement, one
stream of tab-separated lines, parsed by the server without a round trip per
row. :func:`encode` turns an Arrow batch into those lines with array
operations only (pyarrow compute, never a Python loop per row): each column
becomes text, escaped where it is text, ``\\N`` where NULL, and one
element-wise join lays each row's fields end to end.

The lines never touch a file. PyMySQL answers the server's request for the
"local file" by reading it from disk; :func:`install` replaces that answer
with one that serves only a stream registered by :func:`load_data` under a
name of its own, and refuses every other file a server might ask for (which
PyMySQL, with ``local_infile`` on, would otherwise send).

``LOAD DATA LOCAL`` does not fail on a row the table refuses: the server
cannot stop the client mid-stream, so it skips duplicate keys and cuts
values to fit, each with a warning. :func:`load_data` counts the rows the
server took and its warnings, and raises :class:`LoadRefusedRows` (a
:class:`sqlalchemy.exc.DataError`, a row error to the commit) unless every
row went in as sent; the caller's transaction is then rolled back.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from spark_jobs.engines.bulk import BulkLoad, constant
from spark_jobs.engines.postgresql.binarycopy import CannotEncode

_STREAM_PREFIX = "sluice-stream/"
"""How the "file" names of sluice's own streams begin."""

_PACKET = 1 << 16
"""Bytes per protocol packet of the stream: under any ``max_allowed_packet`` in use."""

_LOCAL_REFUSED = {1148, 2068, 3948, 4166}
"""Server (and client) errors that say LOAD DATA LOCAL is switched off on either side."""

_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\0", "\\0"))
"""Backslash first: the escapes that follow add backslashes of their own."""

_streams: dict[str, Iterable[pa.Buffer | bytes]] = {}
_streams_lock = threading.Lock()
_installed = False


class LoadUnavailable(CannotEncode):
    """The server (or this PyMySQL) does not take ``LOAD DATA LOCAL``: use another path."""


class LoadRefusedRows(sa.exc.DataError):
    """The server skipped or changed rows of the stream (duplicate keys, values cut)."""


_PREPARER = mysql.dialect().identifier_preparer


def quoted(*names: str, sep: str = ", ") -> str:
    """MySQL identifiers, each quoted, joined by ``sep`` (``.`` for schema.table)."""
    return sep.join(_PREPARER.quote_identifier(name) for name in names)


def load_capable(engine: sa.Engine) -> bool:
    """Whether ``engine`` talks to MySQL or MariaDB through PyMySQL, whose stream this serves."""
    return engine.dialect.name in ("mysql", "mariadb") and engine.dialect.driver == "pymysql"


def install() -> bool:
    """Serve sluice's streams to ``LOAD DATA LOCAL`` and nothing else; False if PyMySQL
    has no place for it (a version that reads local files some other way).

    Idempotent. Called before any PyMySQL connection of sluice has ``local_infile`` on.
    """
    global _installed
    with _streams_lock:
        if _installed:
            return True
        from pymysql import connections

        if not callable(getattr(connections, "_send_local_file", None)):
            return False
        connections._send_local_file = _send_stream
        _installed = True
        return True


def _send_stream(filename: bytes | str, conn: Any) -> None:
    """PyMySQL's answer to the server's request for a local file: a registered stream only."""
    from pymysql import err

    name = filename.decode() if isinstance(filename, bytes) else filename
    with _streams_lock:
        chunks = _streams.pop(name, None)
    if chunks is None:
        raise err.OperationalError(
            2068, f"sluice sends LOAD DATA LOCAL only from its own streams; refused {name!r}"
        )
    for chunk in chunks:
        view = memoryview(chunk)
        for start in range(0, len(view), _PACKET):
            conn.write_packet(view[start : start + _PACKET])


def load_data(
    cursor: Any, table_sql: str, names: Sequence[str], batches: Iterable[pa.RecordBatch]
) -> int:
    """``LOAD DATA LOCAL`` the rows of ``batches`` into ``table_sql`` (quoted); the rows loaded.

    ``cursor`` is a PyMySQL cursor of a connection with ``local_infile`` on,
    inside the caller's transaction: the server keeps the rows it took
    before a stream that fails part-way, until the rollback (a table that
    cannot roll back, MyISAM, keeps them until the batch's retry upserts
    over them, as it would keep a failed upsert's). Raises
    :class:`CannotEncode` for a column it cannot write; :class:`LoadUnavailable`
    when the server refuses ``LOCAL``; :class:`LoadRefusedRows` when it did
    not take every row as sent; :class:`sqlalchemy.exc.DBAPIError` for the
    rest, as SQLAlchemy raises it for a statement.
    """
    import pymysql

    if not install():
        raise LoadUnavailable("this PyMySQL reads LOAD DATA LOCAL files its own way")
    sent = 0

    def chunks() -> Iterable[pa.Buffer]:
        nonlocal sent
        for batch in batches:
            sent += batch.num_rows
            yield encode(batch)

    name = f"{_STREAM_PREFIX}{uuid.uuid4().hex}"
    bits = _bit_columns(cursor, table_sql)
    fields: list[str] = []
    sets: list[str] = []
    for column in names:
        if column in bits:
            # A bit string's digits, which LOAD DATA would take as the bytes of their text.
            fields.append(f"@v{len(sets)}")
            sets.append(f"{quoted(column)} = CAST(CONV(@v{len(sets)}, 2, 10) AS UNSIGNED)")
        else:
            fields.append(quoted(column))
    statement = (
        f"LOAD DATA LOCAL INFILE '{name}' INTO TABLE {table_sql} CHARACTER SET utf8mb4 "
        # Tab, backslash, newline; in hex, which reads the same under NO_BACKSLASH_ESCAPES.
        "FIELDS TERMINATED BY X'09' ESCAPED BY X'5C' LINES TERMINATED BY X'0A' "
        f"({', '.join(fields)})" + (f" SET {', '.join(sets)}" if sets else "")
    )
    with _streams_lock:
        _streams[name] = chunks()
    try:
        cursor.execute(statement)
    except pymysql.Error as error:
        if error.args and error.args[0] in _LOCAL_REFUSED:
            refused = f"the server refuses LOAD DATA LOCAL: {error.args[-1]}"
            raise LoadUnavailable(refused) from error
        raise sa.exc.DBAPIError.instance(statement, None, error, pymysql.Error) from error
    finally:
        with _streams_lock:
            _streams.pop(name, None)
    loaded, warnings = cursor.rowcount, cursor.warning_count
    if loaded != sent or warnings:
        cursor.execute("SHOW WARNINGS LIMIT 3")
        shown = "; ".join(str(row[-1]) for row in cursor.fetchall())
        refused = pymysql.err.DataError(
            1262, f"{sent - loaded} of {sent} rows skipped, {warnings} warnings: {shown}"
        )
        raise LoadRefusedRows(statement, None, refused)
    return loaded


def _bit_columns(cursor: Any, table_sql: str) -> set[str]:
    """The BIT columns of ``table_sql`` (quoted ``schema.table`` or ``table``)."""
    parts = [p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", table_sql)]
    schema, table = (None, parts[-1]) if len(parts) == 1 else (parts[0], parts[1])
    cursor.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        "COALESCE(%s, DATABASE()) AND TABLE_NAME = %s AND DATA_TYPE = 'bit'", (schema, table)
    )
    return {row[0] for row in cursor.fetchall()}


# ------------------------------------------------------------------ encoding

Field = Callable[[pa.Array], pa.Array]


def encode(batch: pa.RecordBatch | pa.Table) -> pa.Buffer:
    """The ``LOAD DATA`` lines of ``batch``: fields tab-separated, ``\\``-escaped, NULL as ``\\N``.

    Raises :class:`CannotEncode` naming the column whose type has no text form here.
    A stream of several batches may raise it after earlier batches went out:
    the caller's transaction must be rolled back (see :func:`load_data`).
    """
    n = batch.num_rows
    if n == 0:
        return pa.py_buffer(b"")
    fields = []
    for i, field in enumerate(batch.schema):
        column = batch.column(i)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        try:
            text = _field_for(field.type)(array)
        except CannotEncode as error:
            raise CannotEncode(f"column {field.name!r}: {error}") from None
        fields.append(pc.fill_null(text.cast(pa.large_binary()), constant(b"\\N")))
    fields[-1] = pc.binary_join_element_wise(fields[-1], constant(b"\n"), constant(b""))
    lines = pc.binary_join_element_wise(*fields, constant(b"\t"))
    offsets = np.frombuffer(lines.buffers()[1], np.int64)
    start, end = offsets[lines.offset], offsets[lines.offset + n]
    return lines.buffers()[2][start:end]


def _field_for(arrow: pa.DataType) -> Field:
    """How a column of ``arrow`` type becomes text the server parses back to the same value."""
    if pa.types.is_null(arrow):
        return lambda a: pa.nulls(len(a), pa.large_string())
    if pa.types.is_integer(arrow) or pa.types.is_date(arrow):
        return _as_text
    if pa.types.is_decimal(arrow):
        return _decimal
    if pa.types.is_floating(arrow):
        return _floating
    if pa.types.is_boolean(arrow):
        return lambda a: pc.if_else(a, "1", "0")
    if pa.types.is_timestamp(arrow):
        # An aware timestamp holds UTC, which sluice's sessions write into DATETIME.
        return lambda a: _as_text(a.cast(pa.timestamp(arrow.unit)))
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return _escaped
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return _escaped
    raise CannotEncode(f"{arrow} has no LOAD DATA form here")


def _as_text(array: pa.Array) -> pa.Array:
    return array.cast(pa.large_string())


def _decimal(array: pa.Array) -> pa.Array:
    """Plain digits: Arrow writes 0.0000001 as "1E-7", which a text column would keep so."""
    text = _as_text(array)
    exponent = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(exponent).as_py():
        return text
    plain = [format(value, "f") for value in pc.filter(array, exponent).to_pylist()]
    return pc.replace_with_mask(text, exponent, pa.array(plain, pa.large_string()))


def _floating(array: pa.Array) -> pa.Array:
    """Shortest exact text; NaN and infinities as ``nan``, ``inf``: MySQL stores neither,
    and refuses them (a staging table keeps floating point as text, so that the upsert
    refuses such a row on its own, naming the column). A single-precision value goes
    as its exact double: MySQL parses a double and rounds it to a float, and the
    shortest text of the largest float (3.4028235e+38) is past the largest it takes."""
    if pa.types.is_float32(array.type):
        array = array.cast(pa.float64())
    return _as_text(array)


def _escaped(array: pa.Array) -> pa.Array:
    for raw, escaped in _ESCAPES:
        array = pc.replace_substring(array, raw, escaped)
    return array


LOAD_DATA = BulkLoad("load data", quoted, load_data)
"""MySQL's and MariaDB's bulk path: ``LOAD DATA LOCAL INFILE`` of sluice's stream, through
PyMySQL (where the server takes it: :func:`load_capable`)."""
