"""The commit of a staged batch into a JDBC target: one transaction, fenced,
and rows the target refuses set aside instead of failing the batch.

This is the part of an import that makes it exactly once, and it needs no
Spark: given a filled staging table, :func:`commit_staged` takes the batch's
row in ``_sluice_commits`` (waiting for any other importer of the same batch),
refuses a stale fencing token, upserts the rows and records the commit.

When the target refuses rows (a NOT NULL violated, a value that does not fit,
a check constraint), the whole transaction is rolled back and run again in
splitting mode: the staging rows are upserted in halves by row number, each
half under a savepoint, and a half that fails is split again until the bad
rows stand alone. Those go to ``_sluice_rejects`` with the database's reason,
in the same transaction as the rest, so a re-run replaces them rather than
adding to them. The cost is paid only by batches that hold bad rows: about
``2 × log2(rows)`` savepoint round trips per bad row. Past
:data:`MAX_REJECTS` refused rows the target is taken to refuse the batch as
a whole (a missing parent row of a foreign key, a column too short for all
values): the batch fails instead, with the reason, and nothing is committed.

Some values a database does not refuse but changes: PostgreSQL and MySQL round
12.75 into an INTEGER column. Those rows (the :class:`~spark_jobs.narrowing.Narrowing`
columns :func:`~spark_jobs.jdbc_tables.prepare_target` found) are set aside
first, in the same transaction, with a reason that names the column; they
count against :data:`MAX_REJECTS` like the others.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from config.errors import TargetError
from config.faults import crash_point
from spark_jobs.jdbc_tables import (
    ROW_COLUMN,
    TargetFit,
    commits_table,
    index_staging_rows,
    rejects_table,
)
from spark_jobs.manifest import Manifest
from spark_jobs.narrowing import Narrowing
from spark_jobs.target import TargetTable, Written, stale_token_error

log = logging.getLogger(__name__)

_MYSQL_ROW_ERRORS = {
    1048,  # column cannot be null
    1264,  # out of range value
    1292,  # incorrect date/time value
    1366,  # incorrect value for a column
    1406,  # data too long
    3819,  # check constraint violated (MySQL)
    4025,  # check constraint failed (MariaDB)
}
MAX_REJECTS = 1000
"""Refused rows one batch may set aside before the batch fails instead."""

_PLACEHOLDER_ROWS = -1
"""``rows`` of a commit row inserted by the current transaction and not yet filled in."""


@dataclass(frozen=True)
class Reject:
    """A staged row the target refused, and why."""

    row_number: int
    reason: str


class TooManyRejects(TargetError):
    """The target refuses more of the batch than rejects are meant for; nothing was committed."""


class _RowsRefused(Exception):
    """Raised inside the first transaction to roll it back and split the batch."""


def is_row_error(error: sa.exc.DBAPIError) -> bool:
    """Whether the database refused the data (some row), rather than failed itself."""
    if isinstance(error, sa.exc.IntegrityError | sa.exc.DataError):
        return True
    args: tuple[Any, ...] = getattr(error.orig, "args", ())
    return bool(args) and args[0] in _MYSQL_ROW_ERRORS


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
    a newer token, :class:`TooManyRejects` past :data:`MAX_REJECTS`. A
    re-run with the same or a newer token upserts the rows again (same
    result) and replaces the batch's commit record and rejects.
    """
    fit = fit or TargetFit()
    try:
        written = _transaction(engine, target, staging, names, manifest, fit, split=False)
    except _RowsRefused as refused:
        log.warning(
            "batch %s: %s refused rows (%s); splitting the batch to set them aside",
            manifest.batch_id, target.label, refused,
        )
        index_staging_rows(engine, staging)
        written = _transaction(engine, target, staging, names, manifest, fit, split=True)
    crash_point("after_target_commit")
    return written


