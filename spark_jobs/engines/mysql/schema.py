"""MariaDB's schema editor: a MariaDB source table's objects in a MariaDB target, as ``SHOW
CREATE TABLE`` prints them; and the counters (``AUTO_INCREMENT``) at the cutover.

Indexes and checks are added with ``ALTER TABLE … ADD`` after the table's load,
foreign keys once both tables are loaded (MariaDB checks the rows as it adds
one), triggers at the cutover. What MariaDB keeps in a column's definition
(``AUTO_INCREMENT``, ``ON UPDATE``, ``COMMENT``) is set by ``MODIFY`` with the
source's whole column definition; a default alone by ``ALTER COLUMN … SET
DEFAULT``. :func:`signature` is how ``information_schema`` shows an object,
names aside.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import sqlalchemy as sa

from spark_jobs.engines.mysql.introspection import quote
from spark_jobs.engines.objects import (
    ObjectKind,
    Placement,
    Planned,
    SchemaObject,
    SchemaProblem,
    Stage,
    TableName,
    TableObjects,
)

_LITERAL_START = ("'", "-", "b'", "0x")


def qualified(name: TableName | tuple[str | None, str]) -> str:
    """```schema`.`table``` (```table``` when the schema is None)."""
    schema, table = name
    return f"{quote(schema)}.{quote(table)}" if schema else quote(table)


def signature(obj: SchemaObject, refers_to: TableName | None = None) -> Hashable:
    """How ``information_schema`` shows ``obj`` of a MariaDB table, names aside."""
    kind = obj.kind
    if kind in (ObjectKind.INDEX, ObjectKind.UNIQUE):
        return ObjectKind.INDEX, obj.unique, obj.method, obj.columns, obj.prefixes, obj.descending
    if kind == ObjectKind.PRIMARY_KEY:
        return kind, obj.columns
    if kind == ObjectKind.CHECK:
        return kind, obj.body
    if kind == ObjectKind.FOREIGN_KEY:
        assert obj.foreign is not None
        fk = obj.foreign
        return kind, obj.columns, refers_to or fk.refers_to, fk.columns, fk.on_update, fk.on_delete
    if kind in (ObjectKind.DEFAULT, ObjectKind.ON_UPDATE):
        return kind, obj.name, obj.body
    if kind == ObjectKind.COMMENT:
        return kind, obj.name, obj.definition
    return kind, obj.name


def plan_same(objects: TableObjects, placement: Placement) -> list[Planned]:
    """Each object of a MariaDB source table, built in the target as the source prints it."""
    table = qualified(placement.table)
    planned = []
    for obj in objects.objects:
        try:
            planned.append(_plan(obj, table, placement))
        except SchemaProblem as problem:
            planned.append(Planned(obj, Stage.LOADED, problem=str(problem)))
    return planned


def _plan(obj: SchemaObject, table: str, placement: Placement) -> Planned:
    kind, same = obj.kind, "as on the source"
    if kind in (ObjectKind.NOT_NULL, ObjectKind.PRIMARY_KEY):
        return Planned(obj, Stage.CREATE, (), same, signature(obj))
    if kind in (ObjectKind.INDEX, ObjectKind.UNIQUE):
        word = {"FULLTEXT": "FULLTEXT ", "SPATIAL": "SPATIAL "}.get(obj.method, "")
        unique = "UNIQUE " if kind == ObjectKind.UNIQUE else ""
        statement = f"ALTER TABLE {table} ADD {unique}{word}INDEX {quote(obj.name)} {obj.body}"
        # A unique one waits for the cutover: MariaDB's ON DUPLICATE KEY UPDATE updates the
        # row that holds any unique value of the incoming one, so a later pass's upsert of
        # a row whose unique value moved would overwrite another row.
        stage = Stage.CUTOVER if kind == ObjectKind.UNIQUE else Stage.LOADED
        return Planned(obj, stage, (statement,), same, signature(obj))
    if kind == ObjectKind.CHECK:
        statement = f"ALTER TABLE {table} ADD CONSTRAINT {quote(obj.name)} CHECK ({obj.body})"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.FOREIGN_KEY:
        assert obj.foreign is not None
        fk = obj.foreign
        parent = placement.target_of(fk.refers_to)
        statement = (f"ALTER TABLE {table} ADD CONSTRAINT {quote(obj.name)} FOREIGN KEY "
                     f"({', '.join(map(quote, obj.columns))}) REFERENCES {qualified(parent)} "
                     f"({', '.join(map(quote, fk.columns))}) ON DELETE {fk.on_delete} "
                     f"ON UPDATE {fk.on_update}")  # fmt: skip
        streamed = obj.table in placement.streamed or fk.refers_to in placement.streamed
        return Planned(obj, Stage.CUTOVER if streamed else Stage.PARENTS, (statement,), same,
                       signature(obj, parent))  # fmt: skip
    if kind == ObjectKind.DEFAULT:
        value = obj.body if obj.body.startswith(_LITERAL_START) or obj.body[:1].isdigit() else (
            f"({obj.body})")  # fmt: skip
        statement = f"ALTER TABLE {table} ALTER COLUMN {quote(obj.name)} SET DEFAULT {value}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind in (ObjectKind.IDENTITY, ObjectKind.ON_UPDATE) or (
            kind == ObjectKind.COMMENT and obj.name):  # fmt: skip
        statement = f"ALTER TABLE {table} MODIFY {obj.column_sql}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.COMMENT:
        statement = f"ALTER TABLE {table} {obj.definition}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.TRIGGER:
        body = obj.body.replace(f" ON {quote(obj.table[1])} ", f" ON {table} ", 1)
        return Planned(obj, Stage.CUTOVER, (f"CREATE {body}",), same, signature(obj))
    raise SchemaProblem(f"a {kind} has no MariaDB form")


def positions(conn: sa.Connection, objects: Sequence[SchemaObject]) -> list[int | None]:
    """Each ``AUTO_INCREMENT`` column's last value handed out (None: none yet), read now."""
    found: list[int | None] = []
    for obj in objects:
        schema, table = obj.table
        counter = conn.execute(sa.text(
            "SELECT AUTO_INCREMENT FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = :s AND TABLE_NAME = :t"),
            {"s": schema, "t": table}).scalar()  # fmt: skip
        found.append(None if counter is None or int(counter) <= 1 else int(counter) - 1)
    return found


def set_after(conn: sa.Connection, table: TableName, obj: SchemaObject,
              position: int | None) -> str:  # fmt: skip
    """Set ``table``'s ``AUTO_INCREMENT`` after ``position`` and the column's largest value
    (MariaDB never sets it below the largest)."""
    largest = conn.execute(sa.text(
        f"SELECT max({quote(obj.name)}) FROM {qualified(table)}")).scalar()  # fmt: skip
    following = max([int(v) + 1 for v in (position, largest) if v is not None], default=1)
    conn.execute(sa.text(f"ALTER TABLE {qualified(table)} AUTO_INCREMENT = {following}"))
    return f"AUTO_INCREMENT: next value {following} (source's last {position}, largest {largest})"
