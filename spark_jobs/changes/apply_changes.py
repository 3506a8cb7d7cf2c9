"""A batch of a change stream into a PostgreSQL target: once, in the stream's order, in one
transaction.

The batch (:mod:`spark_jobs.changes.change_batches`) is reduced to its net effect and applied
under two row locks: its own commit row in ``_sluice_commits`` (two importers of one batch
take turns, and a stale fencing token is refused) and its stream's row in
``_sluice_streams`` (two importers of one stream take turns). The stream's row holds the
position of the last change the table holds: a batch applies only on top of the batch
before it (its ``lo``), and one the table already holds (``hi`` at or below the position)
is recorded as committed without touching the table.

Values arrive as PostgreSQL printed them (``col::text``) and go in through the column
types' own input functions, as pg_dump's COPY restores them: they are COPYed in text
format into a temporary table shaped like the target, then deleted, inserted and updated
from there. ``json_populate_recordset`` would do for most types but not for ``json`` and
``jsonb``: it stores a JSON string as a JSON string, not as the document it spells.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from config.errors import TargetError
from spark_jobs.changes.change_batches import (
    CopyRows,
    Key,
    LoadRange,
    NetBatch,
    StreamEvent,
    segments,
)
from spark_jobs.changes.copies import GROUP, copy_in, stage, table_columns, upsert_staged
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed
from spark_jobs.engines import dialect_engine
from spark_jobs.engines.postgresql.insert import insert as pg_insert
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED
from spark_jobs.load.commit_jdbc import take_commit_row
from spark_jobs.load.jdbc_tables import (
    STREAMS_TABLE,
    commits_table,
    create_if_missing,
    ensure_own_tables,
    streams_table,
)
from spark_jobs.load.target import TargetTable, Written, stale_token_error
from spark_jobs.load.target_fit import missing_column

STAGE = "_sluice_changes"
"""The temporary table a batch's rows are COPYed into (dropped at the commit)."""
DELETES = -1
COMMITTED_BEFORE = "committed before"
"""The method of a batch the target recorded as committed before: nothing was written."""

_streams_ready: set[str] = set()
_streams_lock = threading.Lock()


def apply_changes(engine: sa.Engine, target: TargetTable, manifest: Manifest) -> Written:
    """Apply the stream batch ``manifest`` to ``target``'s table: all of it or nothing.

    Blocks while another importer holds the batch or its stream. Returns the
    rows written (upserts, plus rows deletes removed); those recorded when the
    batch was committed before, with nothing changed; 0 when the table holds
    the batch's changes already. Raises
    :class:`~spark_jobs.load.target.StaleToken` for a batch committed with a newer
    token; :class:`~spark_jobs.common.outcomes.BatchImportFailed`, transient, while
    the batch before it is not applied, terminal when the table's position is
    inside the batch; :class:`~config.errors.TargetError` for a table that does
    not exist or an engine other than PostgreSQL.
    """
    if not dialect_engine(engine.dialect).applies_change_streams:
        raise TargetError(
            f"{target.label}: batches of change streams (source {manifest.source}) go into "
            f"PostgreSQL only for now; {engine.dialect.name} targets are not supported yet"
        )
    if manifest.hi is None:
        raise BatchImportFailed(
            f"batch {manifest.batch_id} of stream {manifest.source} has no end position (hi)",
            transient=False,
            permanent=True,
        )
    parts = list(segments([StreamEvent.from_json(p) for p in manifest.payloads], target.key,
                          UNCHANGED))  # fmt: skip
    ensure_stream_tables(engine)
    try:
        with engine.begin() as conn:
            return _transaction(conn, target, manifest, list(manifest.hi), parts)
    except sa.exc.DBAPIError:
        with _streams_lock:  # one of sluice's tables may have been dropped
            _streams_ready.discard(engine.url.render_as_string(hide_password=True))
        raise


def ensure_stream_tables(engine: sa.Engine) -> None:
    """``_sluice_commits`` and ``_sluice_streams``, made sure of once per process and database
    (until a transaction fails)."""
    ensure_own_tables(engine)
    url = engine.url.render_as_string(hide_password=True)
    with _streams_lock:
        if url in _streams_ready:
            return
    create_if_missing(engine, streams_table())
    if "ahead" not in {c["name"] for c in sa.inspect(engine).get_columns(STREAMS_TABLE)}:
        with engine.begin() as conn:  # made by a sluice before the load's ranges
            conn.exec_driver_sql(f"ALTER TABLE {STREAMS_TABLE} ADD COLUMN IF NOT EXISTS ahead text")
    with _streams_lock:
        _streams_ready.add(url)


