"""The queries of a SQL source's walk in key order, with SQLAlchemy Core.

Only the key columns (and the cursor, in incremental mode) are read; the
order is ``(cursor, *key)`` or the key. Identifiers are quoted by the dialect,
values are bound, and ``where:`` is trusted operator SQL pushed down as written.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from config.models import SqlSourceConfig
from sources.sqldb import SourceDatabase
from spark_jobs.common.keyorder import key_types, row_compare, typed_key
from spark_jobs.engines import dialect_traits

KeyTuple = tuple[Any, ...]


class KeyQueries:
    """What one source reads, as queries run on ``db``: pages of keys, range ends, counts.

    Every query reads the rows of the source: past a position in walk order
    (``after``, None from the start), matching ``where:``, with a cursor in
    incremental mode; not past ``through`` when given (a walk that ends
    there). A read blocks on the database and raises what
    :meth:`SourceDatabase.guard` raises.
    """

    def __init__(
        self, cfg: SqlSourceConfig, db: SourceDatabase, through: KeyTuple | None = None
    ) -> None:
        self._db = db
        self._through = through
        schema, _, table = cfg.table.rpartition(".")
        cursor = [cfg.cursor] if cfg.mode == "incremental" and cfg.cursor else []
        order: list[sa.ColumnClause[Any]] = [sa.column(c) for c in [*cursor, *cfg.key_columns]]
        self._order_cols = order
        self._table_name = cfg.table
        self._types: list[type | None] | None = None
        self._table = sa.table(table, *order, schema=schema or None)
        # Escape ':' so the operator's SQL reaches the database verbatim
        # rather than being read as bind parameters (PostgreSQL '::int' casts).
        where = cfg.where.replace(":", "\\:") if cfg.where else None
        self._where = sa.text(f"({where})") if where else None
        # Rows with a NULL cursor have no place in (cursor, key) order: a NULL
        # position would compare as unknown and end the walk (SQLite and
        # MariaDB sort NULLs first), so they are left out explicitly.
        self._has_cursor = order[0].is_not(None) if cursor else None

    def select(self, after: KeyTuple | None, limit: int) -> sa.Select[Any]:
        """The next ``limit`` rows' walk columns past ``after``, in walk order."""
        stmt = self._filter(sa.select(*self._order_cols).select_from(self._table), after)
        return stmt.order_by(*self._order_cols).limit(limit)

    def read(self, after: KeyTuple | None, limit: int) -> list[KeyTuple]:
        """The next ``limit`` rows past ``after``, each a tuple of its walk columns."""

        def run() -> list[KeyTuple]:
            with self._db.engine.connect() as conn:
                result = conn.execute(self.select(after, limit))
                # The columns are untyped (sa.column): SQLAlchemy has no value
                # to convert, so the driver's rows are taken as they are. A
                # Row object per key cost four times as much, and a refill
                # reads every key of the table on the loop's process.
                return list(map(tuple, result.cursor.fetchall()))

        return self._db.guard(run)

    def range_end(
        self, after: KeyTuple | None, size: int, few: bool = False
    ) -> tuple[KeyTuple, int] | None:
        """The last key and the row count of the next ``size`` rows past ``after``.

        By the key's index, in the key's own order, for a key of any type (no
        aggregate: ``max(uuid)`` does not exist): the ``size``-th key past
        ``after``, one query; where fewer rows are left, the last of them and
        their count, one more. ``few``: fewer than ``size`` rows are likely
        left (a small table), so the second query alone, whose answer is
        right either way. None when no row is left.
        """
        nth = self.select(after, 1).offset(max(0, size - 1))
        inner = self.select(after, size).subquery()
        keys = [inner.c[c.name] for c in self._order_cols]
        last = (
            sa.select(*keys, sa.func.count().over())
            .order_by(*[k.desc() for k in keys])
            .limit(1)
        )

        def run() -> tuple[tuple[Any, ...] | None, int]:
            with self._db.engine.connect() as conn:
                row = None if few else conn.execute(nth).first()
                if row is not None:
                    return tuple(row), size
                row = conn.execute(last).first()
            return (None, 0) if row is None else (tuple(row[:-1]), int(row[-1]))

        end, rows = self._db.guard(run)
        if end is None or not rows:
            return None
        return end, rows

    def estimate(self, after: KeyTuple | None) -> int | None:
        """The database's own estimate of :meth:`count` ``(after)``, from its statistics:
        the query is planned, not run (the planner may look at the key index's ends).

        PostgreSQL: the planner's rows, from the table's histogram, for a table
        it has analyzed. MySQL and MariaDB: :meth:`_key_share_estimate`. None
        otherwise.
        """
        engine = self._db.engine
        asked = dialect_traits(engine.dialect)
        counted = asked.counted_rows_query(engine.dialect, self._table)
        if counted is not None:
            return self._key_share_estimate(after, counted)
        if not asked.plans_key_ranges:
            return None
        stmt = self._filter(sa.select(*self._order_cols).select_from(self._table), after)
        name = engine.dialect.identifier_preparer.format_table(self._table)

        def run() -> int | None:
            with engine.connect() as conn:
                return asked.planned_rows(conn, stmt, name)

        return self._db.guard(run)

    def _key_share_estimate(
        self, after: KeyTuple | None, rows_stmt: sa.Select[Any]
    ) -> int | None:
        """The table's rows by its statistics (``rows_stmt``: MySQL's
        ``information_schema.TABLES.TABLE_ROWS``) times the share of a single integer key's
        span past ``after``; None for any other key, a ``where:`` or a cursor, and for a
        table without statistics.

        The server's own estimate of a long key range is half the table whatever the
        range, and a count reads every row (InnoDB's clustered index: a 10 M-row count
        took ~4 s of the server's CPU, beside the copy it was counted for). The key's
        ends come from its index, two rows read.
        """
        if len(self._order_cols) != 1 or self._through is not None or (
                self._has_cursor is not None or self._where is not None):  # fmt: skip
            return None
        key = self._order_cols[0]
        ends = sa.select(sa.func.min(key), sa.func.max(key)).select_from(self._table)

        def run() -> int | None:
            with self._db.engine.connect() as conn:
                rows = conn.scalar(rows_stmt)
                low, high = conn.execute(ends).one()
            if not rows or not all(isinstance(v, int) for v in (low, high)):
                return None
            if after is None:
                return int(rows)
            past = after[0]
            if not isinstance(past, int):
                return None
            share = min(1.0, max(0.0, (high - past) / max(1, high - low + 1)))
            return int(rows * share)

        return self._db.guard(run)

    def row_bytes(self, sample: int = 1_000) -> float | None:
        """The table's rows' average width in bytes, as text, over a sample of ``sample`` rows.

        Each value counts as the length of its text (bytes as themselves),
        plus a byte for its separator: about what a row costs on the way
        (a COPY's text, a JDBC row); PostgreSQL measures its rows' record
        text itself (bytes there in hex). The sample is the first rows the
        database finds (no order, no ``where:``): one cheap query. None for
        an empty table.
        """
        engine = self._db.engine
        name = engine.dialect.identifier_preparer.format_table(self._table)
        measured = dialect_traits(engine.dialect).row_width_sql(name, sample)

        def run() -> float | None:
            rows = total = 0
            with engine.connect() as conn:
                if measured is not None:
                    width = conn.exec_driver_sql(measured).scalar()
                    return None if width is None else float(width)
                for row in conn.exec_driver_sql(f"SELECT * FROM {name} LIMIT {int(sample)}"):
                    rows += 1
                    total += sum(_text_bytes(value) + 1 for value in row)
            return total / rows if rows else None

        return self._db.guard(run)

    def count(self, after: KeyTuple | None, through: KeyTuple | None = None) -> int:
        """How many rows are past ``after`` (and not past ``through``, when given).

        Both bounds are compared by the database, in its own order (a text
        key's collation): 0 when ``through`` is not past ``after``.
        """
        stmt = self._filter(sa.select(sa.func.count()).select_from(self._table), after)
        if through is not None:
            dialect = self._db.engine.dialect.name
            stmt = stmt.where(row_compare(self._order_cols, self._typed(through), "<=", dialect))

        def run() -> int:
            with self._db.engine.connect() as conn:
                return int(conn.scalar(stmt) or 0)

        return self._db.guard(run)

    def _typed(self, values: KeyTuple) -> list[Any]:
        """A position as its columns' types (read back from the ledger, a uuid is text)."""
        if not any(isinstance(v, str) for v in values):
            return list(values)  # typed_key parses text only: no types to look up (a reflection)
        if self._types is None:
            names = [c.name for c in self._order_cols]
            self._types = self._db.guard(
                lambda: key_types(self._db.engine, self._table_name, names)
            )
        return typed_key(values, self._types)

    def _filter(self, stmt: sa.Select[Any], after: KeyTuple | None) -> sa.Select[Any]:
        """The rows this source reads: past ``after`` (and not past ``through``), matching
        ``where:``, with a cursor."""
        dialect = self._db.engine.dialect.name
        if after is not None:
            stmt = stmt.where(row_compare(self._order_cols, self._typed(after), ">", dialect))
        if self._through is not None:
            stmt = stmt.where(
                row_compare(self._order_cols, self._typed(self._through), "<=", dialect)
            )
        if self._has_cursor is not None:
            stmt = stmt.where(self._has_cursor)
        if self._where is not None:
            stmt = stmt.where(self._where)
        return stmt


def _text_bytes(value: Any) -> int:
    """About how many bytes ``value`` takes as text."""
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(str(value))
