"""A MySQL or MariaDB table's columns as ``information_schema`` describes them."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.base import Column, Kind
from spark_jobs.engines.mysql.types import rule

_COLUMNS = sa.text(
    """
    SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, EXTRA, NUMERIC_PRECISION,
           NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_MAXIMUM_LENGTH
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE()) AND TABLE_NAME = :table
    ORDER BY ORDINAL_POSITION
    """
)
_JSON_CHECKS = sa.text(
    """
    SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
    WHERE CONSTRAINT_SCHEMA = COALESCE(:schema, DATABASE()) AND TABLE_NAME = :table
    """
)
_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'")


def describe(conn: sa.Connection, schema: str | None, table: str) -> list[Column]:
    """The columns of ``schema.table`` (None: the connection's database); empty when there
    is no such table."""
    params = {"schema": schema, "table": table}
    rows = conn.execute(_COLUMNS, params).all()
    if not rows:
        return []
    checks = " ".join(str(r[0]) for r in conn.execute(_JSON_CHECKS, params).all())
    return [column_of(row, checks) for row in rows]


def column_of(row: Any, checks: str) -> Column:
    """One column of an ``information_schema.COLUMNS`` row (``checks``: the table's check
    clauses, where MariaDB says a ``longtext`` is JSON)."""
    name, data_type, shown = row.COLUMN_NAME, row.DATA_TYPE.lower(), row.COLUMN_TYPE.lower()
    unsigned = " unsigned" in shown
    base = data_type
    if data_type == "tinyint" and shown.startswith("tinyint(1)") and not unsigned:
        base = "bool"
    elif unsigned and data_type in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        base = f"{data_type} unsigned"
    elif data_type == "longtext" and f"json_valid(`{name.lower()}`)" in checks.lower():
        base, shown = "json", "json"
    labels: tuple[str, ...] = ()
    if data_type in ("enum", "set"):
        labels = tuple(m.replace("''", "'").replace("\\\\", "\\")
                       for m in _LABEL.findall(row.COLUMN_TYPE))  # fmt: skip
    extra = (row.EXTRA or "").upper()
    precision = row.NUMERIC_PRECISION if data_type == "decimal" else row.DATETIME_PRECISION
    length = row.CHARACTER_MAXIMUM_LENGTH
    if data_type == "bit":
        length = row.NUMERIC_PRECISION
    column = Column(
        name=name, type=row.COLUMN_TYPE if base != "json" else "json", base=base,
        kind=Kind.OTHER, nullable=row.IS_NULLABLE == "YES", generated="GENERATED" in extra,
        identity="by default" if "AUTO_INCREMENT" in extra else None,
        precision=None if precision is None else int(precision),
        scale=None if row.NUMERIC_SCALE is None else int(row.NUMERIC_SCALE),
        length=None if length is None else int(length), unsigned=unsigned, labels=labels,
    )  # fmt: skip
    return Column(**{**column.__dict__, "kind": rule(column).kind})
