"""A batch from PostgreSQL into a table of the very same types, as stored: the source's
binary COPY into the target's, never parsed (``docs/architecture.md``, "Batch sizes by
default").

Binary COPY of a built-in type into the same type is exact, and the server checks each
value as it takes it. A type the database defines keeps the parsed path: its binary
form may carry its OID (an array's element type), which differs between databases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from spark_jobs.engines.postgresql.binarycopy import quoted
from spark_jobs.engines.postgresql.catalog import describe
from spark_jobs.engines.postgresql.read import Queries, copy_binary


def same_types(
    engine: sa.Engine,
    schema: str | None,
    table: str,
    queries: Any,
    names: Sequence[str],
    built_in: Mapping[str, str] | None = None,
) -> bool:
    """Whether the batch may go from the source's binary COPY into the target's as it comes.

    A PostgreSQL source read natively (``queries``), whose columns are
    ``names`` in that order, each of exactly the type (modifiers included)
    of the target's column (``schema.table``), a built-in type: the binary form of a type the
    database defines (an enum's array, a composite) carries its OID, which
    differs from database to database; and a narrower modifier would round
    what the staged path sets aside. Anything else is parsed and encoded.
    ``built_in``: the target's columns of built-in types and their types, as
    the catalogue described them when the batch's fit was checked (the
    database is asked otherwise): like the fit, remembered until a load into
    the table fails (a column whose type an operator changes during the run
    may be written in the old binary form until then).
    """
    if not isinstance(queries, Queries) or not queries.verbatim or queries.columns is None:
        return False
    if [name for name, _ in queries.columns] != list(names):
        return False
    if built_in is None:
        with engine.connect() as conn:
            columns = describe(conn, schema, table)
        built_in = {c.name: c.type for c in columns if c.built_in}
    return all(built_in.get(name) == shown for name, shown in queries.columns)


def copy_verbatim(
    cursor: Any, table_sql: str, names: Sequence[str], queries: Any,
    tasks: Iterable[pa.RecordBatch], rows: int | None = None,
) -> int:  # fmt: skip
    """The rows of the native read's queries whose numbers ``tasks`` carries, from the
    source's binary COPY into the target's as the server sent them; how many.
    ``rows``: about how many they hold in all (the batch's), None when unknown."""
    import psycopg

    statement = f"COPY {table_sql} ({quoted(*names)}) FROM STDIN (FORMAT binary)"
    total = 0
    for batch in tasks:
        indexes = batch.column(0).to_pylist()
        each = None if rows is None else rows // max(1, len(indexes))
        for index in indexes:
            try:
                with cursor.copy(statement) as copy:
                    for chunk in copy_binary(queries.info, queries.verbatim[index], each):
                        copy.write(chunk)
            except psycopg.Error as error:
                raise sa.exc.DBAPIError.instance(statement, None, error, psycopg.Error) from error
            total += max(cursor.rowcount, 0)
    return total
