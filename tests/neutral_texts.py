"""Each row's neutral texts as a server prints them in SQL (:mod:`spark_jobs.engines.neutral_sql`),
column by column: where two tables' row sums differ, these say which value did."""

from __future__ import annotations

from typing import Any

import psycopg
import sqlalchemy as sa

from spark_jobs.common.jdbc import dialect_name
from spark_jobs.engines import engine_of, neutral_sql
from spark_jobs.engines.mysql.sums import SESSION as MYSQL_SESSION
from spark_jobs.engines.postgresql.read import conninfo
from spark_jobs.engines.postgresql.sums import OPTIONS
from spark_jobs.read.read_sql import table_columns


def provable_columns(url: str, table: str) -> set[str]:
    """The lower-case names of ``table``'s columns whose neutral form SQL prints."""
    return {c.name.lower() for c in table_columns(url, table) if neutral_sql.provable(c)}


def neutral_texts(url: str, table: str, key: str, other: str,
                  names: set[str]) -> dict[str, dict[str, str | None]]:  # fmt: skip
    """``{key's neutral text: {column: neutral text}}`` of ``names`` (lower case) in
    ``table`` at ``url``, as the servers' sums hash them against engine ``other``."""
    dialect = neutral_sql.DIALECTS[dialect_name(url)]
    engine = engine_of(url)
    quote = sa.create_engine(url).dialect.identifier_preparer.quote
    columns = {c.name.lower(): c for c in table_columns(url, table)}
    wanted = [key.lower(), *sorted(names)]
    exprs = []
    for name in wanted:
        column = columns[name]
        found = neutral_sql.neutral_sql(
            dialect, column, engine.text_sql(column, quote(column.name)), other
        )
        assert found is not None, name
        exprs.append(found)
    query = f"SELECT {', '.join(exprs)} FROM {table}"
    rows: list[Any]
    if dialect is neutral_sql.POSTGRESQL:
        with psycopg.connect(conninfo(url), options=OPTIONS) as conn:
            rows = conn.execute(query).fetchall()
    else:
        with sa.create_engine(url, poolclass=sa.pool.NullPool).connect() as conn:
            conn.exec_driver_sql(MYSQL_SESSION)
            rows = list(conn.exec_driver_sql(query.replace("%", "%%")))
    return {row[0]: dict(zip(wanted[1:], row[1:], strict=True)) for row in rows}


def differing(source: str, target: str, table: str, key: str = "id") -> dict[str, set[str]]:
    """The keys of rows on both sides whose neutral texts differ, by column (of the columns
    provable on both sides)."""
    names = provable_columns(source, table) & provable_columns(target, table)
    names.discard(key)
    mine = neutral_texts(source, table, key, dialect_name(target), names)
    theirs = neutral_texts(target, table, key, dialect_name(source), names)
    found: dict[str, set[str]] = {}
    for row_key in mine.keys() & theirs.keys():
        for name in names:
            if mine[row_key][name] != theirs[row_key][name]:
                found.setdefault(name, set()).add(row_key)
    return found
