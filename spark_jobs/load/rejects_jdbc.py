"""Rows a JDBC target refuses: isolated from the rest of the batch and recorded.

When the target refuses rows (a NOT NULL violated, a value that does not fit,
a check constraint), the commit (:mod:`spark_jobs.load.commit_jdbc`) rolls back and
runs again in splitting mode: :func:`split` upserts the staging rows in halves
by row number, each half under a savepoint, and a half that fails is split
again until the bad rows stand alone. :func:`record_rejects` writes those to
``_sluice_rejects`` with the database's reason, in the same transaction as the
rest, so a re-run replaces them rather than adding to them. The cost is paid
only by batches that hold bad rows: about ``2 × log2(rows)`` savepoint round
trips per bad row. Past :data:`MAX_REJECTS` refused rows the target is taken
to refuse the batch as a whole (a missing parent row of a foreign key, a
column too short for all values): the batch fails instead, with the reason,
and nothing is committed.

Some values a database does not refuse but changes: PostgreSQL and MySQL round
12.75 into an INTEGER column. :func:`set_aside` takes those rows (of the
:class:`~spark_jobs.load.narrowing.Narrowing` columns) out of the staging table
first, with a reason that names the column; they count against
:data:`MAX_REJECTS` like the others.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.errors import TargetError, waits_for_other_rows
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.ddl import SqlType
from spark_jobs.load.jdbc_tables import ROW_COLUMN
from spark_jobs.load.narrowing import Narrowing, NotANumber, ZeroDate
from spark_jobs.load.target import TargetTable

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


@dataclass(frozen=True)
class Reject:
    """A staged row the target refused, and why."""

    row_number: int
    reason: str


class TooManyRejects(TargetError):
    """The target refuses more of the batch than rejects are meant for; nothing was committed."""


def is_row_error(error: sa.exc.DBAPIError) -> bool:
    """Whether the database refused the data (some row), rather than failed itself.

    A row whose foreign key's parent is missing, or whose unique value another
    row holds, is not refused for good: the batch fails and is retried
    (:func:`config.errors.waits_for_other_rows`).
    """
    if waits_for_other_rows(error):
        return False
    if isinstance(error, sa.exc.IntegrityError | sa.exc.DataError):
        return True
    args: tuple[Any, ...] = getattr(error.orig, "args", ())
    return bool(args) and args[0] in _MYSQL_ROW_ERRORS


def set_aside(
    conn: sa.Connection,
    rejects: sa.Table,
    staging: sa.Table,
    names: Sequence[str],
    target: TargetTable,
    manifest: Manifest,
    narrowed: Narrowing | ZeroDate | NotANumber,
    already: int,
    floats: frozenset[str] = frozenset(),
) -> int:
    """Set aside the staged rows whose ``narrowed`` column would change; return how many.

    They are recorded as rejects and deleted from the staging table, both in
    the commit's transaction, so the upsert that follows never sees them.
    ``already``: rows set aside before, which count against :data:`MAX_REJECTS`.
    """
    column: sa.ColumnElement[Any] = staging.c[narrowed.column]
    if narrowed.staged_as is not None:
        column = sa.cast(column, SqlType(narrowed.staged_as))
    changes = narrowed.changes(column)
    number = staging.c[ROW_COLUMN]
    budget = MAX_REJECTS - already
    found = conn.execute(
        sa.select(number, column).where(changes).order_by(number).limit(budget + 1)
    ).all()
    if not found:
        return 0
    if len(found) > budget:
        if not isinstance(narrowed, Narrowing):
            raise TooManyRejects(
                f"{target.label}: more than {MAX_REJECTS} of the batch's rows would be set "
                f"aside, such as: {narrowed.reason(found[0][1])}")
        raise TooManyRejects(
            f"{target.label}: column {narrowed.column!r} is {narrowed.table_type} in the table "
            f"but {narrowed.batch_type} in the batch, and more than {MAX_REJECTS} of the "
            f"batch's values would change in it, such as {found[0][1]}; change the column's "
            "type, or convert the values with columns: (round(), cast())"
        )
    refused = [Reject(row, narrowed.reason(value)) for row, value in found]
    record_rejects(conn, rejects, staging, names, target, manifest, refused, floats)
    conn.execute(staging.delete().where(changes))
    return len(refused)


def split(
    conn: sa.Connection,
    target: TargetTable,
    staging: sa.Table,
    numbers: list[int],
    upsert_where: Callable[[sa.ColumnElement[bool]], sa.Executable],
    already: int = 0,
    blame: Callable[[int], str | None] | None = None,
) -> list[Reject]:
    """Upsert the staged rows in halves; return the rows that fail on their own.

    ``numbers``: the staged rows' numbers, distinct and sorted;
    ``upsert_where``: the upsert of the staged rows a condition selects.
    ``already``: rows of the batch set aside before, which count against
    :data:`MAX_REJECTS` too. ``blame``: the column a refused row's value does
    not fit, by its number, for the reason (a failed cast's message names none).
    """
    refused: list[Reject] = []
    number = staging.c[ROW_COLUMN]

    def attempt(lo: int, hi: int) -> sa.exc.DBAPIError | None:
        # rows numbers[lo:hi]; the numbers are distinct and sorted
        statement = upsert_where(number.between(numbers[lo], numbers[hi - 1]))
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
            why = reason(error)
            column = blame(numbers[lo]) if blame is not None else None
            if column is not None and repr(column) not in why:
                why = f"column {column!r}: {why}"
            refused.append(Reject(numbers[lo], why))
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


def record_rejects(
    conn: sa.Connection,
    rejects: sa.Table,
    staging: sa.Table,
    names: Sequence[str],
    target: TargetTable,
    manifest: Manifest,
    refused: list[Reject],
    floats: frozenset[str] = frozenset(),
) -> None:
    """Insert the refused rows, read back from the staging table, as JSON text (``floats``:
    columns staged as text that are floating point)."""
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
            values = {n: _float(row[n]) if n in floats else row[n] for n in names}
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
        manifest.batch_id,
        len(records),
        target.label,
    )


def _float(value: Any) -> Any:
    try:
        return None if value is None else float(value)
    except ValueError:
        return value


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
