"""A PostgreSQL table's columns as the server's catalog describes them, and the types
(enums, domains) a target sluice creates needs first.

:func:`describe` reads ``pg_attribute`` and ``pg_type``: each column's type
as DDL writes it (``format_type``; a type the database defines, qualified
by its schema), whether it is generated or an identity, and what it is
made of (a domain's base type, an array's element type, an enum's labels,
a domain's checks). :func:`create_user_types` creates those types in a
target database before its table, in the order they depend on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.base import Column, Kind, UserType
from spark_jobs.engines.postgresql.types import kind_of

FIRST_NORMAL_OID = 16384
"""PostgreSQL's first OID of an object a database defines (``FirstNormalObjectId``): a
type below it is built in, the same in every database, and so is its binary form."""

_MAX_NAME = 63
"""PostgreSQL's identifiers are cut past 63 bytes (NAMEDATALEN - 1)."""

_COLUMNS = sa.text(
    """
    SELECT t.rel, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
           a.attgenerated <> '' AS generated, a.attidentity,
           format_type(a.atttypid, a.atttypmod) AS shown
    FROM unnest(CAST(:rels AS text[])) AS t(rel)
    JOIN pg_attribute a ON a.attrelid = to_regclass(t.rel)
    WHERE a.attnum > 0 AND NOT a.attisdropped
    ORDER BY t.rel, a.attnum
    """
)
_TYPES = sa.text(
    """
    SELECT t.oid, t.typname, t.typtype, t.typbasetype, t.typtypmod, t.typelem, t.typcategory,
           t.typnotnull, t.typdefault, n.nspname,
           format_type(t.typbasetype, t.typtypmod) AS base_shown,
           n.nspname IN ('pg_catalog', 'information_schema') AS builtin
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE t.oid = ANY(:oids)
    """
)
_LABELS = sa.text(
    "SELECT enumtypid, enumlabel FROM pg_enum WHERE enumtypid = ANY(:oids) "
    "ORDER BY enumtypid, enumsortorder"
)
_CHECKS = sa.text(
    "SELECT contypid, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE contypid = ANY(:oids) AND contype = 'c' ORDER BY contypid, conname"
)