def committed_before(
    conn: sa.Connection, target: TargetTable, manifest: Manifest
) -> Written | None:
    """Take the stream batch ``manifest``'s commit row (two importers of it take turns; a
    stale token is refused): what it wrote where the target recorded it as committed before,
    else None, its stream's row in ``_sluice_streams`` made sure of."""
    commits = commits_table()
    current = take_commit_row(conn, commits, manifest)
    if current is not None:
        if current > manifest.token:
            raise stale_token_error(target, manifest, current)
        rows = conn.execute(
            sa.select(commits.c.rows).where(commits.c.batch_id == manifest.batch_id)
        ).scalar_one()
        return Written(int(rows), 0, COMMITTED_BEFORE)
    conn.execute(
        postgresql.insert(streams_table())
        .values(source=manifest.source, position=None, updated_at=dt.datetime.now(dt.UTC))
        .on_conflict_do_nothing()
    )
    return None


def _transaction(
    conn: sa.Connection, target: TargetTable, manifest: Manifest, hi: list[Any],
    parts: Sequence[NetBatch | CopyRows | LoadRange],
) -> Written:  # fmt: skip
    commits, streams = commits_table(), streams_table()
    before = committed_before(conn, target, manifest)
    if before is not None:
        return before
    now = dt.datetime.now(dt.UTC)
    text = conn.execute(
        sa.select(streams.c.position).where(streams.c.source == manifest.source).with_for_update()
    ).scalar_one()
    held = None if text is None else list(json.loads(text))
    lo = None if manifest.lo is None else list(manifest.lo)
    if held is not None and held >= hi:
        rows, method = 0, "already in the table"
    elif held != lo:
        raise out_of_order(target, manifest, held, lo)
    else:
        rows, method = _apply_all(conn, target, parts), "stream changes"
        conn.execute(
            streams.update()
            .where(streams.c.source == manifest.source)
            .values(position=json.dumps(hi), batch_id=manifest.batch_id, updated_at=now)
        )
    conn.execute(
        commits.update()
        .where(commits.c.batch_id == manifest.batch_id)
        .values(token=manifest.token, rows=rows, committed_at=now)
    )
    return Written(rows, 0, method)


def out_of_order(
    target: TargetTable, manifest: Manifest, held: list[Any] | None, lo: list[Any] | None
) -> BatchImportFailed:
    where = (f"batch {manifest.batch_id} of stream {manifest.source}: {target.label} holds "
             f"the stream up to position {held}, the batch starts after {lo}")  # fmt: skip
    if held is not None and (lo is None or held > lo):
        # Inside the batch: the batches were cut differently from the ones applied. No wait
        # ends that; applying would repeat changes the table holds.
        return BatchImportFailed(f"{where}, so the table holds part of it (was the stream "
                                 "restarted without sluice reset?)", transient=False)  # fmt: skip
    waiting = BatchImportFailed(f"{where}: it waits for the batch before it", transient=True)
    waiting.waits = True  # not an attempt of its own: it may run again as soon as that one is in
    return waiting


def _apply_all(conn: sa.Connection, target: TargetTable,
               parts: Sequence[NetBatch | CopyRows | LoadRange]) -> int:  # fmt: skip
    """Apply ``parts`` (a batch's :func:`~spark_jobs.changes.change_batches.segments`) in order; the
    rows written."""
    if not parts:
        return 0
    prep = conn.dialect.identifier_preparer
    table_sql = ".".join(prep.quote(p) for p in (target.schema, target.table) if p)
    columns = table_columns(conn, target, table_sql)
    written = 0
    for n, part in enumerate(parts):
        if isinstance(part, LoadRange):  # see stream_spans.take_spans: a range goes alone
            raise TargetError(f"{target.label}: a full load's range in a batch with changes")
        if isinstance(part, CopyRows):
            written += _apply_rows(conn, target, table_sql, columns, part, n)
        else:
            written += _apply(conn, target, table_sql, columns, part, n)
    return written


