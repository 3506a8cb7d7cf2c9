"""MySQL and MariaDB: their catalogue (:mod:`.types`) and their tables (:mod:`.catalog`)."""

from __future__ import annotations

import sqlalchemy as sa
from pyspark.sql import types as T

from spark_jobs.engines.base import Column, Engine, Kind, Mapped, TypeRule
from spark_jobs.engines.mysql import catalog, types


class MySQL(Engine):
    """MySQL 8 and MariaDB 10.5 and later (MariaDB's own types where it has them)."""

    name = "mysql"
    label = "MySQL/MariaDB"

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


ENGINE = MySQL()


def _numeric(sql_type: str) -> bool:
    lowered = sql_type.lower()
    return any(w in lowered for w in ("int", "decimal", "numeric", "bool", "double", "float"))
