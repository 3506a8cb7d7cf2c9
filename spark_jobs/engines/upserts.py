"""Rows inserted into a table, a row whose key is there already updated instead, in the
two forms of SQL the engines have: ``ON CONFLICT`` (PostgreSQL, SQLite) and MySQL's
``ON DUPLICATE KEY UPDATE``. An incremental source's older row never replaces a newer
one (by its cursor column). Each engine picks its form
(:meth:`~spark_jobs.engines.traits.Traits.upsert_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql


def on_conflict(
    statement: Any, table: sa.TableClause, key: Sequence[str], updates: Sequence[str],
    cursor: str | None,
) -> Any:  # fmt: skip
    """``statement`` (an engine's ``INSERT … SELECT``) updating the rows whose ``key`` is there
    (``updates``: the columns it sets; none: those rows are left as they are)."""
    if not updates:
        return statement.on_conflict_do_nothing(index_elements=list(key))
    return statement.on_conflict_do_update(
        index_elements=list(key),
        set_={n: statement.excluded[n] for n in updates},
        where=None if cursor is None else not_older(table.c[cursor], statement.excluded[cursor]),
    )


def on_duplicate_key(
    table: sa.TableClause, names: Sequence[str], rows: sa.Select[Any], updates: Sequence[str],
    cursor: str | None,
) -> Any:  # fmt: skip
    """MySQL's ``INSERT INTO table (names) rows ON DUPLICATE KEY UPDATE …`` of ``updates``."""
    stmt = mysql.insert(table).from_select(names, rows)
    if cursor is None:
        # ON DUPLICATE KEY needs an assignment: with no other column, a no-op on the key.
        return stmt.on_duplicate_key_update({n: stmt.inserted[n] for n in updates or names[:1]})
    # No WHERE here: each column keeps its value unless the row is newer.
    # MySQL assigns left to right, each assignment seeing the ones before
    # it: the cursor goes last, so every test sees the row's old cursor.
    newer = not_older(table.c[cursor], stmt.inserted[cursor])
    ordered = [n for n in updates if n != cursor] + [cursor]
    return stmt.on_duplicate_key_update(
        [(n, sa.case((newer, stmt.inserted[n]), else_=table.c[n])) for n in ordered]
    )


def not_older(current: sa.ColumnElement[Any], incoming: sa.ColumnElement[Any]) -> Any:
    """SQL: the incoming row is not older than the one in the table (by the cursor column).

    An incremental source's import may commit after that of a newer version
    of the same row (two daemons, or a retry): it must not bring the old
    version back. A row without a cursor value is replaced, as before.
    """
    return sa.or_(current.is_(None), current <= incoming)