def quote(name: str) -> str:
    """A PostgreSQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def relation(schema: str | None, table: str) -> str:
    """``schema.table`` (or ``table`` on the search path), quoted as ``to_regclass`` reads it."""
    return f"{quote(schema)}.{quote(table)}" if schema else quote(table)


def describe(conn: sa.Connection, schema: str | None, table: str) -> list[Column]:
    """The columns of ``schema.table`` (None: the search path's) in their order; empty when
    there is no such table."""
    return describe_many(conn, [(schema, table)]).get((schema, table), [])


def describe_many(
    conn: sa.Connection, tables: Sequence[tuple[str | None, str]]
) -> dict[tuple[str | None, str], list[Column]]:
    """:func:`describe` of each of ``tables`` that exists, in two or three queries whatever
    their number (a group of small tables described each on its own paid a round trip and a
    type look-up a table)."""
    rels = {relation(schema, table): (schema, table) for schema, table in tables}
    rows = conn.execute(_COLUMNS, {"rels": list(rels)}).all()
    if not rows:
        return {}
    types = _Types(conn)
    types.load({row.atttypid for row in rows})
    found: dict[tuple[str | None, str], list[Column]] = {}
    for row in rows:
        found.setdefault(rels[row.rel], []).append(types.column(row))
    return found


class _Types:
    """``pg_type`` rows of the types a table's columns use, and of what those are made of."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.rows: dict[int, Any] = {}
        self.labels: dict[int, list[str]] = {}
        self.checks: dict[int, list[str]] = {}

    def load(self, oids: set[int]) -> None:
        wanted = set(oids)
        while wanted:
            found = self.conn.execute(_TYPES, {"oids": sorted(wanted)}).all()
            self.rows.update({row.oid: row for row in found})
            wanted = {
                nxt for row in found for nxt in (row.typbasetype, row.typelem)
                if nxt and nxt not in self.rows
            }  # fmt: skip
        enums = [oid for oid, row in self.rows.items() if row.typtype == "e"]
        domains = [oid for oid, row in self.rows.items() if row.typtype == "d"]
        for oid, label in self.conn.execute(_LABELS, {"oids": enums}).all() if enums else ():
            self.labels.setdefault(oid, []).append(label)
        for oid, check in self.conn.execute(_CHECKS, {"oids": domains}).all() if domains else ():
            self.checks.setdefault(oid, []).append(check)

    def column(self, row: Any) -> Column:
        oid, typmod, dims = row.atttypid, row.atttypmod, 0
        made_of: list[UserType] = []
        shown = self._ddl(oid, row.shown)
        element: str | None = None
        while True:
            t = self.rows[oid]
            if t.typtype == "d":
                made_of.append(self._user_type(t))
                oid, typmod = t.typbasetype, t.typtypmod
                continue
            if t.typcategory == "A" and t.typelem:
                dims += 1
                oid = t.typelem
                continue
            break
        t = self.rows[oid]
        base, kind = kind_of(t.typname, t.typtype)
        if t.typtype == "e":
            made_of.append(self._user_type(t))
        if dims:
            element, base, kind = base, "array", Kind.ARRAY
        precision, scale, length = _modifiers(t.typname, typmod)
        return Column(
            name=row.attname, type=shown, base=base, kind=kind, nullable=not row.attnotnull,
            generated=bool(row.generated),
            identity={"a": "always", "d": "by default"}.get(row.attidentity or ""),
            precision=precision, scale=scale, length=length, element=element,
            labels=tuple(self.labels.get(oid, ())), user_types=tuple(reversed(made_of)),
            dims=dims, built_in=row.atttypid < FIRST_NORMAL_OID,
        )  # fmt: skip

    def _ddl(self, oid: int, shown: str) -> str:
        """The column's type as DDL in another database: types the database defines are
        named with their schema; built-in ones as ``format_type`` shows them."""
        t = self.rows[oid]
        suffix = ""
        while t.typcategory == "A" and t.typelem and t.typtype != "d":
            suffix += "[]"
            t = self.rows[t.typelem]
        if t.builtin:
            return shown
        return f"{quote(t.nspname)}.{quote(t.typname)}{suffix}"

    def _user_type(self, t: Any) -> UserType:
        if t.typtype == "e":
            return UserType(t.nspname, t.typname, "enum", tuple(self.labels.get(t.oid, ())))
        return UserType(
            t.nspname, t.typname, "domain", base=self._ddl(t.typbasetype, t.base_shown),
            checks=tuple(self.checks.get(t.oid, ())), not_null=bool(t.typnotnull),
            default=t.typdefault,
        )  # fmt: skip


def _modifiers(typname: str, typmod: int) -> tuple[int | None, int | None, int | None]:
    """(precision, scale, length) of a type modifier; None where the type has none."""
    if typmod is None or typmod < 0:
        return None, None, None
    if typname == "numeric":
        value = typmod - 4
        return (value >> 16) & 0xFFFF, value & 0xFFFF, None
    if typname in ("varchar", "bpchar"):
        return None, None, typmod - 4
    if typname in ("bit", "varbit"):
        return None, None, typmod
    if typname in ("timestamp", "timestamptz", "time", "timetz"):
        return typmod, None, None
    return None, None, None


def generation_expressions(conn: sa.Connection, schema: str | None, table: str) -> dict[str, str]:
    """Each stored generated column of ``table`` → its expression, as ``pg_get_expr`` prints
    it (what ``GENERATED ALWAYS AS (…) STORED`` takes)."""
    rel = f"{quote(schema)}.{quote(table)}" if schema else quote(table)
    found = conn.execute(sa.text(
        "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
        "JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = to_regclass(:rel) AND a.attgenerated = 's'"), {"rel": rel})  # fmt: skip
    return {name: expression for name, expression in found}


def create_user_types(conn: sa.Connection, columns: Sequence[Column]) -> None:
    """Create the enums and domains ``columns`` use, unless they exist, dependencies first.

    Two imports creating the same type at once: one wins, the other finds it.
    """
    seen: set[tuple[str, str]] = set()
    for column in columns:
        for user_type in column.user_types:
            ident = (user_type.schema, user_type.name)
            if ident in seen:
                continue
            seen.add(ident)
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {quote(user_type.schema)}"))
            conn.execute(sa.text(_guarded(_create_sql(user_type))))


def create_enum(conn: sa.Connection, schema: str | None, name: str, labels: Sequence[str]) -> str:
    """Create the enum type ``name`` of ``labels`` unless it exists; return it as DDL (in
    ``schema``, or the first schema of the search path)."""
    name = name.encode()[:_MAX_NAME].decode(errors="ignore")
    if schema is None:
        schema = conn.execute(sa.text("SELECT current_schema()")).scalar_one()
    conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}"))
    conn.execute(sa.text(_guarded(_create_sql(UserType(schema, name, "enum", tuple(labels))))))
    return f"{quote(schema)}.{quote(name)}"


def _create_sql(user_type: UserType) -> str:
    name = f"{quote(user_type.schema)}.{quote(user_type.name)}"
    if user_type.kind == "enum":
        labels = ", ".join(_literal(label) for label in user_type.labels)
        return f"CREATE TYPE {name} AS ENUM ({labels})"
    parts = [f"CREATE DOMAIN {name} AS {user_type.base}"]
    if user_type.default is not None:
        parts.append(f"DEFAULT {user_type.default}")
    if user_type.not_null:
        parts.append("NOT NULL")
    parts += user_type.checks
    return " ".join(parts)


def _guarded(statement: str) -> str:
    """``statement`` as a block that does nothing when the type exists already."""
    tag, n = "$sluice$", 0
    while tag in statement:  # a label holding the quote's tag: another tag
        n += 1
        tag = f"$sluice{n}$"
    return f"DO {tag} BEGIN {statement}; EXCEPTION WHEN duplicate_object THEN NULL; END {tag}"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