def _apply_rows(
    conn: sa.Connection, target: TargetTable, table_sql: str,
    columns: dict[str, tuple[bool, bool]], block: CopyRows, n: int,
) -> int:  # fmt: skip
    """Write a whole chunk (rows as COPY prints them) like inserts; the rows written.

    Where the table holds no row between the chunk's first and last key (a full load's
    usual case), the chunk is COPYed straight in; else, or when a row was there after all
    (a unique violation, rolled back to a savepoint), COPYed into a stage shaped like the
    table and upserted from there."""
    names = list(block.columns)
    for name in names:
        if name not in columns:
            raise missing_column(target, name)
    if block.bounds is not None and not _holds_between(conn, table_sql, target.key, block.bounds):
        try:
            with conn.begin_nested():
                copy_in(conn, table_sql, names, block.text)
            return block.rows
        except sa.exc.IntegrityError:
            pass  # a row of the chunk was there: upserted below
    others = [c for c, (not_null, _) in columns.items() if not_null and c not in names]
    upsert_staged(conn, target, columns, stage(conn, table_sql, others, names, f"{STAGE}_{n}",
                                               block.text))  # fmt: skip
    return block.rows


def _holds_between(
    conn: sa.Connection, table_sql: str, key: Sequence[str], bounds: tuple[Key, Key]
) -> bool:
    """Whether the table holds a row whose key lies between ``bounds`` (the values as text,
    typed by the server as the key's columns)."""
    quote = conn.dialect.identifier_preparer.quote
    columns = ", ".join(quote(k) for k in key)
    low = ", ".join(f":lo{i}" for i in range(len(key)))
    high = ", ".join(f":hi{i}" for i in range(len(key)))
    params = {f"lo{i}": v for i, v in enumerate(bounds[0])}
    params.update({f"hi{i}": v for i, v in enumerate(bounds[1])})
    return bool(conn.execute(sa.text(
        f"SELECT EXISTS (SELECT 1 FROM {table_sql} WHERE ({columns}) >= ({low}) "
        f"AND ({columns}) <= ({high}))"), params).scalar())  # fmt: skip


def _apply(
    conn: sa.Connection, target: TargetTable, table_sql: str,
    columns: dict[str, tuple[bool, bool]], net: NetBatch, n: int,
) -> int:  # fmt: skip
    """Apply ``net`` to the table; the rows written (upserts, plus rows deletes removed)."""
    names = list(target.key) + [
        c for c in dict.fromkeys(c for row in net.upserts.values() for c in row)
        if c not in target.key
    ]  # fmt: skip
    for name in names:
        if name not in columns:
            raise missing_column(target, name)
    groups: dict[frozenset[str], int] = {}
    rows: list[list[Any]] = [[*key, *[None] * (len(names) - len(key)), DELETES]
                             for key in net.deletes]  # fmt: skip
    others = names[len(target.key) :]
    for key, row in net.upserts.items():
        left = frozenset(c for c in others if row.get(c, UNCHANGED) is UNCHANGED)
        group = groups.setdefault(left, len(groups))
        rows.append([*key, *[None if c in left else row[c] for c in others], group])
    table = sa.table(target.table, *[sa.column(c) for c in names], schema=target.schema)
    if net.truncate:
        # DELETE, not TRUNCATE: both roll back with the transaction, but TRUNCATE needs a
        # right of its own, locks readers out of the table until the commit, shows
        # older snapshots an empty table, and fails on a table other tables refer to.
        conn.execute(sa.delete(table))
    if not rows:
        return 0
    staged = stage(conn, table_sql, [c for c, (not_null, _) in columns.items() if not_null],
                   [*names, GROUP], f"{STAGE}_{n}", rows)  # fmt: skip
    removed = 0
    if net.deletes:
        match = [table.c[k] == staged.c[k] for k in target.key]
        removed = conn.execute(sa.delete(table).where(staged.c[GROUP] == DELETES, *match)).rowcount
    overriding = any(columns[c][1] for c in names)  # identity columns GENERATED ALWAYS
    for left, group in groups.items():
        written = [c for c in names if c not in left]
        statement = pg_insert(table, overriding).from_select(
            written, sa.select(*[staged.c[c] for c in written]).where(staged.c[GROUP] == group)
        )
        # An identity GENERATED ALWAYS may only be updated to DEFAULT: a new row takes the
        # source's value (OVERRIDING SYSTEM VALUE), a row there keeps its own, as a keyset
        # batch's upsert does (the source cannot update it to a value either).
        updated = [c for c in written if c not in target.key and not columns[c][1]]
        if updated:
            statement = statement.on_conflict_do_update(
                index_elements=list(target.key),
                set_={c: statement.excluded[c] for c in updated},
            )
        else:  # nothing but the key: the row there is the row
            statement = statement.on_conflict_do_nothing(index_elements=list(target.key))
        conn.execute(statement)
    return len(net.upserts) + int(removed)
