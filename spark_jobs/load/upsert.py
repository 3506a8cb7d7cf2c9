"""The upsert of a staged batch into its target table, in each engine's SQL.

``INSERT INTO target SELECT … FROM staging`` that updates the rows whose key
is there already: PostgreSQL's and SQLite's ``ON CONFLICT``, MySQL's ``ON
DUPLICATE KEY UPDATE``; an incremental source's older row never replaces a
newer one (by its cursor).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite

from spark_jobs.engines.postgresql.insert import insert as pg_insert
from spark_jobs.load.target import TargetTable


def key_order(target: TargetTable, staging: sa.Table) -> list[sa.Column[Any]]:
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
    always: frozenset[str] = frozenset(),
) -> sa.Executable:
    """``INSERT INTO target SELECT … FROM staging [WHERE …]`` updating rows whose key exists.

    ``values``: each target column's value, a staged column or NULL (see :func:`_values`).
    ``always``: identity columns the table generates always (PostgreSQL): a new row takes
    the source's value (``OVERRIDING SYSTEM VALUE``), a row there keeps its own.
    """
    names = list(values)
    table = sa.table(target.table, *[sa.column(n) for n in names], schema=target.schema)
    # Without a WHERE, SQLite would read "ON CONFLICT" as a join's ON clause.
    rows = (
        sa.select(*values.values())
        .select_from(staging)
        .where(where if where is not None else sa.true())
        .order_by(*key_order(target, staging))
    )
    updates = [n for n in names if n not in target.key and n not in always]
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
    statement: Any
    if dialect == "postgresql":
        statement = pg_insert(table, bool(always)).from_select(names, rows)
    else:
        statement = sqlite.insert(table).from_select(names, rows)
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
