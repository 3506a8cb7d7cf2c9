"""A MariaDB or MySQL table's schema objects, read from ``information_schema`` for many tables
at once (a query per kind of object, whatever the number of tables).

Each object's ``definition`` is its line as ``SHOW CREATE TABLE`` prints it
(``UNIQUE KEY `uq_email` (`email`(20))``, ``CONSTRAINT `fk` FOREIGN KEY …``),
its ``body`` the part after its name, which a MariaDB target takes as it is.
MariaDB keeps in a column's attributes what PostgreSQL keeps as objects:
``AUTO_INCREMENT`` (an identity, with the table's counter), ``DEFAULT``,
``ON UPDATE current_timestamp()``, ``COMMENT``. The ``json_valid`` check that
MariaDB adds to a ``JSON`` column is its type's, not an object of its own.
The columns themselves are read too (:attr:`TableObjects.columns`): a
translation needs their kinds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.mysql.catalog import column_of
from spark_jobs.engines.objects import (
    ForeignKey,
    ObjectKind,
    SchemaObject,
    SequenceInfo,
    TableName,
    TableObjects,
)

_WHERE = "TABLE_SCHEMA = :schema AND TABLE_NAME IN :tables"
_COLUMNS = sa.text(
    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, EXTRA, "
    "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_MAXIMUM_LENGTH, "
    "COLUMN_DEFAULT, COLUMN_COMMENT, CHARACTER_SET_NAME, COLLATION_NAME "
    "FROM information_schema.COLUMNS "
    f"WHERE {_WHERE} ORDER BY TABLE_NAME, ORDINAL_POSITION"
).bindparams(sa.bindparam("tables", expanding=True))
_INDEXES = sa.text(
    "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, COLLATION, INDEX_TYPE, "
    "SEQ_IN_INDEX "
    f"FROM information_schema.STATISTICS WHERE {_WHERE}"
).bindparams(sa.bindparam("tables", expanding=True))
_CHECKS = sa.text(
    "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
    "WHERE CONSTRAINT_SCHEMA = :schema AND TABLE_NAME IN :tables "
    "ORDER BY TABLE_NAME, CONSTRAINT_NAME"
).bindparams(sa.bindparam("tables", expanding=True))
_FOREIGN = sa.text(
    "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, "
    "k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE "
    "FROM information_schema.KEY_COLUMN_USAGE k "
    "JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
    "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
    "AND r.TABLE_NAME = k.TABLE_NAME "
    "WHERE k.TABLE_SCHEMA = :schema AND k.TABLE_NAME IN :tables "
    "AND k.REFERENCED_TABLE_NAME IS NOT NULL "
    "ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION"
).bindparams(sa.bindparam("tables", expanding=True))
_TABLES = sa.text(
    "SELECT TABLE_NAME, AUTO_INCREMENT, TABLE_COMMENT FROM information_schema.TABLES "
    f"WHERE {_WHERE}"
).bindparams(sa.bindparam("tables", expanding=True))
_TRIGGERS = sa.text(
    "SELECT EVENT_OBJECT_TABLE AS TABLE_NAME, TRIGGER_NAME, ACTION_TIMING, "
    "EVENT_MANIPULATION, ACTION_STATEMENT FROM information_schema.TRIGGERS "
    "WHERE EVENT_OBJECT_SCHEMA = :schema AND EVENT_OBJECT_TABLE IN :tables "
    "ORDER BY EVENT_OBJECT_TABLE, TRIGGER_NAME"
).bindparams(sa.bindparam("tables", expanding=True))


def quote(name: str) -> str:
    """A MariaDB identifier, quoted."""
    return "`" + name.replace("`", "``") + "`"


def read_objects(
    conn: sa.Connection, tables: Sequence[tuple[str | None, str]]
) -> dict[tuple[str | None, str], TableObjects]:
    """The schema objects of each of ``tables`` (``(database or None, table)``) that exists."""
    here = str(conn.execute(sa.text("SELECT DATABASE()")).scalar())
    by_schema: dict[str, list[tuple[str | None, str]]] = defaultdict(list)
    for schema, table in tables:
        by_schema[schema or here].append((schema, table))
    found: dict[tuple[str | None, str], TableObjects] = {}
    for schema, asked in by_schema.items():
        names = sorted({t for _, t in asked})
        read = _read_schema(conn, schema, names)
        for key in asked:
            if key[1] in read:
                found[key] = read[key[1]]
    return found


def _read_schema(conn: sa.Connection, schema: str, names: list[str]) -> dict[str, TableObjects]:
    params = {"schema": schema, "tables": names}
    checks: dict[str, list[Any]] = defaultdict(list)
    for row in conn.execute(_CHECKS, params):
        checks[row.TABLE_NAME].append(row)
    tables: dict[str, TableObjects] = {}
    sql: dict[tuple[str, str], str] = {}  # each column's whole definition
    for row in conn.execute(_COLUMNS, params):
        objects = tables.setdefault(row.TABLE_NAME, TableObjects((schema, row.TABLE_NAME)))
        clauses = " ".join(str(c.CHECK_CLAUSE) for c in checks[row.TABLE_NAME])
        column = column_of(row, clauses)
        objects.columns[column.name] = column
        sql[(row.TABLE_NAME, column.name)] = column_sql(row)
        _attributes(objects, row, column, sql[(row.TABLE_NAME, column.name)])
    for name, info in ((r.TABLE_NAME, r) for r in conn.execute(_TABLES, params)):
        if name not in tables:
            continue
        _counter(tables[name], info.AUTO_INCREMENT, sql)
        if info.TABLE_COMMENT:
            _add(tables[name], ObjectKind.COMMENT, "", f"COMMENT={_literal(info.TABLE_COMMENT)}")
    _indexes(tables, list(conn.execute(_INDEXES, params)))
    for name, rows in checks.items():
        for row in rows:
            if name in tables and not _type_check(tables[name], row):
                text = f"CONSTRAINT {quote(row.CONSTRAINT_NAME)} CHECK ({row.CHECK_CLAUSE})"
                _add(tables[name], ObjectKind.CHECK, row.CONSTRAINT_NAME, text,
                     body=str(row.CHECK_CLAUSE))  # fmt: skip
    _foreign_keys(tables, list(conn.execute(_FOREIGN, params)))
    for row in conn.execute(_TRIGGERS, params):
        if row.TABLE_NAME in tables:
            text = (f"TRIGGER {quote(row.TRIGGER_NAME)} {row.ACTION_TIMING} "
                    f"{row.EVENT_MANIPULATION} ON {quote(row.TABLE_NAME)} FOR EACH ROW "
                    f"{row.ACTION_STATEMENT}")  # fmt: skip
            _add(tables[row.TABLE_NAME], ObjectKind.TRIGGER, row.TRIGGER_NAME, text, body=text)
    return tables


def _add(objects: TableObjects, kind: ObjectKind, name: str, definition: str,
         columns: tuple[str, ...] = (), **more: Any) -> None:  # fmt: skip
    objects.objects.append(SchemaObject(kind, objects.table, name, definition, columns, **more))


def column_sql(row: Any) -> str:
    """A column's whole definition from its ``information_schema.COLUMNS`` row, as ``SHOW
    CREATE TABLE`` prints it (what ``ALTER TABLE … MODIFY`` takes)."""
    parts = [quote(row.COLUMN_NAME), row.COLUMN_TYPE]
    if row.CHARACTER_SET_NAME:
        parts += [f"CHARACTER SET {row.CHARACTER_SET_NAME}", f"COLLATE {row.COLLATION_NAME}"]
    parts.append("NULL" if row.IS_NULLABLE == "YES" else "NOT NULL")
    extra = (row.EXTRA or "").lower()
    if row.COLUMN_DEFAULT is not None and "auto_increment" not in extra:
        parts.append(f"DEFAULT {row.COLUMN_DEFAULT}")
    if "auto_increment" in extra:
        parts.append("AUTO_INCREMENT")
    if "on update" in extra:
        parts.append(row.EXTRA[extra.index("on update"):].strip().upper().replace(
            "CURRENT_TIMESTAMP", "current_timestamp"))  # fmt: skip
    if row.COLUMN_COMMENT:
        parts.append(f"COMMENT {_literal(row.COLUMN_COMMENT)}")
    return " ".join(parts)


def _attributes(objects: TableObjects, row: Any, column: Any, whole: str) -> None:
    """A column's NOT NULL, DEFAULT, ON UPDATE and COMMENT."""
    name = row.COLUMN_NAME
    extra = (row.EXTRA or "").lower()
    if column.generated:
        return  # its expression is the column's own
    if row.IS_NULLABLE == "NO":
        _add(objects, ObjectKind.NOT_NULL, name, "NOT NULL", (name,))
    default = row.COLUMN_DEFAULT
    if default is not None and default != "NULL" and "auto_increment" not in extra:
        _add(objects, ObjectKind.DEFAULT, name, f"DEFAULT {default}", (name,), body=str(default))
    if "on update" in extra:
        at = extra.index("on update")
        clause = row.EXTRA[at + len("on update"):].strip()
        _add(objects, ObjectKind.ON_UPDATE, name, f"ON UPDATE {clause}", (name,), body=clause,
             column_sql=whole)  # fmt: skip
    if row.COLUMN_COMMENT:
        _add(objects, ObjectKind.COMMENT, name, f"COMMENT {_literal(row.COLUMN_COMMENT)}", (name,),
             column_sql=whole)  # fmt: skip


