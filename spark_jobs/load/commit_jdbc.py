"""The commit of a staged batch into a JDBC target: one transaction, fenced.

This is the part of an import that makes it exactly once, and it needs no
Spark: given a filled staging table, :func:`commit_staged` takes the batch's
row in ``_sluice_commits`` (waiting for any other importer of the same batch),
refuses a stale fencing token, upserts the rows and records the commit.

Rows the target refuses, or would change, do not fail the batch: the
transaction is run again with them isolated and set aside in
``_sluice_rejects`` (:mod:`spark_jobs.load.rejects_jdbc`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from config.faults import crash_point
from spark_jobs.common.keyorder import key_types, row_compare, typed_key
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import dialect_engine
from spark_jobs.engines.postgresql.insert import insert as pg_insert
from spark_jobs.load import late_keys
from spark_jobs.load.jdbc_tables import ROW_COLUMN, TargetFit, commits_table, rejects_table
from spark_jobs.load.rejects_jdbc import is_row_error, reason, record_rejects, set_aside, split
from spark_jobs.load.staging import index_staging_rows
from spark_jobs.load.target import TargetTable, Written, stale_token_error
from spark_jobs.load.upsert import key_order, upsert

log = logging.getLogger(__name__)

_PLACEHOLDER_ROWS = -1
"""``rows`` of a commit row inserted by the current transaction and not yet filled in."""


class _RowsRefused(Exception):
    """Raised inside the first transaction to roll it back and split the batch."""


def commit_staged(
    engine: sa.Engine,
    target: TargetTable,
    staging: sa.Table,
    names: Sequence[str],
    manifest: Manifest,
    fit: TargetFit | None = None,
) -> Written:
    """Commit the staged batch: fenced, idempotent, rejected rows set aside.

    ``staging`` holds the batch's columns ``names`` plus ``_sluice_row``, a
    distinct number per row. ``fit`` is how they meet the table (None: as
    they are): columns written as NULL, columns whose changed values are set
    aside. Blocks while another importer commits the same batch; raises
    :class:`~spark_jobs.load.target.StaleToken` when the batch was committed with
    a newer token, :class:`~spark_jobs.load.rejects_jdbc.TooManyRejects` past
    :data:`~spark_jobs.load.rejects_jdbc.MAX_REJECTS`. A
    re-run with the same or a newer token upserts the rows again (same
    result) and replaces the batch's commit record and rejects.
    """
    fit = fit or TargetFit()
    late_keys.ensure_if_fresh(engine, target, f"for batch {manifest.batch_id}'s upsert")
    try:
        written = _transaction(engine, target, staging, names, manifest, fit, isolate=False)
    except _RowsRefused as refused:
        log.warning(
            "batch %s: %s refused rows (%s); splitting the batch to set them aside",
            manifest.batch_id,
            target.label,
            refused,
        )
        index_staging_rows(engine, staging)
        written = _transaction(engine, target, staging, names, manifest, fit, isolate=True)
    crash_point("after_target_commit")
    return written


def commit_direct(
    engine: sa.Engine,
    target: TargetTable,
    manifest: Manifest,
    load: Callable[[Any], int],
    crash: bool = True,
) -> Written | None:
    """Load the batch straight into the target inside its commit transaction: fenced, once.

    ``load(cursor)`` writes the batch's rows into the target table (a COPY)
    on the transaction's DBAPI cursor and returns how many; it raises
    :class:`sqlalchemy.exc.DBAPIError` as the database refuses. Returns None,
    with nothing changed, when the batch must take the staged path instead:
    it was committed before with an older token (its rows are there), a row
    of the table is in the batch's key range, or the load hit a row the table
    refuses (a duplicate key, a value too long). Raises
    :class:`~spark_jobs.load.target.StaleToken` like :func:`commit_staged`.
    """
    commits = commits_table()
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            current = take_commit_row(conn, commits, manifest)
            if current is not None and current > manifest.token:
                raise stale_token_error(target, manifest, current)
            # A table this run made without its key holds no row of a range before its
            # batch (spark_jobs/load/late_keys.py): the probe would scan it whole.
            if current is not None or (not target.fresh and _range_taken(conn, target, manifest)):
                transaction.rollback()
                return None
            cursor = conn.connection.cursor()
            try:
                rows = load(cursor)
            except sa.exc.DBAPIError as error:
                # A key the probe did not see (a writer beside us) is the upsert's to settle.
                duplicate = getattr(error.orig, "sqlstate", None) == "23505"
                if not (is_row_error(error) or duplicate):
                    raise
                log.info("batch %s: %s refused a row of the COPY (%s); staging the batch",
                         manifest.batch_id, target.label, reason(error))  # fmt: skip
                transaction.rollback()
                return None
            finally:
                cursor.close()
            # No rejects to clear: they are only ever recorded with a commit.
            conn.execute(
                commits.update()
                .where(commits.c.batch_id == manifest.batch_id)
                .values(token=manifest.token, rows=rows, committed_at=dt.datetime.now(dt.UTC))
            )
            transaction.commit()
        except BaseException:
            if transaction.is_active:
                transaction.rollback()
            raise
    if crash:
        crash_point("after_target_commit")
    return Written(rows, 0, "copy")


def _range_taken(conn: sa.Connection, target: TargetTable, manifest: Manifest) -> bool:
    """Whether the table holds a row in the batch's key range ``(lo, hi]`` (an index probe)."""
    keys: list[sa.ColumnClause[Any]] = [sa.column(k) for k in target.key]
    table = sa.table(target.table, *keys, schema=target.schema)
    dialect = conn.dialect.name
    qualified = f"{target.schema}.{target.table}" if target.schema else target.table
    # The bounds come from JSON: a uuid, a decimal or a timestamp as text, typed again
    # by the key's column types (looked up, a catalogue query, only where text is there:
    # numbers stay as they are).
    bounds = [value for bound in (manifest.lo, manifest.hi) if bound is not None for value in bound]
    types: Sequence[type | None] = (key_types(conn, qualified, target.key)
                                    if any(isinstance(v, str) for v in bounds)
                                    else [None] * len(target.key))  # fmt: skip
    where = []
    if manifest.lo is not None:
        where.append(row_compare(keys, typed_key(manifest.lo, types), ">", dialect))
    if manifest.hi is not None:
        where.append(row_compare(keys, typed_key(manifest.hi, types), "<=", dialect))
    probe = sa.select(sa.literal(1)).select_from(table).where(*where).limit(1)
    return conn.execute(probe).first() is not None


