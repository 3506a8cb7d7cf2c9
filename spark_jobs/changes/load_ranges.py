"""A stream's full load into its target as key ranges read in the slot's snapshot, side by side.

A slot made by sluice exports its snapshot (:mod:`sources.pg_changes`); the full
load is then handed out as key ranges of that snapshot
(:class:`~spark_jobs.changes.change_batches.LoadRange`), each at a position ``[C, n]``
before every change. A batch of ranges carries no row: its importer reads each
range from the source in the snapshot (``SET TRANSACTION SNAPSHOT``) and pipes
PostgreSQL's COPY of it straight into the target's COPY, where the table holds no
row of the range (else through a stage, upserted): in binary form where every
column has the very same built-in type on both sides (never parsed), else as
text in the output settings the stream's values take.

Such batches need no batch before them: they load side by side, each in its own
transaction, once (its commit row, as every stream batch). The stream's row in
``_sluice_streams`` is taken only to record the batch, after its rows are in: its
``position`` moves over the batches that follow on without a gap, a batch that
landed ahead of a gap is kept in ``ahead`` until the gap closes. So the
position reaches the load's last range only once every range is in, and the
first batch of changes (which starts after it) applies only then.

A range retried after its snapshot was let go (the daemon that held it
stopped) is read as the table is now: the changes since the snapshot, applied
after the load, bring it to what the source holds. A source that exports no
snapshot (MariaDB, MySQL: :attr:`~spark_jobs.engines.traits.Traits.shares_snapshots`)
has each range read so, natively (the keyset copy's reader, as Arrow) and COPYed
in binary where its values allow.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from config.errors import TargetError
from config.models import SqlSourceConfig
from spark_jobs.changes.apply_changes import (
    STAGE,
    committed_before,
    ensure_stream_tables,
    out_of_order,
)
from spark_jobs.changes.change_batches import LoadRange, StreamEvent
from spark_jobs.changes.copies import Chunks, copy_in, stage, table_columns, upsert_staged
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed
from spark_jobs.engines import dialect_engine, engine_of
from spark_jobs.engines.postgresql.copy_out import PSQL_ROWS, copy_out, psql
from spark_jobs.engines.postgresql.copyin import copy_in as copy_arrow
from spark_jobs.engines.postgresql.read import SESSION, conninfo, pin
from spark_jobs.load.jdbc_tables import commits_table, streams_table
from spark_jobs.load.target import TargetTable, Written
from spark_jobs.load.target_fit import missing_column
from spark_jobs.read.extract import SqlReader
from spark_jobs.read.read_sql import native_read
from spark_jobs.read.read_sql import table_columns as read_table_columns

log = logging.getLogger(__name__)

METHOD = "full load ranges"
"""The method of a batch of ranges loaded now."""
WRITE_AT = 1 << 20
"""Bytes of COPY lines read one by one (without ``psql``) gathered before each write to the
target (a write per line costs more than the line)."""

_BINARY = " (FORMAT binary)"
Pair = tuple[list[Any] | None, list[Any]]


@dataclass(frozen=True)
class RangeSource:
    """Where a stream's ranges are read: the source database's ``url`` and ``table``
    (``schema.table``, or a table of ``public``); ``config``, the source's, for a source
    read natively (one that exports no snapshot)."""

    url: str
    table: str
    config: SqlSourceConfig | None = None


def apply_ranges(
    engine: sa.Engine, target: TargetTable, manifest: Manifest, source: RangeSource
) -> Written:
    """Load the ranges of the stream batch ``manifest`` into ``target``'s table: all or none.

    Other batches of ranges load beside it; a batch the table holds already is
    recorded as committed with nothing written. Raises what
    :func:`~spark_jobs.changes.apply_changes.apply_changes` raises.
    """
    if not dialect_engine(engine.dialect).applies_change_streams:
        raise TargetError(f"{target.label}: batches of change streams (source "
                          f"{manifest.source}) go into PostgreSQL only for now; "
                          f"{engine.dialect.name} targets are not supported yet")  # fmt: skip
    if manifest.hi is None:
        raise BatchImportFailed(f"batch {manifest.batch_id} of stream {manifest.source} has no "
                                "end position (hi)", transient=False, permanent=True)  # fmt: skip
    spans = [StreamEvent.from_json(p).span for p in manifest.payloads]
    ensure_stream_tables(engine)
    with engine.begin() as conn:
        return _transaction(conn, target, manifest, [s for s in spans if s is not None], source)


def _transaction(
    conn: sa.Connection, target: TargetTable, manifest: Manifest, spans: Sequence[LoadRange],
    source: RangeSource,
) -> Written:  # fmt: skip
    commits, streams = commits_table(), streams_table()
    before = committed_before(conn, target, manifest)
    if before is not None:
        return before
    now = dt.datetime.now(dt.UTC)
    lo, hi = None if manifest.lo is None else list(manifest.lo), list(manifest.hi or [])
    # Not locked while the rows go in: the batches of ranges load side by side.
    held, ahead = _state(conn, manifest.source, lock=False)
    rows, method = 0, "already in the table"
    if not _holds(held, ahead, lo, hi):
        if held is not None and (lo is None or held > lo):
            raise out_of_order(target, manifest, held, lo)
        prep = conn.dialect.identifier_preparer
        table_sql = ".".join(prep.quote(p) for p in (target.schema, target.table) if p)
        columns = table_columns(conn, target, table_sql)
        rows = sum(copy_range(conn, target, table_sql, columns, span, n, source)
                   for n, span in enumerate(spans))  # fmt: skip
        method = METHOD
        held, ahead = _state(conn, manifest.source, lock=True)
        if _holds(held, ahead, lo, hi):  # another batch of the same ranges: cut differently
            raise out_of_order(target, manifest, held, lo)
        position, ahead = follow_on(held, [*ahead, (lo, hi)])
        conn.execute(
            streams.update()
            .where(streams.c.source == manifest.source)
            .values(position=None if position is None else json.dumps(position),
                    ahead=json.dumps(ahead) if ahead else None, batch_id=manifest.batch_id,
                    updated_at=now)  # fmt: skip
        )
    conn.execute(
        commits.update()
        .where(commits.c.batch_id == manifest.batch_id)
        .values(token=manifest.token, rows=rows, committed_at=now)
    )
    return Written(rows, 0, method)


def follow_on(held: list[Any] | None, pairs: Sequence[Pair]) -> tuple[list[Any] | None,
                                                                      list[Pair]]:  # fmt: skip
    """The position after ``held`` over the batches ``pairs`` (each ``(lo, hi)``) that follow
    on from it without a gap, and the pairs left ahead of a gap."""
    left = list(pairs)
    position = held
    while True:
        following = next((p for p in left if p[0] == position), None)
        if following is None:
            return position, left
        left.remove(following)
        position = following[1]


def _holds(held: list[Any] | None, ahead: Sequence[Pair], lo: list[Any] | None,
           hi: list[Any]) -> bool:  # fmt: skip
    """Whether the table holds the batch ``(lo, hi]`` already."""
    return (held is not None and held >= hi) or any(p == (lo, hi) for p in ahead)


def _state(conn: sa.Connection, source: str, *, lock: bool) -> tuple[list[Any] | None,
                                                                    list[Pair]]:  # fmt: skip
    """The stream's position in the target and the batches ahead of it (``lock``: its row
    locked until the commit)."""
    streams = streams_table()
    query = sa.select(streams.c.position, streams.c.ahead).where(streams.c.source == source)
    position, ahead = conn.execute(query.with_for_update() if lock else query).one()
    pairs = [] if ahead is None else [(None if lo is None else list(lo), list(hi))
                                      for lo, hi in json.loads(ahead)]  # fmt: skip
    return (None if position is None else list(json.loads(position))), pairs


def copy_range(
    conn: sa.Connection, target: TargetTable, table_sql: str,
    columns: dict[str, tuple[bool, bool]], span: LoadRange, n: int, source: RangeSource,
) -> int:  # fmt: skip
    """Read ``span`` from ``source`` and write it into the table; the rows written.

    Where the table holds no row of the range (a full load's usual case), its lines
    are COPYed straight in; else, or when a row was there after all (a unique
    violation, rolled back to a savepoint), COPYed into a stage shaped like the
    table and upserted from there."""
    names = list(span.columns)
    for name in names:
        if name not in columns:
            raise missing_column(target, name)
    shared = engine_of(source.url).shares_snapshots
    binary = shared and _same_built_in_types(conn, table_sql, span)
    if not _holds_within(conn, table_sql, target.key, span):
        try:
            with conn.begin_nested():
                return _pipe(conn, table_sql, target.key, span, source, binary)
        except sa.exc.IntegrityError:
            pass  # a row of the range was there: upserted below
    others = [c for c, (not_null, _) in columns.items() if not_null and c not in names]
    staged = stage(conn, table_sql, others, names, f"{STAGE}_{n}", "")
    rows = _pipe(conn, conn.dialect.identifier_preparer.quote(staged.name), target.key, span,
                 source, binary)  # fmt: skip
    upsert_staged(conn, target, columns, staged)
    return rows


def _same_built_in_types(conn: sa.Connection, table_sql: str, span: LoadRange) -> bool:
    """Whether each of ``span``'s columns has in the table the very type it has in the source,
    a built-in one: its binary COPY then goes in as the source sends it (the binary form of a
    type the database defines may carry its OID, which differs between databases)."""
    found: dict[str, str] = dict(conn.execute(sa.text(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(:t) AND attnum > 0 AND NOT attisdropped "
        "AND atttypid < 16384"), {"t": table_sql}).all())  # fmt: skip
    return all(found.get(c) == t for c, t in zip(span.columns, span.types, strict=True))


def _holds_within(conn: sa.Connection, table_sql: str, key: Sequence[str],
                  span: LoadRange) -> bool:  # fmt: skip
    """Whether the table holds a row whose key lies in ``span`` (the ends as text, typed by
    the server as the key's columns)."""
    where, params = _between(conn, key, span, "", {})
    found = conn.execute(sa.text(f"SELECT EXISTS (SELECT 1 FROM {table_sql} {where})"), params)
    return bool(found.scalar())


def _between(conn: sa.Connection | sa.Engine, key: Sequence[str], span: LoadRange,
             prefix: str, types: dict[str, str], psycopg: bool = False,
             ) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """``WHERE`` of the keys in ``span`` (columns qualified by ``prefix``; their values cast
    to ``types`` where given; ``psycopg``: its placeholders, not SQLAlchemy's) and its
    parameters."""
    quote = conn.dialect.identifier_preparer.quote
    keys = ", ".join(f"{prefix}{quote(k)}" for k in key)

    def values(end: str) -> str:
        marks = [f"%({end}{i})s" if psycopg else f":{end}{i}" for i in range(len(key))]
        return ", ".join(f"CAST({m} AS {types[k]})" if k in types else m
                         for m, k in zip(marks, key, strict=True))  # fmt: skip

    terms, params = [], {}
    if span.after is not None:
        terms.append(f"({keys}) > ({values('lo')})")
        params.update({f"lo{i}": v for i, v in enumerate(span.after)})
    if span.upto is not None:
        terms.append(f"({keys}) <= ({values('hi')})")
        params.update({f"hi{i}": v for i, v in enumerate(span.upto)})
    return ("WHERE " + " AND ".join(terms)) if terms else "", params


def _pipe(conn: sa.Connection, table_sql: str, key: Sequence[str], span: LoadRange,
          source: RangeSource, binary: bool) -> int:  # fmt: skip
    """COPY ``span``'s rows (keyed by ``key``) from ``source`` into its columns of
    ``table_sql`` (``binary``: in binary form, else as text); their count."""
    if not engine_of(source.url).shares_snapshots:
        cursor = conn.connection.cursor()
        try:
            into = dialect_engine(conn.dialect).name
            return copy_arrow(cursor, table_sql, span.columns, live_range(source, span, into))
        finally:
            cursor.close()
    return copy_in(conn, table_sql, span.columns, Chunks(range_chunks(source, span, key, binary)),
                   binary)  # fmt: skip


def live_range(source: RangeSource, span: LoadRange, into: str) -> Iterator[pa.RecordBatch]:
    """The rows of ``span`` as the table is now, read natively as a keyset batch's are
    (:func:`~spark_jobs.read.extract.native_ranges`), in the terms of a target of engine
    ``into`` (MySQL's zero dates as NULL, as the binary log's changes have them)."""
    if source.config is None:
        raise TargetError(f"a full load's range of {source.table} is read natively: the "
                          "importer needs its source's config")  # fmt: skip
    reader = SqlReader(None, source.config, target=into)
    named = {c.name: c for c in read_table_columns(source.url, source.table)}
    columns = [named[name] for name in span.columns]
    _, queries = native_read(source.url, reader.table_sql, columns,
                             reader.range_conditions([(span.after, span.upto)]),
                             target=into, zero_dates="null")  # fmt: skip
    names = list(span.columns)
    for batch in queries.read(0):
        yield batch.select(names)  # without what the transforms add (zero dates' counts)


def range_chunks(source: RangeSource, span: LoadRange, key: Sequence[str],
                 binary: bool = False) -> Iterator[bytes]:  # fmt: skip
    """The rows of ``span`` (keyed by ``key``) as the source's COPY gives them (``binary``: in
    binary form, else its text lines), in
    chunks that follow no line's end, read in its snapshot (or, where that was let go, as the
    table is now): through ``psql``, which hands them over in large chunks (see
    :mod:`~spark_jobs.engines.postgresql.copy_out`), else (or for a small range) psycopg's
    lines, joined."""
    # psql's start costs more than psycopg's lines of a small range (see PSQL_ROWS).
    program = psql() if span.rows >= PSQL_ROWS else None
    if program is None:
        with range_lines(source, span, key, binary) as lines:
            gathered = bytearray()
            for line in lines:
                gathered += line
                if len(gathered) >= WRITE_AT:
                    yield bytes(gathered)
                    gathered.clear()
            if gathered:
                yield bytes(gathered)
        return
    engine = sql_engine(source.url)
    copy = _range_copy(engine, source, span, key, binary, literal=True)
    info = conninfo(source.url)
    # One session: the snapshot is taken by the first statement of its transaction.
    first = ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '"
             + span.snapshot.replace("'", "''") + "'; ")  # fmt: skip
    given = False
    try:
        for chunk in copy_out(info, first + copy + "; COMMIT", SESSION):
            given = True
            yield chunk
    except sa.exc.DBAPIError as error:
        if given or "invalid snapshot identifier" not in str(error):
            raise
        _gone(source, error)
        yield from copy_out(info, copy, SESSION)


def _gone(source: RangeSource, error: Exception) -> None:
    log.warning("a full load's range of %s is read as the table is now: its snapshot is gone "
                "(%s); the changes since bring it up to date", source.table,
                str(getattr(error, "orig", error)).strip().splitlines()[0])  # fmt: skip


def _range_copy(engine: sa.Engine, source: RangeSource, span: LoadRange, key: Sequence[str],
                binary: bool = False, literal: bool = False) -> str:  # fmt: skip
    """``COPY (SELECT …) TO STDOUT`` of ``span``'s rows in key order (``binary``: in binary
    form; ``literal``: its ends written into it, else psycopg's placeholders)."""
    quote = engine.dialect.identifier_preparer.quote
    table = source.table if "." in source.table else f"public.{source.table}"
    table_sql = ".".join(quote(part) for part in table.split(".", 1))
    types = dict(zip(span.columns, span.types, strict=True))
    where, params = _between(engine, key, span, "c.", types, psycopg=not literal)
    if literal and params:
        text = sa.text(where).bindparams(**{n: str(v) for n, v in params.items()})
        where = str(text.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    select = ", ".join(f"c.{quote(c)}" for c in span.columns)
    order = ", ".join(f"c.{quote(k)}" for k in key)
    return (f"COPY (SELECT {select} FROM {table_sql} AS c {where} ORDER BY {order}) TO STDOUT"
            + (_BINARY if binary else ""))


@contextmanager
def range_lines(
    source: RangeSource, span: LoadRange, key: Sequence[str], binary: bool = False
) -> Iterator[Iterator[Any]]:
    """The rows of ``span`` (keyed by ``key``) as the source's COPY gives them (``binary``:
    in binary form, else its text lines), one by one, read in its snapshot (or, where that
    was let go, as the table is now)."""
    engine = sql_engine(source.url)
    query = _range_copy(engine, source, span, key, binary)
    params = _between(engine, key, span, "", {}, psycopg=True)[1]
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        try:  # the first statement of its transaction
            conn.exec_driver_sql("SET TRANSACTION SNAPSHOT '"
                                 + span.snapshot.replace("'", "''") + "'")  # fmt: skip
        except sa.exc.DBAPIError as error:
            conn.rollback()
            _gone(source, error)
        pin(conn)
        cursor = conn.connection.cursor()
        try:
            with cursor.copy(query, params) as copy:
                yield iter(copy)
        finally:
            cursor.close()
