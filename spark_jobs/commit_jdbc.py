"""The commit of a staged batch into a JDBC target: one transaction, fenced.

This is the part of an import that makes it exactly once, and it needs no
Spark: given a filled staging table, :func:`commit_staged` takes the batch's
row in ``_sluice_commits`` (waiting for any other importer of the same batch),
refuses a stale fencing token, upserts the rows and records the commit.

Rows the target refuses, or would change, do not fail the batch: the
transaction is run again with them isolated and set aside in
``_sluice_rejects`` (:mod:`spark_jobs.rejects_jdbc`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from config.faults import crash_point
from spark_jobs.jdbc_tables import ROW_COLUMN, TargetFit, commits_table, rejects_table
from spark_jobs.keyorder import row_compare
from spark_jobs.manifest import Manifest
from spark_jobs.rejects_jdbc import is_row_error, reason, record_rejects, set_aside, split
from spark_jobs.staging import index_staging_rows
from spark_jobs.target import TargetTable, Written, stale_token_error

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
    :class:`~spark_jobs.target.StaleToken` when the batch was committed with
    a newer token, :class:`~spark_jobs.rejects_jdbc.TooManyRejects` past
    :data:`~spark_jobs.rejects_jdbc.MAX_REJECTS`. A
    re-run with the same or a newer token upserts the rows again (same
    result) and replaces the batch's commit record and rejects.
    """
    fit = fit or TargetFit()
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
    :class:`~spark_jobs.target.StaleToken` like :func:`commit_staged`.
    """
    commits = commits_table()
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            current = _take_commit_row(conn, commits, manifest)
            if current is not None and current > manifest.token:
                raise stale_token_error(target, manifest, current)
            if current is not None or _range_taken(conn, target, manifest):
                transaction.rollback()
                return None
            cursor = conn.connection.cursor()
            try:
                rows = load(cursor)
            except sa.exc.DBAPIError as error:
                if not is_row_error(error):
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
    where = []
    if manifest.lo is not None:
        where.append(row_compare(keys, manifest.lo, ">", dialect))
    if manifest.hi is not None:
        where.append(row_compare(keys, manifest.hi, "<=", dialect))
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
    values = _values(staging, names, fit)
    with engine.begin() as conn:
        current = _take_commit_row(conn, commits, manifest)
        if current is not None and current > manifest.token:
            raise stale_token_error(target, manifest, current)
        conn.execute(rejects.delete().where(rejects.c.batch_id == manifest.batch_id))
        # Rolled back with the rest when the batch must be split: the split
        # transaction sets the same rows aside again.
        narrowed = 0
        for narrowing in fit.narrowings:
            narrowed += set_aside(
                conn, rejects, staging, names, target, manifest, narrowing, narrowed
            )
        if isolate:
            numbers = (
                conn.execute(sa.select(staging.c[ROW_COLUMN]).order_by(staging.c[ROW_COLUMN]))
                .scalars()
                .all()
            )
            total = len(numbers)
            upsert_where = functools.partial(upsert, dialect, target, staging, values)
            refused = split(conn, target, staging, list(numbers), upsert_where, narrowed)
            record_rejects(conn, rejects, staging, names, target, manifest, refused)
        else:
            total = _upsert_all(conn, dialect, target, staging, values)
            refused = []
        rows = int(total) - len(refused)
        conn.execute(
            commits.update()
            .where(commits.c.batch_id == manifest.batch_id)
            .values(token=manifest.token, rows=rows, committed_at=dt.datetime.now(dt.UTC))
        )
    return Written(rows, narrowed + len(refused))


def _values(
    staging: sa.Table, names: Sequence[str], fit: TargetFit
) -> dict[str, sa.ColumnElement[Any]]:
    """What the upsert inserts into each target column: the staged column, or NULL.

    A column null in the whole batch is staged as text (it may be created
    so), but the table's column may be of any type: a bare NULL takes the
    column's type in ``INSERT … SELECT``, a text one would be refused.
    """
    return {n: sa.null().label(n) if n in fit.null_columns else staging.c[n] for n in names}


def _upsert_all(
    conn: sa.Connection,
    dialect: str,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
) -> int:
    """Upsert every staged row; return how many. Raises :class:`_RowsRefused` on a row error."""
    names = list(values)
    if dialect == "postgresql":
        inserted = _insert_new(conn, target, staging, values)
        if inserted is not None:
            return inserted
    # SQLAlchemy keeps an INSERT's rowcount only when asked to.
    statement = upsert(dialect, target, staging, values).execution_options(preserve_rowcount=True)
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
    if dialect != "postgresql" or set(names) <= set(target.key) or total < 0 or target.cursor:
        total = conn.execute(sa.select(sa.func.count()).select_from(staging)).scalar_one()
    return int(total)


def _insert_new(
    conn: sa.Connection,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
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
    rows = sa.select(*values.values()).select_from(staging).order_by(*_key_order(target, staging))
    statement = sa.insert(table).from_select(names, rows).execution_options(preserve_rowcount=True)
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


def _take_commit_row(conn: sa.Connection, commits: sa.Table, manifest: Manifest) -> int | None:
    """Lock the batch's commit row, inserting a placeholder if there is none.

    Returns the token of the commit already recorded, or None when there is
    none. A second importer of the same batch waits here (on the row lock, or
    on the uncommitted insert of the first) until the first one is done, and
    then sees its commit: two importers never upsert the same batch at once.
    """
    dialect = conn.dialect.name
    values = {
        "batch_id": manifest.batch_id,
        "token": manifest.token,
        "rows": _PLACEHOLDER_ROWS,
        "committed_at": dt.datetime.now(dt.UTC),
    }
    if dialect == "postgresql":
        conn.execute(postgresql.insert(commits).values(values).on_conflict_do_nothing())
    elif dialect == "sqlite":  # BEGIN IMMEDIATE already holds the database's write lock
        conn.execute(sqlite.insert(commits).values(values).on_conflict_do_nothing())
    else:
        insert = mysql.insert(commits).values(values)
        conn.execute(insert.on_duplicate_key_update(token=commits.c.token))  # no change
    query = sa.select(commits.c.token, commits.c.rows).where(
        commits.c.batch_id == manifest.batch_id
    )
    if dialect != "sqlite":
        query = query.with_for_update()
    row = conn.execute(query).one()
    return None if row.rows == _PLACEHOLDER_ROWS else int(row.token)


def _key_order(target: TargetTable, staging: sa.Table) -> list[sa.Column[Any]]:
    """The order to insert staged rows in: the key's.

    The parallel Spark writers interleave their rows in the staging table;
    inserted in that order, the key index splits pages in the middle (it came
    out a quarter larger, and the insert a few percent slower).
    """
    return [staging.c[k] for k in target.key]


def upsert(
    dialect: str,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
    where: sa.ColumnElement[bool] | None = None,
) -> sa.Executable:
    """``INSERT INTO target SELECT … FROM staging [WHERE …]`` updating rows whose key exists.

    ``values``: each target column's value, a staged column or NULL (see :func:`_values`).
    """
    names = list(values)
    table = sa.table(target.table, *[sa.column(n) for n in names], schema=target.schema)
    # Without a WHERE, SQLite would read "ON CONFLICT" as a join's ON clause.
    rows = (
        sa.select(*values.values())
        .select_from(staging)
        .where(where if where is not None else sa.true())
        .order_by(*_key_order(target, staging))
    )
    updates = [n for n in names if n not in target.key]
    cursor = target.cursor if target.cursor in updates else None
    if dialect in ("mysql", "mariadb"):
        stmt = mysql.insert(table).from_select(names, rows)
        if cursor is None:
            # ON DUPLICATE KEY needs an assignment: with no other column, a no-op on the key.
            return stmt.on_duplicate_key_update({n: stmt.inserted[n] for n in updates or names[:1]})
        # No WHERE here: each column keeps its value unless the row is newer.
        # MySQL assigns left to right, each assignment seeing the ones before
        # it: the cursor goes last, so every test sees the row's old cursor.
        newer = _not_older(table.c[cursor], stmt.inserted[cursor])
        ordered = [n for n in updates if n != cursor] + [cursor]
        return stmt.on_duplicate_key_update(
            [(n, sa.case((newer, stmt.inserted[n]), else_=table.c[n])) for n in ordered]
        )
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table).from_select(names, rows)
    if not updates:
        return statement.on_conflict_do_nothing(index_elements=list(target.key))
    return statement.on_conflict_do_update(
        index_elements=list(target.key),
        set_={n: statement.excluded[n] for n in updates},
        where=None if cursor is None else _not_older(table.c[cursor], statement.excluded[cursor]),
    )


def _not_older(current: sa.ColumnElement[Any], incoming: sa.ColumnElement[Any]) -> Any:
    """SQL: the incoming row is not older than the one in the table (by the cursor column).

    An incremental source's import may commit after that of a newer version
    of the same row (two daemons, or a retry): it must not bring the old
    version back. A row without a cursor value is replaced, as before.
    """
    return sa.or_(current.is_(None), current <= incoming)
