"""MySQL and MariaDB: their catalogue (:mod:`.types`) and their tables (:mod:`.catalog`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from pyspark.sql import types as T
from sqlalchemy.dialects import mysql

from spark_jobs.engines.base import Column, Engine, Kind, Mapped, TypeRule
from spark_jobs.engines.bulk import BulkLoad
from spark_jobs.engines.mysql import catalog, introspection, schema, types
from spark_jobs.engines.mysql.sessions import MySQLSessions
from spark_jobs.engines.objects import Placement, Planned, SchemaObject, TableName, TableObjects
from spark_jobs.engines.upserts import on_duplicate_key


class MySQL(MySQLSessions, Engine):
    """MySQL 8 and MariaDB 10.5 and later (MariaDB's own types where it has them)."""

    name = "mysql"
    label = "MySQL/MariaDB"
    parallel_indexes = False
    # MariaDB Connector/J serves MySQL and MariaDB; the jdbc:mysql: prefix is what makes
    # Spark pick its MySQL dialect (quoting, type mapping), and Connector/J 2.7 accepts
    # it (checked on Debian 12's 2.7.6).
    jdbc_driver = "org.mariadb.jdbc.Driver"
    jdbc_port = 3306
    # TINYINT(1) would otherwise read as a boolean and turn 5 into true. It must be in
    # the URL: given as a property, Connector/J 2.7 ignores it when Spark reads with
    # predicates (checked with Spark 4.3). Not a secret.
    jdbc_url_options = "?tinyInt1isBit=false"
    bounded_keys = True
    floats_staged_as_text = True
    row_values_indexed = False

    def rule(self, column: Column) -> TypeRule:
        return types.rule(column)

    def target_type(self, column: Column, source: Engine) -> Mapped:
        if source.name == self.name:
            return Mapped(column.type)
        return source.leaving(column, types.from_kind(column), self)

    def spark_type(self, data_type: T.DataType, name: str, key: bool = False) -> str:
        return types.spark_type(data_type, name, key)

    def describe(self, conn: sa.Connection, schema: str | None, table: str) -> list[Column]:
        return catalog.describe(conn, schema, table)

    def kind_of_type(self, type_sql: str) -> Kind:
        return types.kind_of_type(type_sql)

    def cast_sql(self, target: Column, staged: str, source: Kind | None = None) -> str | None:
        if target.base == "bit" and not _numeric(staged):
            return "CAST(CONV({}, 2, 10) AS UNSIGNED)"  # a bit string's digits
        return None  # MySQL converts the rest on its way into the column

    def key_type(self, mapped: str) -> str:
        lowered = mapped.lower()
        if lowered in ("longtext", "text", "mediumtext", "json"):
            return "varchar(255)"
        if lowered in ("longblob", "blob", "mediumblob"):
            return "varbinary(255)"
        return mapped

    def leaving(self, column: Column, mapped: Mapped, target: Engine) -> Mapped:
        if column.kind in (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
            note = ("zero dates (0000-00-00) become NULL, counted per column (summary, status, "
                    "metrics)")
            return Mapped(mapped.type, "; ".join(p for p in (mapped.change, note) if p))
        return mapped

    def zero_dates_into(self, target: str, kind: Kind | None) -> bool:
        return target != self.name and kind in (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ)

    @contextmanager
    def lock_wait(self, conn: sa.Connection, seconds: int) -> Iterator[None]:
        conn.exec_driver_sql(f"SET SESSION lock_wait_timeout = {seconds}")
        try:
            yield
        finally:  # the connection goes back to the pool
            conn.exec_driver_sql("SET SESSION lock_wait_timeout = DEFAULT")

    native_reads_in_pieces = True

    def connect_args(self, url: sa.URL) -> dict[str, Any]:
        # PyMySQL connections may LOAD DATA LOCAL once sluice serves its streams
        # (load_data), which it does instead of any local file.
        if url.get_driver_name() == "pymysql":
            # pyarrow: only where a MySQL target is written
            from spark_jobs.engines.mysql import load_data

            if load_data.install():
                return {"local_infile": True}
        return {}

    def bulk_load(self, engine: sa.Engine) -> BulkLoad | None:
        from spark_jobs.engines.mysql.load_data import LOAD_DATA, load_capable

        return LOAD_DATA if load_capable(engine) else None

    def reads_natively(self, as_text: bool = False) -> bool:
        if as_text:
            return False
        try:  # ConnectorX, where installed (sluice[mysql]): else Spark's JDBC reader reads
            import connectorx  # noqa: F401
        except ImportError:
            return False
        return True

    def native_queries(
        self, url: str, table_sql: str, columns: Sequence[Column], reads: Sequence[str],
        names: Sequence[str], schema: Any, where: Sequence[str | tuple[str, ...]],
        as_text: bool, finish: tuple[str, str] | None,
    ) -> Any:  # fmt: skip
        from spark_jobs.engines.mysql.read import queries

        return queries(url, table_sql, columns, reads, names, schema, where, finish)

    def table_sums(self, url: str, query: str, connect: Callable[[str], Any]) -> Any:
        from spark_jobs.engines.mysql.sums import table_sums

        return table_sums(connect(url), query)

    def estimated_rows(self, conn: sa.Connection, table: str) -> float | None:
        schema, _, name = table.rpartition(".")
        query = ("SELECT table_rows FROM information_schema.tables "
                 "WHERE table_schema = COALESCE(:s, DATABASE()) AND table_name = :t")  # fmt: skip
        found = conn.scalar(sa.text(query), {"s": schema or None, "t": name})
        return None if found is None else float(found)

    def take_row(
        self, conn: sa.Connection, table: sa.Table, values: dict[str, Any], key: str,
        unchanged: str, returned: Sequence[str],
    ) -> Any:  # fmt: skip
        insert = mysql.insert(table).values(values)
        conn.execute(insert.on_duplicate_key_update({unchanged: table.c[unchanged]}))  # no change
        query = sa.select(*[table.c[c] for c in returned]).where(table.c[key] == values[key])
        return conn.execute(query.with_for_update()).one()

    def upsert_rows(
        self, table: sa.TableClause, names: Sequence[str], rows: sa.Select[Any],
        key: Sequence[str], updates: Sequence[str], cursor: str | None, overriding: bool = False,
    ) -> Any:  # fmt: skip
        return on_duplicate_key(table, names, rows, updates, cursor)

    def insert_ignoring(self, table: sa.Table) -> sa.Insert:
        return table.insert().prefix_with("IGNORE")

    def default_schema(self, conn: sa.Connection) -> str:
        return str(conn.execute(sa.text("SELECT DATABASE()")).scalar_one())

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

    def translate_objects(
        self, objects: TableObjects, target: Engine, placement: Placement
    ) -> list[Planned]:
        if target.name != "postgresql":
            return super().translate_objects(objects, target, placement)
        from spark_jobs.engines.mysql.to_postgresql import translate_objects

        return translate_objects(objects, placement)

    def signature(self, obj: SchemaObject, refers_to: TableName | None = None) -> Hashable:
        return schema.signature(obj, refers_to)

    def sequence_positions(
        self, conn: sa.Connection, objects: Sequence[SchemaObject]
    ) -> list[int | None]:
        return schema.positions(conn, objects)

    def set_sequence(self, conn: sa.Connection, table: TableName, obj: SchemaObject,
                     position: int | None) -> str:  # fmt: skip
        return schema.set_after(conn, table, obj, position)


ENGINE = MySQL()


def _numeric(sql_type: str) -> bool:
    lowered = sql_type.lower()
    return any(w in lowered for w in ("int", "decimal", "numeric", "bool", "double", "float"))
