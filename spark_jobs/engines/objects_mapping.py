"""The docs' table of schema objects from MariaDB into PostgreSQL, made by the translation
itself (``python -m spark_jobs.engines.objects_mapping`` prints it; ``make docs`` puts it in
docs/reference/schema-objects.md).

Each row is an object of a sample MariaDB table as ``SHOW CREATE TABLE`` prints
it, what PostgreSQL gets for it and when it is built, or why it is refused.
"""

from __future__ import annotations

from spark_jobs.engines.base import Column, Kind
from spark_jobs.engines.mysql.to_postgresql import translate_objects
from spark_jobs.engines.objects import (
    ForeignKey,
    ObjectKind,
    Placement,
    SchemaObject,
    SequenceInfo,
    TableObjects,
)

_TABLE = ("shop", "orders")


def _object(kind: ObjectKind, name: str, definition: str, columns: tuple[str, ...] = (),
            **more: object) -> SchemaObject:  # fmt: skip
    return SchemaObject(kind, _TABLE, name, definition, columns, **more)  # type: ignore[arg-type]


def _sample() -> TableObjects:
    columns = {
        "id": Column("id", "bigint", "bigint", Kind.INT, nullable=False, identity="by default"),
        "email": Column("email", "varchar(120)", "varchar", Kind.TEXT, length=120),
        "note": Column("note", "text", "text", Kind.TEXT),
        "placed_at": Column("placed_at", "datetime(6)", "datetime", Kind.TIMESTAMP),
        "changed_at": Column("changed_at", "timestamp(6)", "timestamp", Kind.TIMESTAMPTZ),
        "paid": Column("paid", "tinyint(1)", "bool", Kind.BOOL),
        "qty": Column("qty", "int(11)", "int", Kind.INT),
        "shipped_on": Column("shipped_on", "date", "date", Kind.DATE),
    }
    o = ObjectKind
    objects = [
        _object(o.IDENTITY, "id", "AUTO_INCREMENT", ("id",), identity="by default",
                sequence=SequenceInfo("shop", "orders", last_value=41)),
        _object(o.NOT_NULL, "email", "NOT NULL", ("email",)),
        _object(o.NOT_NULL, "placed_at", "NOT NULL", ("placed_at",)),
        _object(o.DEFAULT, "qty", "DEFAULT 1", ("qty",), body="1"),
        _object(o.DEFAULT, "paid", "DEFAULT 0", ("paid",), body="0"),
        _object(o.DEFAULT, "placed_at", "DEFAULT current_timestamp(6)", ("placed_at",),
                body="current_timestamp(6)"),
        _object(o.DEFAULT, "changed_at", "DEFAULT current_timestamp(6)", ("changed_at",),
                body="current_timestamp(6)"),
        _object(o.DEFAULT, "shipped_on", "DEFAULT '0000-00-00'", ("shipped_on",),
                body="'0000-00-00'"),
        _object(o.ON_UPDATE, "changed_at", "ON UPDATE current_timestamp(6)", ("changed_at",),
                body="current_timestamp(6)"),
        _object(o.UNIQUE, "email_key", "UNIQUE KEY `email_key` (`email`)", ("email",),
                unique=True, prefixes=(None,), descending=(False,)),
        _object(o.UNIQUE, "email_start", "UNIQUE KEY `email_start` (`email`(10))", ("email",),
                unique=True, prefixes=(10,), descending=(False,)),
        _object(o.INDEX, "placed_idx", "KEY `placed_idx` (`qty`,`placed_at` DESC)",
                ("qty", "placed_at"), prefixes=(None, None), descending=(False, True)),
        _object(o.INDEX, "email_idx", "KEY `email_idx` (`email`(10))", ("email",),
                prefixes=(10,), descending=(False,)),
        _object(o.INDEX, "note_idx", "KEY `note_idx` (`note`(10))", ("note",), prefixes=(10,),
                descending=(False,)),
        _object(o.INDEX, "note_text", "FULLTEXT KEY `note_text` (`note`)", ("note",),
                method="FULLTEXT", prefixes=(None,), descending=(False,)),
        _object(o.FOREIGN_KEY, "orders_customer_fk", "CONSTRAINT `orders_customer_fk` FOREIGN "
                "KEY (`qty`) REFERENCES `customers` (`id`) ON DELETE CASCADE ON UPDATE RESTRICT",
                ("qty",), foreign=ForeignKey(("shop", "customers"), ("id",), "RESTRICT",
                                             "CASCADE")),
        _object(o.CHECK, "qty_check", "CONSTRAINT `qty_check` CHECK (`qty` >= 0)",
                body="`qty` >= 0"),
        _object(o.CHECK, "email_check", "CONSTRAINT `email_check` CHECK "
                "(char_length(`email`) > 3 and `email` like '%@%')",
                body="char_length(`email`) > 3 and `email` like '%@%'"),
        _object(o.CHECK, "half_check", "CONSTRAINT `half_check` CHECK (`qty` / 2 < 10)",
                body="`qty` / 2 < 10"),
        _object(o.COMMENT, "", "COMMENT='what customers bought'"),
        _object(o.TRIGGER, "orders_audit", "TRIGGER `orders_audit` AFTER UPDATE ON `orders` "
                "FOR EACH ROW INSERT INTO audit …"),
    ]
    return TableObjects(_TABLE, objects, columns)


def objects_table() -> str:
    """The MariaDB → PostgreSQL objects as a Markdown table."""
    lines = ["| MariaDB (`SHOW CREATE TABLE`) | PostgreSQL | built |", "|---|---|---|"]
    placement = Placement(("public", "orders"), {("shop", "customers"): ("public", "customers")})
    attributes = (ObjectKind.NOT_NULL, ObjectKind.DEFAULT, ObjectKind.IDENTITY,
                  ObjectKind.ON_UPDATE)  # fmt: skip
    for item in translate_objects(_sample(), placement):
        shown = item.source.definition.replace("|", "\\|")
        if item.source.kind in attributes:
            shown = f"`{item.source.name}` {shown}"
        shown = f"`` {shown} ``"
        if item.problem is not None:
            lines.append(f"| {shown} | refused: {item.problem} | |")
            continue
        becomes = item.becomes.replace("|", "\\|").replace('"public".', "")
        lines.append(f"| {shown} | {becomes} | {item.stage} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(objects_table())