def _counter(objects: TableObjects, auto_increment: int | None,
             sql: dict[tuple[str, str], str]) -> None:  # fmt: skip
    """The table's AUTO_INCREMENT column, as an identity with the counter's position."""
    for column in objects.columns.values():
        if column.identity:
            last = None if auto_increment is None or auto_increment <= 1 else auto_increment - 1
            info = SequenceInfo(objects.table[0], objects.table[1], "bigint", last_value=last,
                                owned_by=column.name)  # fmt: skip
            _add(objects, ObjectKind.IDENTITY, column.name, "AUTO_INCREMENT", (column.name,),
                 sequence=info, identity="by default",
                 column_sql=sql[(objects.table[1], column.name)])  # fmt: skip


def _indexes(tables: dict[str, TableObjects], rows: list[Any]) -> None:
    # In the order the server lists them, which is the table's (``SHOW CREATE TABLE``'s):
    # a MariaDB target gets them in that order.
    parts: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        parts[(row.TABLE_NAME, row.INDEX_NAME)].append(row)
    for (table, name), columns in parts.items():
        if table not in tables:
            continue
        columns.sort(key=lambda c: int(c.SEQ_IN_INDEX))
        first = columns[0]
        names = tuple(c.COLUMN_NAME for c in columns)
        prefixes = tuple(None if c.SUB_PART is None else int(c.SUB_PART) for c in columns)
        descending = tuple(c.COLLATION == "D" for c in columns)
        body = "(" + ",".join(
            quote(c.COLUMN_NAME) + (f"({c.SUB_PART})" if c.SUB_PART is not None else "")
            + (" DESC" if c.COLLATION == "D" else "") for c in columns) + ")"  # fmt: skip
        method = first.INDEX_TYPE.upper() if first.INDEX_TYPE.upper() in (
            "FULLTEXT", "SPATIAL") else ""  # fmt: skip
        if name == "PRIMARY":
            kind, text = ObjectKind.PRIMARY_KEY, f"PRIMARY KEY {body}"
        elif not int(first.NON_UNIQUE):
            kind, text = ObjectKind.UNIQUE, f"UNIQUE KEY {quote(name)} {body}"
        else:
            kind = ObjectKind.INDEX
            text = f"{method + ' ' if method else ''}KEY {quote(name)} {body}"
        _add(tables[table], kind, name, text, names, body=body,
             unique=kind != ObjectKind.INDEX, method=method, prefixes=prefixes,
             descending=descending)  # fmt: skip


