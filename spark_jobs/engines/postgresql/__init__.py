"""PostgreSQL: its catalogue (:mod:`.types`), its tables (:mod:`.catalog`), its reads
(:mod:`.read`) and its text COPY format (:mod:`.textcopy`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from pyspark.sql import types as T
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as insert_pg

from spark_jobs.engines.base import Column, Engine, Kind, Mapped, TypeRule
from spark_jobs.engines.bulk import BulkLoad
from spark_jobs.engines.objects import Placement, Planned, SchemaObject, TableName, TableObjects
from spark_jobs.engines.postgresql import catalog, introspection, schema, sequences, types
from spark_jobs.engines.postgresql.insert import insert
from spark_jobs.engines.postgresql.sessions import PostgreSQLSessions
from spark_jobs.engines.upserts import on_conflict

_NUMBERS = frozenset({Kind.INT, Kind.UINT, Kind.DECIMAL, Kind.FLOAT, Kind.MONEY, Kind.BOOL})


class PostgreSQL(PostgreSQLSessions, Engine):
    """PostgreSQL 12 and later."""

    name = "postgresql"
    label = "PostgreSQL"

    def rule(self, column: Column) -> TypeRule:
        return types.rule(column)

    def target_type(self, column: Column, source: Engine) -> Mapped:
        if source.name == self.name:
            return Mapped(column.type)  # the source's own type, user types created first
        return source.leaving(column, types.from_kind(column), self)

    def spark_type(self, data_type: T.DataType, name: str, key: bool = False) -> str:
        return types.spark_type(data_type, name)

    def read_sql(self, column: Column, quoted: str, target: str | None = None) -> str:
        if target == "mysql" and column.kind == Kind.TIMESTAMPTZ:
            # In UTC (the session's) without the "+00" MySQL's datetime does not parse.
            text = f"{quoted}::text"
            return f"CASE WHEN {text} LIKE '%+00' THEN left({text}, -3) ELSE {text} END"
        return super().read_sql(column, quoted, target)

    def kind_of_type(self, type_sql: str) -> Kind:
        return types.kind_of_type(type_sql)

    def cast_sql(self, target: Column, staged: str, source: Kind | None = None) -> str | None:
        if staged.lower() == target.type.lower():
            return None
        if source in (Kind.DECIMAL, Kind.MONEY) and target.kind != Kind.DECIMAL:
            # A decimal's text into an integer (or a float): as a number, not as text.
            return f"CAST(CAST({{}} AS numeric) AS {target.type})"
        if staged.lower() in ("text", "varchar"):
            if target.base in ("text", "varchar", "bpchar", "name", "char"):
                return None  # an explicit cast to varchar(n) would cut; INSERT refuses
            return f"CAST({{}} AS {target.type})"
        if source in _NUMBERS and target.kind in _NUMBERS - {Kind.BOOL}:
            return f"CAST({{}} AS {target.type})"  # what would round is set aside before
        # Through its text, as COPY takes every value: smallint has no cast to boolean.
        return f"CAST(CAST({{}} AS text) AS {target.type})"

    def describe(self, conn: sa.Connection, schema: str | None, table: str) -> list[Column]:
        return catalog.describe(conn, schema, table)

    def describe_many(
        self, conn: sa.Connection, tables: Sequence[tuple[str | None, str]]
    ) -> dict[tuple[str | None, str], list[Column]]:
        return catalog.describe_many(conn, tables)

    def prepare_types(self, conn: sa.Connection, columns: Sequence[Column]) -> None:
        catalog.create_user_types(conn, columns)

    def create_enum(
        self, conn: sa.Connection, schema: str | None, name: str, labels: Sequence[str]
    ) -> str:
        return catalog.create_enum(conn, schema, name, labels)

    def row_estimates(self, conn: sa.Connection, tables: Sequence[str]) -> dict[str, float]:
        # As the planner counts: the rows per page the statistics saw, times the pages the
        # table has now (a table loaded since it was analyzed is not taken for small). A
        # table never analyzed, or one with no storage of its own, has no estimate.
        names = {catalog.relation(*(t.rsplit(".", 1) if "." in t else (None, t))): t
                 for t in tables}  # fmt: skip
        found = conn.execute(sa.text(
            "SELECT t.name, CASE WHEN c.relpages > 0 THEN c.reltuples / c.relpages "
            "  * (pg_relation_size(c.oid) / current_setting('block_size')::int) "
            "  WHEN pg_relation_size(c.oid) = 0 THEN 0 END "
            "FROM unnest(CAST(:names AS text[])) AS t(name) "
            "JOIN pg_class c ON c.oid = to_regclass(t.name) "
            "WHERE c.reltuples >= 0 AND c.relkind IN ('r', 'm')"),
            {"names": list(names)},
        ).all()  # fmt: skip
        return {names[name]: float(rows) for name, rows in found if rows is not None}

    def default_schema(self, conn: sa.Connection) -> str:
        return str(conn.execute(sa.text("SELECT current_schema()")).scalar_one())

    describes_plain_types = True
    jdbc_driver = "org.postgresql.Driver"
    jdbc_port = 5432
    # Spark runs each read query once; pgjdbc sends it unnamed and in text until the
    # fifth execution, so every row's timestamps and numerics would be parsed from text.
    # -1 prepares it on the server at once and takes the rows in binary: 18% less CPU
    # for a 1 M-row read (checked with Spark 4.3, pgjdbc 42.5). Only honoured in the URL.
    jdbc_read_options = "prepareThreshold=-1"
    jdbc_url_properties = ("sslmode",)
    tables_made_in_transaction = True
    staging_prefixes = ("UNLOGGED",)
    jdbc_write_options = (("reWriteBatchedInserts", "true"),)
    booleans_are_numbers = False
    named_enums = True
    applies_change_streams = True
    shares_snapshots = True

    @contextmanager
    def lock_wait(self, conn: sa.Connection, seconds: int) -> Iterator[None]:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{seconds}s'")
        yield

    def build_settings(self, memory: str) -> tuple[str, ...]:
        # A build waits for the imports writing into the table, not for ever; an index
        # of 10 M rows sorts in memory, not in temporary files (the server's 64 MB default).
        return ("SET LOCAL lock_timeout = '10min'", f"SET LOCAL maintenance_work_mem = '{memory}'")

    def reads_natively(self, as_text: bool = False) -> bool:
        try:
            import psycopg  # noqa: F401 - an optional driver (sluice[postgres])
        except ImportError:
            return False
        return True

    def native_queries(
        self, url: str, table_sql: str, columns: Sequence[Column], reads: Sequence[str],
        names: Sequence[str], schema: Any, where: Sequence[str | tuple[str, ...]],
        as_text: bool, finish: tuple[str, str] | None,
    ) -> Any:  # fmt: skip
        from spark_jobs.engines.postgresql.read import queries

        return queries(url, table_sql, columns, reads, names, schema, where, as_text)

    hashes_records = True

    def record_sums_sql(self, table_sql: str, values: Sequence[str], where: str) -> str:
        from spark_jobs.engines.postgresql.sums import sums_sql

        return sums_sql(table_sql, values, where)

    def table_sums(self, url: str, query: str, connect: Callable[[str], Any]) -> Any:
        from spark_jobs.engines.postgresql.read import conninfo
        from spark_jobs.engines.postgresql.sums import table_sums

        return table_sums(conninfo(url), query)

    def estimated_rows(self, conn: sa.Connection, table: str) -> float | None:
        query = "SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"
        found = conn.scalar(sa.text(query), {"t": table})
        return None if found is None else float(found)

    def compared_number_type(self, floating: bool) -> str:
        return "numeric"

    plain_insert_first = True
    upsert_counts_rows = True

    def bulk_load(self, engine: sa.Engine) -> BulkLoad | None:
        if engine.dialect.driver != "psycopg":
            return None  # psycopg 3's cursors COPY; psycopg2's are written by Spark's JDBC
        from spark_jobs.engines.postgresql.copyin import COPY

        return COPY

    def take_row(
        self, conn: sa.Connection, table: sa.Table, values: dict[str, Any], key: str,
        unchanged: str, returned: Sequence[str],
    ) -> Any:  # fmt: skip
        # One statement: a row there already is locked by the no-op update and returned
        # as it is (a second taker waits here for the first's transaction to end).
        upsert = postgresql.insert(table).values(values)
        return conn.execute(
            upsert.on_conflict_do_update(index_elements=[table.c[key]],
                                         set_={unchanged: table.c[unchanged]})
            .returning(*[table.c[c] for c in returned])
        ).one()  # fmt: skip

    def upsert_rows(
        self, table: sa.TableClause, names: Sequence[str], rows: sa.Select[Any],
        key: Sequence[str], updates: Sequence[str], cursor: str | None, overriding: bool = False,
    ) -> Any:  # fmt: skip
        statement = insert(table, overriding).from_select(names, rows)
        return on_conflict(statement, table, key, updates, cursor)

    def insert_ignoring(self, table: sa.Table) -> sa.Insert:
        return insert_pg(table).on_conflict_do_nothing()

    def has_unique_key(self, engine: sa.Engine, schema: str | None, table: str,
                       key: Sequence[str]) -> bool:  # fmt: skip
        with engine.connect() as conn:  # three reflections took ~50 ms a table
            return introspection.has_unique_key(conn, schema, table, key)

    def read_objects(
        self, conn: sa.Connection, tables: Sequence[tuple[str | None, str]]
    ) -> dict[tuple[str | None, str], TableObjects]:
        return introspection.read_objects(conn, tables)

    def plan_objects(
        self, objects: TableObjects, source: Engine, placement: Placement
    ) -> list[Planned]:
        if source.name == self.name:
            return schema.plan_same(objects, placement)
        return source.translate_objects(objects, self, placement)

    def signature(self, obj: SchemaObject, refers_to: TableName | None = None) -> Hashable:
        return schema.signature(obj, refers_to)

    def name_taken(self, conn: sa.Connection, schema: str, name: str, table: str) -> bool:
        return bool(conn.execute(sa.text(
            "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = "
            "c.relnamespace LEFT JOIN pg_index i ON i.indexrelid = c.oid WHERE n.nspname = "
            ":schema AND c.relname = :name AND (i.indrelid IS NULL OR i.indrelid IS DISTINCT "
            "FROM to_regclass(format('%I.%I', CAST(:schema AS text), CAST(:table AS text)))))"),
            {"schema": schema, "name": name, "table": table}).scalar())  # fmt: skip

    def key_after_load(self, name: str | None, table: TableName,
                       columns: Sequence[str]) -> tuple[str, ...]:  # fmt: skip
        return schema.key_after_load(name, table, columns)

    def sequence_positions(
        self, conn: sa.Connection, objects: Sequence[SchemaObject]
    ) -> list[int | None]:
        return sequences.positions(conn, objects)

    def set_sequence(self, conn: sa.Connection, table: TableName, obj: SchemaObject,
                     position: int | None) -> str:  # fmt: skip
        return sequences.set_after(conn, table, obj, position)


ENGINE = PostgreSQL()