def _transaction(
    engine: sa.Engine,
    target: TargetTable,
    staging: sa.Table,
    names: Sequence[str],
    manifest: Manifest,
    fit: TargetFit,
    split: bool,
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
            narrowed += _set_aside(
                conn, rejects, staging, names, target, manifest, narrowing, narrowed
            )
        if split:
            numbers = conn.execute(
                sa.select(staging.c[ROW_COLUMN]).order_by(staging.c[ROW_COLUMN])
            ).scalars().all()
            total = len(numbers)
            refused = _split(conn, dialect, target, staging, values, list(numbers), narrowed)
            _record_rejects(conn, rejects, staging, names, target, manifest, refused)
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


def _set_aside(
    conn: sa.Connection,
    rejects: sa.Table,
    staging: sa.Table,
    names: Sequence[str],
    target: TargetTable,
    manifest: Manifest,
    narrowed: Narrowing,
    already: int,
) -> int:
    """Set aside the staged rows whose ``narrowed`` column would change; return how many.

    They are recorded as rejects and deleted from the staging table, both in
    the commit's transaction, so the upsert that follows never sees them.
    ``already``: rows set aside before, which count against :data:`MAX_REJECTS`.
    """
    column = staging.c[narrowed.column]
    changes = narrowed.changes(column)
    number = staging.c[ROW_COLUMN]
    budget = MAX_REJECTS - already
    found = conn.execute(
        sa.select(number, column).where(changes).order_by(number).limit(budget + 1)
    ).all()
    if not found:
        return 0
    if len(found) > budget:
        raise TooManyRejects(
            f"{target.label}: column {narrowed.column!r} is {narrowed.table_type} in the table "
            f"but {narrowed.batch_type} in the batch, and more than {MAX_REJECTS} of the "
            f"batch's values would change in it, such as {found[0][1]}; change the column's "
            "type, or convert the values with columns: (round(), cast())"
        )
    refused = [Reject(row, narrowed.reason(value)) for row, value in found]
    _record_rejects(conn, rejects, staging, names, target, manifest, refused)
    conn.execute(staging.delete().where(changes))
    return len(refused)


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
    if dialect != "postgresql" or set(names) <= set(target.key) or total < 0:
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
    rows = sa.select(*values.values()).select_from(staging)
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
    )
    updates = [n for n in names if n not in target.key]
    if dialect in ("mysql", "mariadb"):
        stmt = mysql.insert(table).from_select(names, rows)
        # ON DUPLICATE KEY needs an assignment: with no other column, a no-op on the key.
        return stmt.on_duplicate_key_update({n: stmt.inserted[n] for n in updates or names[:1]})
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table).from_select(names, rows)
    if not updates:
        return statement.on_conflict_do_nothing(index_elements=list(target.key))
    return statement.on_conflict_do_update(
        index_elements=list(target.key), set_={n: statement.excluded[n] for n in updates}
    )


def _split(
    conn: sa.Connection,
    dialect: str,
    target: TargetTable,
    staging: sa.Table,
    values: dict[str, sa.ColumnElement[Any]],
    numbers: list[int],
    already: int = 0,
) -> list[Reject]:
    """Upsert the staged rows in halves; return the rows that fail on their own.

    ``already``: rows of the batch set aside before, which count against
    :data:`MAX_REJECTS` too.
    """
    refused: list[Reject] = []
    number = staging.c[ROW_COLUMN]

    def attempt(lo: int, hi: int) -> sa.exc.DBAPIError | None:
        # rows numbers[lo:hi]; the numbers are distinct and sorted
        statement = upsert(
            dialect, target, staging, values, number.between(numbers[lo], numbers[hi - 1])
        )
        try:
            with conn.begin_nested():
                conn.execute(statement)
        except sa.exc.DBAPIError as error:
            if not is_row_error(error):
                raise
            return error
        return None

    def settle(lo: int, hi: int, error: sa.exc.DBAPIError) -> None:
        # rows numbers[lo:hi] failed together with ``error``
        if hi - lo == 1:
            refused.append(Reject(numbers[lo], reason(error)))
            if already + len(refused) > MAX_REJECTS:
                raise TooManyRejects(
                    f"{target.label} refuses more than {MAX_REJECTS} rows of the batch, "
                    f"such as: {refused[0].reason}; fix the target or the columns: mapping"
                )
            return
        mid = (lo + hi) // 2
        for a, b in ((lo, mid), (mid, hi)):  # in row order
            failed = attempt(a, b)
            if failed is not None:
                settle(a, b, failed)

    # Tried whole once more under a savepoint: a target changed in between
    # (a constraint dropped) may take it now; and a lone row gets its error.
    failed = attempt(0, len(numbers)) if numbers else None
    if failed is not None:
        settle(0, len(numbers), failed)
    return refused


def _record_rejects(
    conn: sa.Connection,
    rejects: sa.Table,
    staging: sa.Table,
    names: Sequence[str],
    target: TargetTable,
    manifest: Manifest,
    refused: list[Reject],
) -> None:
    """Insert the refused rows, read back from the staging table, as JSON text."""
    if not refused:
        return
    why = {r.row_number: r.reason for r in refused}
    number = staging.c[ROW_COLUMN]
    now = dt.datetime.now(dt.UTC)
    records = []
    for start in range(0, len(refused), 500):
        chunk = [r.row_number for r in refused[start : start + 500]]
        query = sa.select(number, *[staging.c[n] for n in names]).where(number.in_(chunk))
        for row in conn.execute(query).mappings():
            values = {n: row[n] for n in names}
            records.append(
                {
                    "batch_id": manifest.batch_id,
                    "source": manifest.source,
                    "key": _json([values[k] for k in target.key]),
                    "row": _json(values),
                    "reason": why[row[ROW_COLUMN]],
                    "rejected_at": now,
                }
            )
    conn.execute(rejects.insert(), records)
    log.warning(
        "batch %s: %d rows refused by %s, recorded in _sluice_rejects",
        manifest.batch_id, len(records), target.label,
    )


def reason(error: sa.exc.DBAPIError) -> str:
    """The database's own message (its first line), without the SQL text or parameters."""
    args: tuple[Any, ...] = getattr(error.orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        text = args[1]  # PyMySQL: (errno, message)
    else:
        text = str(error.orig if error.orig is not None else error).strip()
    return (text.splitlines() or ["refused"])[0][:1000]


def _json(value: Any) -> str:
    return json.dumps(value, default=_json_value, ensure_ascii=False, separators=(",", ":"))


def _json_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)  # exact, unlike a float
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)