def _foreign_keys(tables: dict[str, TableObjects], rows: list[Any]) -> None:
    keys: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        keys[(row.TABLE_NAME, row.CONSTRAINT_NAME)].append(row)
    for (table, name), columns in keys.items():
        if table not in tables:
            continue
        first = columns[0]
        mine = tuple(c.COLUMN_NAME for c in columns)
        theirs = tuple(c.REFERENCED_COLUMN_NAME for c in columns)
        parent: TableName = (first.REFERENCED_TABLE_SCHEMA, first.REFERENCED_TABLE_NAME)
        foreign = ForeignKey(parent, theirs, first.UPDATE_RULE, first.DELETE_RULE)
        text = (f"CONSTRAINT {quote(name)} FOREIGN KEY ({','.join(map(quote, mine))}) "
                f"REFERENCES {quote(parent[1])} ({','.join(map(quote, theirs))}) "
                f"ON DELETE {first.DELETE_RULE} ON UPDATE {first.UPDATE_RULE}")  # fmt: skip
        _add(tables[table], ObjectKind.FOREIGN_KEY, name, text, mine,
             body=text.split(" ", 2)[2], foreign=foreign)  # fmt: skip


def _type_check(objects: TableObjects, row: Any) -> bool:
    """Whether a check is the one MariaDB gives a ``JSON`` column (its type's, not an object)."""
    column = objects.columns.get(row.CONSTRAINT_NAME)
    return column is not None and column.base == "json" and str(row.CHECK_CLAUSE).lower() == (
        f"json_valid({quote(column.name).lower()})")  # fmt: skip


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