def _transaction(
    engine: sa.Engine,
    target: TargetTable,
    staging: sa.Table,
    names: Sequence[str],
    manifest: Manifest,
    fit: TargetFit,
    isolate: bool,
) -> Written:
    dialect = engine.dialect.name
    commits, rejects = commits_table(), rejects_table()
    values = _values(staging, names, fit, engine.dialect)
    with engine.begin() as conn:
        current = take_commit_row(conn, commits, manifest)
        if current is not None and current > manifest.token:
            raise stale_token_error(target, manifest, current)
        conn.execute(rejects.delete().where(rejects.c.batch_id == manifest.batch_id))
        # Rolled back with the rest when the batch must be split: the split
        # transaction sets the same rows aside again.
        narrowed = 0
        for narrowing in fit.narrowings:
            narrowed += set_aside(
                conn, rejects, staging, names, target, manifest, narrowing, narrowed,
                fit.floats_as_text,
            )
        if isolate:
            numbers = (
                conn.execute(sa.select(staging.c[ROW_COLUMN]).order_by(staging.c[ROW_COLUMN]))
                .scalars()
                .all()
            )
            total = len(numbers)
            upsert_where = functools.partial(upsert, dialect, target, staging, values,
                                             always=fit.always)
            blame = functools.partial(_blame, conn, staging, values, list(fit.casts))
            refused = split(conn, target, staging, list(numbers), upsert_where, narrowed, blame)
            record_rejects(conn, rejects, staging, names, target, manifest, refused,
                           fit.floats_as_text)
        else:
            total = _upsert_all(conn, dialect, target, staging, values, fit.always)
            refused = []
        rows = int(total) - len(refused)
        conn.execute(
            commits.update()
            .where(commits.c.batch_id == manifest.batch_id)
            .values(token=manifest.token, rows=rows, committed_at=dt.datetime.now(dt.UTC))
        )
    return Written(rows, narrowed + len(refused))


def _blame(
    conn: sa.Connection,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
    cast: Sequence[str],
    number: int,
) -> str | None:
    """The column of staged row ``number`` whose value the table's type does not take (its
    cast fails), or None: a database names no column in a failed cast's message."""
    for name in cast:
        probe = sa.select(values[name]).where(staging.c[ROW_COLUMN] == number)
        try:
            with conn.begin_nested():
                conn.execute(probe).all()
        except sa.exc.DBAPIError:
            return name
    return None


