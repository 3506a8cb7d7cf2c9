"""MySQL's and MariaDB's rows read by ConnectorX inside Spark tasks, as Arrow.

Each Spark task runs one query of the batch (its key range) on a connection
of its own, through ConnectorX (Rust, the server's binary protocol) as a
stream of Arrow record batches: no row is ever a Python object, and a task
holds one record batch at a time, not the batch's rows. Measured here, 10 M
rows of the peers table: 6.2 s of the task's CPU and 168 MB, against ~12 s
for the ``mariadb`` client's text piped into Arrow's CSV reader; through
Spark's JDBC reader the whole copy had moved 273,000 rows/s.

Each column is read by its rule's SQL (:mod:`.types`), so what arrives is
what the JDBC reader would carry, cast to its carrier: a decimal as the
server's text, cast to Arrow's decimal of its precision and scale (ConnectorX
gives every decimal 10 digits after the point: a ``decimal(38,20)`` would lose
ten), an unsigned ``bigint`` into ``decimal(20,0)``. A value that does not fit
its carrier raises, it is never rounded.

The transforms a batch needs on its way into another engine (MySQL's zero
dates, sets into PostgreSQL: :mod:`spark_jobs.engines.transforms`) are applied here
only for a load's own task (:func:`spark_jobs.read.extract.native_ranges`); a
Spark frame gets them from Spark, as any other.

The server's errors come as SQLAlchemy's wrapping of PyMySQL's exception of
the same code, as a statement's would, whether they come before the first
rows or after some (a query killed, a lost server: ConnectorX raises them
as a Rust panic): whoever catches them tells a lost server from a bad query.

A machine that runs the task without ConnectorX (a cluster's executor: the
archive shipped to executors carries PyMySQL, not ConnectorX's 180 MB) reads
the same SQL through PyMySQL into the same carriers, slower.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow as pa
import sqlalchemy as sa

from config.connections import keep_alive
from spark_jobs.engines.arrow_transforms import arrow_for_target
from spark_jobs.engines.base import Column, Kind

ROWS_PER_BATCH = 50_000
"""Rows of a record batch read at once (~10 MB of the peers table's rows)."""

CONNECT_TIMEOUT = 10.0
"""Seconds a server may take to accept a connection (the probe before each read)."""

_ERROR = re.compile(r"ERROR (\d+) \(([0-9A-Z]{5})\): (.*?)[\s})]*$", re.S)


def connectorx_url(url: str | sa.URL) -> str:
    """ConnectorX's URL for a SQLAlchemy MySQL URL: ``mysql://user:password@host:port/db``
    (the driver and the query's options left out), with sluice's connect timeout and TCP
    keepalives (:mod:`config.connections`) in the Rust driver's terms."""
    from config.connections import CONNECT_TIMEOUT, KEEPALIVES

    parsed = sa.make_url(url)
    user = quote(parsed.username or "", safe="")
    password = "" if parsed.password is None else ":" + quote(str(parsed.password), safe="")
    at = f"{user}{password}@" if user or password else ""
    where = f"{parsed.host or 'localhost'}:{parsed.port or 3306}/{parsed.database or ''}"
    options = (f"tcp_connect_timeout_ms={CONNECT_TIMEOUT * 1000}"
               f"&tcp_keepalive_time_ms={KEEPALIVES['keepalives_idle'] * 1000}"
               f"&tcp_keepalive_probe_interval_secs={KEEPALIVES['keepalives_interval']}"
               f"&tcp_keepalive_probe_count={KEEPALIVES['keepalives_count']}")  # fmt: skip
    return f"mysql://{at}{where}?{options}"


def read_expression(read: str, carrier: pa.DataType, column: Column) -> str:
    """The SQL a column's ``read`` becomes here: a decimal as its text (see the module), a
    JSON value as the server's text (ConnectorX parses MySQL 8's ``json`` and prints it
    again: ``{"a": 1}`` would come as ``{"a":1}``)."""
    if pa.types.is_decimal(carrier) or column.kind == Kind.JSON:
        return f"CAST({read} AS CHAR)"
    return read


@dataclass(frozen=True)
class Finish:
    """What a load's own task does to the rows on their way into engine ``target`` (see
    :func:`spark_jobs.engines.arrow_transforms.arrow_for_target`): each column's source column, in
    order."""

    target: str
    zero_dates: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Queries:
    """What one native read runs: the statements of each Spark task, run one after the
    other (a batch's range in pieces), and the rows' Arrow schema.

    ``finish``: the transforms the rows take in a load's own task (None in a
    Spark frame). Picklable: it travels to the tasks inside the functions
    Spark ships. The same shape as PostgreSQL's
    (:class:`spark_jobs.engines.postgresql.read.Queries`), never copied as stored.
    """

    url: str
    queries: tuple[tuple[str, ...], ...]
    schema: pa.Schema
    finish: Finish | None = None

    def rows(self, tasks: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """In a Spark task: the rows of the queries whose numbers ``tasks`` carries."""
        for batch in tasks:
            for index in batch.column(0).to_pylist():
                yield from self.read(index)

    def read(self, index: int) -> Iterator[pa.RecordBatch]:
        """The rows of the ``index``-th task's statements, in order."""
        for statement in self.queries[index]:
            for rows in read_rows(self.url, statement, self.schema):
                if self.finish is not None:
                    rows = arrow_for_target(rows, self.finish.columns, self.finish.target,
                                            self.finish.zero_dates)  # fmt: skip
                yield rows


def queries(
    url: str, table_sql: str, columns: Sequence[Column], reads: Sequence[str],
    names: Sequence[str], schema: pa.Schema, where: Sequence[str | tuple[str, ...]],
    finish: tuple[str, str] | None,
) -> Queries:  # fmt: skip
    """The :class:`Queries` of a read of ``columns`` of ``table_sql`` at ``url``: each read
    by its SQL of ``reads`` (:func:`read_expression`) as its quoted name of ``names``, into
    ``schema``, a task per condition of ``where`` (a tuple: read one after the other);
    ``finish``: the ``(target, zero_dates)`` of a load's own task (:class:`Finish`)."""
    selected = [f"{read_expression(read, field.type, column)} AS {name}"
                for read, name, column, field in zip(reads, names, columns, schema,
                                                     strict=True)]  # fmt: skip
    done = None if finish is None else Finish(finish[0], finish[1], tuple(columns))
    return Queries(
        connectorx_url(url),
        tuple(tuple(f"SELECT {', '.join(selected)} FROM {table_sql} WHERE {w}"
                    for w in ((each,) if isinstance(each, str) else each))
              for each in where),
        schema, done,
    )  # fmt: skip


def read_rows(url: str, query: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of ``query`` on ``url`` (ConnectorX's) as record batches of ``schema``:
    by ConnectorX, or by PyMySQL where ConnectorX is not installed (a cluster's
    executors get PyMySQL, not ConnectorX's 180 MB: slower, the same values).

    Raises SQLAlchemy's ``DBAPIError`` (its kinds) for the server's errors, before
    the rows or after some of them; ``pyarrow.ArrowInvalid`` for a value its carrier
    cannot hold.
    """
    try:
        import connectorx
    except ImportError:
        yield from _pymysql_rows(url, query, schema)
        return
    try:
        _reachable(url)
        stream = connectorx.read_sql(url, query, return_type="arrow_stream",
                                     batch_size=ROWS_PER_BATCH)  # fmt: skip
        for found in stream:
            if found.num_rows:
                yield _carried(found, schema)
    except RuntimeError as error:
        raise _error(query, str(error)) from error
    except BaseException as error:
        # An error after the first rows comes as a Rust panic of ConnectorX's reading
        # thread (pyo3's PanicException, a BaseException): the server's error all the same.
        if type(error).__name__ != "PanicException":
            raise
        raise _error(query, str(error)) from None


def _pymysql_rows(url: str, query: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    import pymysql
    import pymysql.cursors

    parsed = urlsplit(url)
    try:
        conn = pymysql.connect(
            host=parsed.hostname or "localhost", port=parsed.port or 3306,
            user=unquote(parsed.username or ""), password=unquote(parsed.password or ""),
            database=parsed.path.lstrip("/") or None, charset="utf8mb4",
            connect_timeout=int(CONNECT_TIMEOUT), cursorclass=pymysql.cursors.SSCursor,
        )  # fmt: skip
    except pymysql.err.Error as error:
        raise sa.exc.DBAPIError.instance(query, None, error, pymysql.err.Error) from error
    keep_alive(conn)  # a read whose server went silent fails within a minute
    try:
        with conn.cursor() as cursor:
            cursor.execute(query)
            while rows := cursor.fetchmany(ROWS_PER_BATCH):
                columns = list(zip(*rows, strict=True))
                yield pa.RecordBatch.from_arrays(
                    [_array(list(c), f.type) for c, f in zip(columns, schema, strict=True)],
                    schema=schema)  # fmt: skip
    except pymysql.err.Error as error:
        raise sa.exc.DBAPIError.instance(query, None, error, pymysql.err.Error) from error
    finally:
        conn.close()


def _array(values: list[Any], carrier: pa.DataType) -> pa.Array:
    """PyMySQL's values of one column as their carrier (a decimal from its text, an
    unsigned ``bigint`` from its int)."""
    if pa.types.is_decimal(carrier):
        return pa.array([None if v is None else str(v) for v in values], pa.string()).cast(
            carrier)
    return pa.array(values, carrier)


def _reachable(url: str) -> None:
    """Fail at once on a server that refuses connections: ConnectorX's pool retries a
    refused connection for 30 s before it says so."""
    parsed = urlsplit(url)
    try:
        socket.create_connection((parsed.hostname or "localhost", parsed.port or 3306),
                                 timeout=CONNECT_TIMEOUT).close()  # fmt: skip
    except OSError as error:
        raise RuntimeError(f"cannot connect to {parsed.hostname}:{parsed.port}: {error}") from None


def _carried(found: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    arrays = []
    for i, field in enumerate(schema):
        column = found.column(i)
        arrays.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _error(statement: str, said: str) -> sa.exc.DBAPIError:
    """ConnectorX's error text as PyMySQL's exception of its code, wrapped as SQLAlchemy
    wraps it: an error without the server's code (refused, lost) as ``OperationalError``."""
    import pymysql.err

    found = _ERROR.search(said)
    error: Any
    if found is None:
        error = pymysql.err.OperationalError(2013, said.strip() or "the read failed")
    else:
        code = int(found.group(1))
        kind = pymysql.err.error_map.get(
            code, pymysql.err.InternalError if code < 1000 else pymysql.err.OperationalError)
        error = kind(code, found.group(3))
    return sa.exc.DBAPIError.instance(statement, None, error, pymysql.err.Error)
