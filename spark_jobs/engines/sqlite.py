"""SQLite as a target: the type (its affinity) each other engine's column gets in a table
sluice creates, and what changes.

SQLite keeps a value of any type in any column; its declared type only says how a
value is converted on its way in (the column's affinity). So a value that another
engine prints as text and SQLite has no type for goes into a ``TEXT`` column as that
text, unchanged: decimals (a ``NUMERIC`` column would make a double of 0.1, losing
digits), dates and timestamps (ISO text, SQLite's own convention), uuids, JSON,
intervals, arrays. Integers, floating point and bytes keep theirs; a boolean is 0/1.

SQLite as a source is read by Spark's JDBC reader as before (its date-time columns as
timestamps, see :mod:`spark_jobs.read.extract`); it is not in the catalogue's readers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from pyspark.sql import types as T
from sqlalchemy.dialects import sqlite

from spark_jobs.engines.base import Column, Engine, Kind, Mapped, TypeRule, UnsupportedColumn
from spark_jobs.engines.upserts import on_conflict

_KEPT_AS_TEXT = "kept as its text"
_ALL_BITS = "kept as its text: every bit a digit (bit(8) 1 is 00000001)"

FROM_KIND: dict[Kind, Callable[[Column], Mapped]] = {
    Kind.BOOL: lambda c: Mapped("BOOLEAN", "true/false as 1/0"),
    Kind.INT: lambda c: Mapped("INTEGER"),
    Kind.UINT: lambda c: Mapped("INTEGER" if c.base != "bigint unsigned" else "TEXT",
                                "" if c.base != "bigint unsigned" else
                                "kept as its text: past 2^63 is no SQLite integer"),  # fmt: skip
    Kind.YEAR: lambda c: Mapped("INTEGER"),
    Kind.FLOAT: lambda c: Mapped("REAL", "NaN and infinities are rejected rows (SQLite would "
                                 "store NULL); -0 becomes 0"),
    Kind.DECIMAL: lambda c: Mapped("TEXT", "kept as its text: NUMERIC would make it a double"),
    Kind.MONEY: lambda c: Mapped("TEXT", _KEPT_AS_TEXT),
    Kind.BYTES: lambda c: Mapped("BLOB"),
    Kind.BIT: lambda c: Mapped("TEXT", _ALL_BITS),
    Kind.TEXT: lambda c: Mapped("TEXT"),
    Kind.CHAR: lambda c: Mapped("TEXT"),
}


class SQLite(Engine):
    """SQLite 3, as a target."""

    name = "sqlite"
    label = "SQLite"
    one_writer = True
    file_database = True
    jdbc_driver = "org.sqlite.JDBC"
    keeps_nan = False
    floats_staged_as_text = True
    decimals_staged_as_text = True
    spark_types_mapped = False
    integer_bits = 64  # every SQLite INTEGER is 8 bytes, whatever the declared name

    def jdbc_read_type(self, column_type: Any, stored: bool = False) -> str | None:
        # SQLite keeps a DATETIME or TIMESTAMP column as text, which its JDBC driver
        # declares as a date: read as Spark guesses, the time of day would be lost. An
        # INTEGER column holds 64 bits, which the driver declares as a 32-bit integer: read
        # as Spark guesses, 2^31 and past would wrap. As stored, a BOOLEAN column is the
        # number it holds (a MySQL tinyint(1) 5 is 5, not true).
        if isinstance(column_type, sa.DateTime):
            return "TIMESTAMP_NTZ"
        if isinstance(column_type, sa.Integer) or (stored and isinstance(column_type, sa.Boolean)):
            return "BIGINT"
        return None

    def readonly_engine(self, url: sa.URL) -> sa.Engine | None:
        # mode=ro while a -wal file exists (a daemon may be writing; its companions
        # already exist), else immutable=1, which reads the file as it is without
        # creating -wal/-shm files beside it; None for a file that does not exist.
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return sa.create_engine(url)
        path = Path(database)
        if not path.is_file():
            return None
        flag = {"mode": "ro"} if Path(f"{database}-wal").exists() else {"immutable": "1"}
        uri = sa.URL.create("sqlite", database=f"file:{quote(str(path.resolve()))}",
                            query={**flag, "uri": "true"})
        return sa.create_engine(uri)

    def take_row(
        self, conn: Any, table: Any, values: dict[str, Any], key: str, unchanged: str,
        returned: Sequence[str],
    ) -> Any:  # fmt: skip
        # BEGIN IMMEDIATE (config.sqlite) already holds the database's write lock.
        conn.execute(sqlite.insert(table).values(values).on_conflict_do_nothing())
        query = sa.select(*[table.c[c] for c in returned]).where(table.c[key] == values[key])
        return conn.execute(query).one()

    def upsert_rows(
        self, table: Any, names: Sequence[str], rows: Any, key: Sequence[str],
        updates: Sequence[str], cursor: str | None, overriding: bool = False,
    ) -> Any:  # fmt: skip
        statement = sqlite.insert(table).from_select(names, rows)
        return on_conflict(statement, table, key, updates, cursor)

    def rule(self, column: Column) -> TypeRule:
        return TypeRule(column.kind)

    def target_type(self, column: Column, source: Engine) -> Mapped:
        mapper = FROM_KIND.get(column.kind)
        mapped = mapper(column) if mapper is not None else Mapped("TEXT", _KEPT_AS_TEXT)
        return source.leaving(column, mapped, self)

    def spark_type(self, data_type: T.DataType, name: str, key: bool = False) -> str:
        for spark, sql in _SPARK:
            if isinstance(data_type, spark):
                return sql
        raise UnsupportedColumn(
            f"column {name!r} has Spark type {data_type.simpleString()}, which sluice cannot "
            "create in a SQLite table; convert it with columns: (for example to_json(...))"
        )

    def describe(self, conn: Any, schema: str | None, table: str) -> list[Column]:
        return []  # a SQLite target is checked by its declared types (jdbc_tables)


_SPARK: tuple[tuple[type, str], ...] = (
    (T.BooleanType, "BOOLEAN"),
    (T.ByteType, "INTEGER"),
    (T.ShortType, "INTEGER"),
    (T.IntegerType, "INTEGER"),
    (T.LongType, "INTEGER"),
    (T.FloatType, "REAL"),
    (T.DoubleType, "REAL"),
    (T.DecimalType, "TEXT"),
    (T.StringType, "TEXT"),
    (T.NullType, "TEXT"),
    (T.BinaryType, "BLOB"),
    (T.DateType, "DATE"),
    (T.TimestampNTZType, "DATETIME"),
    (T.TimestampType, "DATETIME"),
)

ENGINE = SQLite()
