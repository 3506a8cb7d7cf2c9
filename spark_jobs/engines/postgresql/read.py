"""PostgreSQL's rows read by ``COPY … TO STDOUT`` inside Spark tasks, as Arrow.

Each Spark task runs one query of the batch (its key range, or its list of
keys) as ``COPY (SELECT …) TO STDOUT`` on a connection of its own (through
``psql`` where it is installed: :mod:`.copy_out`), opened for the read only,
and turns whole lines of the server's text output into Arrow record
batches (:func:`spark_jobs.engines.postgresql.textcopy.parse`): the server
prints every value in its own text form, which no driver converts, so what
reaches the target is what the source holds. No row passes through the
JVM; Spark only schedules the tasks, so a cluster's executors read as
local ones do.

Every connection sets the session's output to fixed forms (ISO dates, UTC,
shortest exact floats, hex bytea), whatever the server's defaults are, so
that text parses back the same in any target.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from spark_jobs.engines.base import Column
from spark_jobs.engines.postgresql import textcopy
from spark_jobs.engines.postgresql.copy_out import copy_out

SETTINGS = {
    "DateStyle": "ISO,MDY", "IntervalStyle": "postgres", "TimeZone": "UTC",
    "extra_float_digits": "3", "bytea_output": "hex", "client_encoding": "UTF8",
}  # fmt: skip
"""Settings of every connection that reads or writes text: the forms the text takes."""

SESSION = " ".join(f"-c {name}={value}" for name, value in SETTINGS.items())
""":data:`SETTINGS` as libpq's ``options``."""


def pin(conn: sa.Connection) -> None:
    """Give ``conn``'s session :data:`SETTINGS` (but the encoding, which its driver keeps):
    a connection made by SQLAlchemy, such as a change stream's, prints values as a
    keyset read does, whatever the database's or the role's defaults."""
    names = [n for n in SETTINGS if n != "client_encoding"]
    calls = ", ".join(f"set_config(:n{i}, :v{i}, false)" for i in range(len(names)))
    params = {f"n{i}": name for i, name in enumerate(names)}
    params.update({f"v{i}": SETTINGS[name] for i, name in enumerate(names)})
    conn.execute(sa.text(f"SELECT {calls}"), params)


CHUNK = 4 << 20
"""Bytes of lines parsed at once: ~20,000 rows of 200 bytes (measured: 1 MB chunks
parsed at half the speed, 16 MB ones no faster)."""

def conninfo(url: str | sa.URL) -> str:
    """libpq's connection string for a SQLAlchemy PostgreSQL URL (password included)."""
    from psycopg.conninfo import make_conninfo

    parsed = sa.make_url(url)
    params: dict[str, Any] = {
        "host": parsed.host or "localhost",
        "port": parsed.port or 5432,
        "dbname": parsed.database,
        "user": parsed.username,
        "password": parsed.password,
    }
    for name, value in parsed.query.items():
        params[name] = value if isinstance(value, str) else value[-1]
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def read_lines(info: str, query: str, rows: int | None = 0) -> Iterator[bytearray]:
    """The text COPY output of ``query``, in chunks of whole lines of about :data:`CHUNK` bytes.

    ``rows``: as :func:`~.copy_out.copy_out` takes it (default: few, through
    psycopg: verify's buckets and small batches are most reads of this kind).
    Errors come as :func:`~.copy_out.copy_out` raises them."""
    lines = bytearray()
    for chunk in copy_out(info, f"COPY ({query}) TO STDOUT", SESSION, rows):
        lines += chunk
        if len(lines) >= CHUNK:
            # A row's own line breaks are escaped (\\n): a raw one ends a row.
            end = lines.rfind(b"\n") + 1
            if end:
                yield lines[:end]
                del lines[:end]
    if lines:
        yield lines


def read_rows(info: str, query: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of ``query`` as record batches of ``schema`` (see :mod:`.textcopy`).

    The database's errors come as SQLAlchemy's (``DBAPIError`` and its kinds), as a
    statement's would: whoever catches them tells a lost server from a bad query.
    """
    for lines in read_lines(info, query):
        yield textcopy.parse(lines, schema)


def copy_binary(info: str, query: str, rows: int | None = None) -> Iterator[bytes]:
    """The binary COPY output of ``query`` as the server sends it: header, rows, trailer,
    in chunks that follow no row boundary; ``rows``: as :func:`~.copy_out.copy_out` takes it.

    Errors come as SQLAlchemy's, as :func:`read_rows` raises them.
    """
    return copy_out(info, f"COPY ({query}) TO STDOUT (FORMAT binary)", SESSION, rows)


@dataclass(frozen=True)
class Queries:
    """What one native read runs: a query per Spark task, and the rows' Arrow schema.

    ``verbatim``: the same rows as ``queries``, each column as it is stored
    (no conversion), for a target whose columns have the very same types
    (:func:`copy_binary`); ``columns``: each column's name and type as the
    source's catalogue spells it, None where one is a type the database
    defines (an enum, a domain: its binary form may carry its OID).
    Picklable: it travels to the tasks inside the functions Spark ships.
    """

    info: str
    queries: tuple[str, ...]
    schema: pa.Schema
    verbatim: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] | None = None

    def rows(self, tasks: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """In a Spark task: the rows of the queries whose numbers ``tasks`` carries."""
        for batch in tasks:
            for index in batch.column(0).to_pylist():
                yield from self.read(index)

    def read(self, index: int) -> Iterator[pa.RecordBatch]:
        """The rows of the ``index``-th task's query."""
        return read_rows(self.info, self.queries[index], self.schema)


def select(reads: Sequence[str], table_sql: str, where: str) -> str:
    """``SELECT reads FROM table WHERE where``."""
    return f"SELECT {', '.join(reads)} FROM {table_sql} WHERE {where}"


def queries(
    url: str, table_sql: str, columns: Sequence[Column], reads: Sequence[str],
    names: Sequence[str], schema: pa.Schema, where: Sequence[str | tuple[str, ...]],
    as_text: bool,
) -> Queries:  # fmt: skip
    """The :class:`Queries` of a read of ``columns`` of ``table_sql`` at ``url``: each read
    by its SQL of ``reads`` as its quoted name of ``names`` (``as_text``: as the server
    prints it, with no copy as stored), into ``schema``, a task per condition of ``where``."""
    conditions = [w for w in where if isinstance(w, str)]
    if len(conditions) != len(where):
        raise ValueError("a PostgreSQL read takes one condition per task")
    selected = [f"{read} AS {name}" for read, name in zip(reads, names, strict=True)]
    return Queries(
        conninfo(url),
        tuple(select(selected, table_sql, w) for w in conditions),
        schema,
        verbatim=() if as_text else tuple(
            select(list(names), table_sql, w) for w in conditions),
        columns=None if any(c.user_types for c in columns) else tuple(
            (c.name, c.type) for c in columns),
    )  # fmt: skip
