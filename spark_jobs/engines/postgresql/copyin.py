"""Rows into a PostgreSQL table by COPY, in binary where every value has a binary form
for its column (:mod:`.binarycopy`), in text otherwise (:mod:`.textcopy`).

A batch's run of chunks in one format is one COPY statement; a chunk in the
other format ends it and starts another, in the same transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from spark_jobs.engines.base import CannotEncode
from spark_jobs.engines.bulk import BulkLoad
from spark_jobs.engines.postgresql import textcopy
from spark_jobs.engines.postgresql.binarycopy import (
    HEADER,
    TRAILER,
    BinaryCopyEncoder,
    quoted,
    table_columns,
)

_CHUNK = 1 << 20
"""Bytes handed to the connection per write: large enough to amortise each call."""


def copy_in(
    cursor: Any, table_sql: str, names: Sequence[str], batches: Iterable[pa.RecordBatch]
) -> int:
    """COPY the rows of ``batches`` (Arrow, columns ``names``) into ``table_sql`` (quoted)
    on the psycopg ``cursor``, in the *table's* column types; the rows sent.

    In binary where every column of a batch has a binary form for its table
    type (nothing for the server to parse); else in text, which the server
    parses in the column's type, whatever it is: a batch holding values with
    no binary form here (``NaN``, ``infinity``, a decimal of more than 18
    digits, a type sluice writes no binary for) goes as text, by a COPY of its
    own in the same transaction. Raises :class:`CannotEncode` for an Arrow
    type with no text form, and :class:`sqlalchemy.exc.DBAPIError`, as
    SQLAlchemy raises it for a statement.
    """
    columns = table_columns(cursor, table_sql, names)
    stream = _CopyStream(cursor, table_sql, names)
    encoder: BinaryCopyEncoder | None = None
    binary = True
    total = 0
    try:
        for batch in batches:
            total += batch.num_rows
            chunk = None
            if binary:
                try:
                    encoder = encoder or BinaryCopyEncoder(batch.schema, columns)
                    chunk = encoder.encode(batch)
                except CannotEncode:
                    binary = encoder is not None  # the types themselves: text from now on
            if chunk is not None:
                stream.write("binary", chunk)
            else:
                stream.write("text", textcopy.encode(batch, names))
        stream.close()
    except BaseException:
        stream.abort()
        raise
    return total


class _CopyStream:
    """COPY statements into one table, one per run of chunks in the same format."""

    def __init__(self, cursor: Any, table_sql: str, names: Sequence[str]) -> None:
        self.cursor = cursor
        self.target = f"COPY {table_sql} ({quoted(*names)}) FROM STDIN"
        self.statement = self.target
        self.format: str | None = None
        self._context: Any = None
        self._copy: Any = None

    def write(self, fmt: str, chunk: pa.Buffer) -> None:
        """Send ``chunk``, rows in format ``fmt`` (``binary`` or ``text``)."""
        if fmt != self.format or self._context is None:
            self.close()
            self._open(fmt)
        view = memoryview(chunk)
        try:
            for start in range(0, len(view), _CHUNK):
                self._copy.write(view[start : start + _CHUNK])
        except Exception as error:
            raise _as_dbapi(self.statement, error) from error

    def _open(self, fmt: str) -> None:
        self.format = fmt
        self.statement = f"{self.target} (FORMAT {fmt})"
        try:
            self._context = self.cursor.copy(self.statement)
            self._copy = self._context.__enter__()
            if fmt == "binary":
                self._copy.write(HEADER)
        except Exception as error:
            self._context = None
            raise _as_dbapi(self.statement, error) from error

    def close(self) -> None:
        """End the COPY running now, if any."""
        if self._context is None:
            return
        context, self._context = self._context, None
        try:
            if self.format == "binary":
                self._copy.write(TRAILER)
            context.__exit__(None, None, None)
        except Exception as error:
            raise _as_dbapi(self.statement, error) from error

    def abort(self) -> None:
        """End the COPY running now with an error (the caller rolls the transaction back)."""
        if self._context is None:
            return
        context, self._context = self._context, None
        with contextlib.suppress(Exception):  # the error that aborted it is the one raised
            context.__exit__(RuntimeError, RuntimeError("COPY aborted"), None)


def _as_dbapi(statement: str, error: Exception) -> Exception:
    """A psycopg error as SQLAlchemy reports the same error from a statement: the commit
    tells a refused row (IntegrityError, DataError) from a lost server."""
    import psycopg  # an optional driver (sluice[postgres]); the cursor is its own

    if isinstance(error, psycopg.Error):
        return sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error)
    return error


COPY = BulkLoad("copy", quoted, copy_in)
"""PostgreSQL's bulk path: a binary (or text) COPY through psycopg 3, whose cursors COPY."""
