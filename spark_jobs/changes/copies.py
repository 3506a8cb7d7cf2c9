"""COPY into a PostgreSQL target's table, or into a stage shaped like it and upserted from there.

What the batches of a change stream write (:mod:`.apply_changes`, :mod:`.load_ranges`)
goes in through the column types' own input functions, as pg_dump's COPY restores:
text lines as the stream printed them, rows, or a source's COPY output passed on as it
comes (:class:`Chunks`, binary where the types are the same built-in ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.errors import TargetError
from spark_jobs.engines.postgresql.insert import insert as pg_insert
from spark_jobs.load.target import TargetTable

GROUP = "_sluice_group"
"""The stage's column saying what a row is: a delete, or the number of its upsert group
(the rows that leave the same columns alone)."""


def table_columns(
    conn: sa.Connection, target: TargetTable, table_sql: str
) -> dict[str, tuple[bool, bool]]:
    """Per column of the table: NOT NULL, and an identity GENERATED ALWAYS."""
    oid = conn.execute(sa.text("SELECT to_regclass(:name)::oid"), {"name": table_sql}).scalar()
    if oid is None:
        raise TargetError(
            f"{target.label}: the table does not exist; a change stream's batches go into a "
            "table created before its first batch"
        )
    found = conn.execute(
        sa.text("SELECT attname, attnotnull, attidentity = 'a' FROM pg_attribute "
                "WHERE attrelid = :oid AND attnum > 0 AND NOT attisdropped"),
        {"oid": oid},
    )  # fmt: skip
    return {name: (bool(not_null), bool(always)) for name, not_null, always in found}


def stage(
    conn: sa.Connection,
    table_sql: str,
    not_null: Sequence[str],
    names: Sequence[str],
    name: str,
    rows: Iterable[Sequence[Any]] | str,
) -> sa.TableClause:
    """A temporary table ``name`` of the target's column types (dropped at the commit),
    holding ``rows`` (columns ``names``; rows, or lines of COPY text) parsed by those types'
    input functions: COPY's text format, as pg_dump's restore. ``not_null``: the columns
    whose NOT NULL it drops (those a row may leave out); :data:`GROUP` is added when named."""
    prep = conn.dialect.identifier_preparer
    stage_sql = prep.quote(name)
    conn.execute(sa.text(f"CREATE TEMPORARY TABLE {stage_sql} (LIKE {table_sql}) ON COMMIT DROP"))
    # A row holds only what it writes: the columns it leaves alone, and all but the key
    # of a delete, are NULL here.
    alter = [f"ALTER COLUMN {prep.quote(c)} DROP NOT NULL" for c in not_null]
    if GROUP in names:
        alter.append(f"ADD COLUMN {prep.quote(GROUP)} integer NOT NULL")
    if alter:
        conn.execute(sa.text(f"ALTER TABLE {stage_sql} {', '.join(alter)}"))
    copy_in(conn, stage_sql, names, rows)
    return sa.table(name, *[sa.column(c) for c in names])


@dataclass(frozen=True)
class Chunks:
    """COPY data as a source's COPY gave it, in chunks written as they come (see
    :func:`copy_in`)."""

    parts: Iterable[bytes]


def copy_in(
    conn: sa.Connection, table_sql: str, names: Sequence[str],
    rows: Iterable[Sequence[Any]] | str | Chunks, binary: bool = False,
) -> int:  # fmt: skip
    """COPY ``rows`` (or lines of COPY text, or :class:`Chunks` of it, in binary form where
    ``binary``) into ``names`` of ``table_sql``; the rows COPYed."""
    prep = conn.dialect.identifier_preparer
    statement = (f"COPY {table_sql} ({', '.join(prep.quote(c) for c in names)}) FROM STDIN"
                 + (" (FORMAT binary)" if binary else ""))  # fmt: skip
    cursor = conn.connection.cursor()
    try:
        with cursor.copy(statement) as copy:
            if isinstance(rows, str):
                copy.write(rows)
            elif isinstance(rows, Chunks):
                for chunk in rows.parts:
                    copy.write(chunk)
            else:
                for row in rows:
                    copy.write_row(row)
        return max(cursor.rowcount, 0)
    except conn.dialect.loaded_dbapi.Error as error:
        # As SQLAlchemy reports a statement's error: the caller tells a refused value
        # (DataError), a row there (IntegrityError) from a lost server.
        raise sa.exc.DBAPIError.instance(
            statement, None, error, conn.dialect.loaded_dbapi.Error
        ) from error
    finally:
        cursor.close()


def upsert_staged(conn: sa.Connection, target: TargetTable, columns: dict[str, tuple[bool, bool]],
                  staged: sa.TableClause) -> None:  # fmt: skip
    """Insert the rows of ``staged`` (see :func:`stage`) into the table, a row whose key is
    there taking the staged values (``columns``: see :func:`table_columns`)."""
    names = [c.name for c in staged.columns]
    table = sa.table(target.table, *[sa.column(c) for c in names], schema=target.schema)
    statement = pg_insert(table, any(columns[c][1] for c in names)).from_select(
        names, sa.select(*[staged.c[c] for c in names]))  # fmt: skip
    # An identity GENERATED ALWAYS keeps the target row's own value (see _apply).
    updated = [c for c in names if c not in target.key and not columns[c][1]]
    if updated:
        statement = statement.on_conflict_do_update(
            index_elements=list(target.key), set_={c: statement.excluded[c] for c in updated})
    else:
        statement = statement.on_conflict_do_nothing(index_elements=list(target.key))
    conn.execute(statement)