def _values(
    staging: sa.Table, names: Sequence[str], fit: TargetFit, dialect: sa.Dialect
) -> dict[str, sa.ColumnElement[Any]]:
    """What the upsert inserts into each target column: the staged column, or NULL.

    A column null in the whole batch is staged as text (it may be created
    so), but the table's column may be of any type: a bare NULL takes the
    column's type in ``INSERT … SELECT``, a text one would be refused. A
    column staged in another type than the table's is cast to it.
    """
    values: dict[str, sa.ColumnElement[Any]] = {}
    for n in names:
        if n in fit.null_columns:
            values[n] = sa.null().label(n)
        elif n in fit.casts:
            # Staged in its carrier (a uuid as text): the table's type parses it.
            staged = str(staging.c[n].compile(dialect=dialect))
            values[n] = sa.literal_column(fit.casts[n].format(staged)).label(n)
        else:
            values[n] = staging.c[n]
    return values


def _upsert_all(
    conn: sa.Connection,
    dialect: str,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
    always: frozenset[str] = frozenset(),
) -> int:
    """Upsert every staged row; return how many. Raises :class:`_RowsRefused` on a row error."""
    names = list(values)
    into = dialect_engine(dialect)
    if into.plain_insert_first:
        inserted = _insert_new(conn, target, staging, values, bool(always))
        if inserted is not None:
            return inserted
    # SQLAlchemy keeps an INSERT's rowcount only when asked to.
    statement = upsert(dialect, target, staging, values, always=always)
    statement = statement.execution_options(preserve_rowcount=True)
    try:
        total = conn.execute(statement).rowcount
    except sa.exc.DBAPIError as error:
        if is_row_error(error):
            raise _RowsRefused(reason(error)) from error
        raise
    # On PostgreSQL, ON CONFLICT DO UPDATE counts every row it inserted or
    # updated: all of them (a key twice in a batch is an error there). MySQL
    # counts an update twice, DO NOTHING skips existing rows, and SQLAlchemy
    # before 2.0.28 gives -1: count the staging table then.
    # A row kept because the table's is newer counts too: the batch delivered it.
    if not into.upsert_counts_rows or set(names) <= set(target.key) or total < 0 or target.cursor:
        total = conn.execute(sa.select(sa.func.count()).select_from(staging)).scalar_one()
    return int(total)


def _insert_new(
    conn: sa.Connection,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
    overriding: bool = False,
) -> int | None:
    """PostgreSQL: the rows by a plain INSERT, if no key of theirs is in the table yet.

    The usual case (a keyset walk writes new rows), and twice as fast as
    ``ON CONFLICT``, whose speculative insertion checks the key index twice
    per row. A key already there stops it at once (a unique violation, under
    a savepoint): None, and the caller upserts. A batch running at the same
    time that writes the same key (incremental mode) makes this one wait on
    that row, then fall back too: the result is the upsert's either way.
    """
    names = list(values)
    table = sa.table(target.table, *[sa.column(n) for n in names], schema=target.schema)
    rows = sa.select(*values.values()).select_from(staging).order_by(*key_order(target, staging))
    statement = pg_insert(table, overriding).from_select(names, rows)
    statement = statement.execution_options(preserve_rowcount=True)
    try:
        with conn.begin_nested():
            inserted = conn.execute(statement).rowcount
    except sa.exc.DBAPIError as error:
        if getattr(error.orig, "sqlstate", None) == "23505":  # unique_violation
            return None
        if is_row_error(error):
            raise _RowsRefused(reason(error)) from error
        raise
    if inserted < 0:  # SQLAlchemy before 2.0.28
        inserted = conn.execute(sa.select(sa.func.count()).select_from(staging)).scalar_one()
    return int(inserted)


def take_commit_row(conn: sa.Connection, commits: sa.Table, manifest: Manifest) -> int | None:
    """Lock the batch's commit row, inserting a placeholder if there is none.

    Returns the token of the commit already recorded, or None when there is
    none. A second importer of the same batch waits here (on the row lock, or
    on the uncommitted insert of the first) until the first one is done, and
    then sees its commit: two importers never upsert the same batch at once.
    """
    values = {
        "batch_id": manifest.batch_id,
        "token": manifest.token,
        "rows": _PLACEHOLDER_ROWS,
        "committed_at": dt.datetime.now(dt.UTC),
    }
    row = dialect_engine(conn.dialect).take_row(conn, commits, values, "batch_id", "token",
                                                ("token", "rows"))  # fmt: skip
    return None if row.rows == _PLACEHOLDER_ROWS else int(row.token)
