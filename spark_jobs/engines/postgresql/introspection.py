"""A PostgreSQL table's schema objects, read from the server's catalog as pg_dump reads them.

:func:`read_objects` reads many tables at once (a query per kind of object,
whatever the number of tables: a database of 1,000 tables is read in a few
round trips): their indexes (``pg_get_indexdef``), constraints
(``pg_get_constraintdef``), NOT NULL columns, defaults (``pg_get_expr``),
the sequences their columns draw from and their identity columns (with the
numbers of each sequence and its last value), their comments, and their
triggers (``pg_get_triggerdef``, with the function each calls). Each object's
``body`` is the part of the server's text that a PostgreSQL target takes as
it is: an index's ``USING btree (email)``, a constraint's definition, a
default's expression.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from spark_jobs.engines.objects import (
    ForeignKey,
    ObjectKind,
    SchemaObject,
    SequenceInfo,
    TableName,
    TableObjects,
)
from spark_jobs.engines.postgresql.catalog import relation

_RELATIONS = sa.text(
    """
    SELECT r.name, c.oid, n.nspname, c.relname,
           quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS qualified
    FROM unnest(CAST(:names AS text[])) AS r(name)
    JOIN pg_class c ON c.oid = to_regclass(r.name)
    JOIN pg_namespace n ON n.oid = c.relnamespace
    """
)
_COLUMNS = sa.text(
    """
    SELECT attrelid AS rel, attnum, attname, attnotnull, attidentity
    FROM pg_attribute
    WHERE attrelid = ANY(:oids) AND attnum > 0 AND NOT attisdropped
    ORDER BY attrelid, attnum
    """
)
_CONSTRAINTS = sa.text(
    """
    SELECT con.conrelid AS rel, con.conname, con.contype,
           pg_get_constraintdef(con.oid) AS definition,
           con.condeferrable, con.condeferred, con.convalidated,
           CASE WHEN con.contype IN ('p', 'u') THEN pg_get_indexdef(con.conindid) END AS indexdef,
           fn.nspname AS fschema, fc.relname AS ftable,
           con.confupdtype, con.confdeltype, con.confmatchtype,
           ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(n, o)
                 JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n
                 ORDER BY k.o) AS cols,
           ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(n, o)
                 JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n
                 ORDER BY k.o) AS fcols
    FROM pg_constraint con
    LEFT JOIN pg_class fc ON fc.oid = con.confrelid
    LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
    WHERE con.conrelid = ANY(:oids) AND con.contype IN ('p', 'u', 'c', 'f', 'x')
    ORDER BY con.conrelid, con.contype, con.conname
    """
)
_INDEXES = sa.text(
    """
    SELECT i.indrelid AS rel, ic.relname, pg_get_indexdef(i.indexrelid) AS definition,
           i.indisunique,
           ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY AS k(n, o)
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
                 ORDER BY k.o) AS cols,
           i.indexprs IS NULL AND i.indpred IS NULL AND am.amname = 'btree'
             AND i.indnkeyatts = i.indnatts AS plain,
           ARRAY(SELECT (o & 1) = 1 FROM unnest(i.indoption::int2[]) AS o) AS descending
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_am am ON am.oid = ic.relam
    WHERE i.indrelid = ANY(:oids)
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid
                      AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x'))
    ORDER BY i.indrelid, ic.relname
    """
)
_DEFAULTS = sa.text(
    """
    SELECT d.adrelid AS rel, a.attname, pg_get_expr(d.adbin, d.adrelid) AS expr
    FROM pg_attrdef d
    JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = ANY(:oids) AND a.attgenerated = '' AND NOT a.attisdropped
    ORDER BY d.adrelid, d.adnum
    """
)
# A column's sequences: the one it owns (serial, deptype 'a'), its identity's ('i'), and any
# its default draws from (the default depends on it, 'n').
_SEQUENCES = sa.text(
    """
    SELECT dep.rel, a.attname, dep.how, sc.oid::regclass::text AS shown,
           sn.nspname, sc.relname, format_type(s.seqtypid, NULL) AS type,
           s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle
    FROM (
        SELECT d.refobjid AS rel, d.refobjsubid AS attnum, d.objid AS seq,
               CASE d.deptype WHEN 'i' THEN 'identity' ELSE 'owned' END AS how
        FROM pg_depend d
        WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.refobjid = ANY(:oids) AND d.deptype IN ('a', 'i')
        UNION
        SELECT ad.adrelid, ad.adnum, d.refobjid, 'default'
        FROM pg_depend d JOIN pg_attrdef ad ON ad.oid = d.objid
        WHERE d.classid = 'pg_attrdef'::regclass AND d.refclassid = 'pg_class'::regclass
          AND ad.adrelid = ANY(:oids)
    ) dep
    JOIN pg_class sc ON sc.oid = dep.seq AND sc.relkind = 'S'
    JOIN pg_namespace sn ON sn.oid = sc.relnamespace
    JOIN pg_sequence s ON s.seqrelid = sc.oid
    JOIN pg_attribute a ON a.attrelid = dep.rel AND a.attnum = dep.attnum
    ORDER BY dep.rel, dep.attnum
    """
)
_COMMENTS = sa.text(
    """
    SELECT d.objoid AS rel, a.attname, d.description
    FROM pg_description d
    LEFT JOIN pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid
    WHERE d.classoid = 'pg_class'::regclass AND d.objoid = ANY(:oids)
    ORDER BY d.objoid, d.objsubid
    """
)
_TRIGGERS = sa.text(
    """
    SELECT t.tgrelid AS rel, t.tgname, pg_get_triggerdef(t.oid) AS definition,
           pn.nspname IN ('pg_catalog', 'information_schema') AS builtin,
           CASE WHEN pn.nspname NOT IN ('pg_catalog', 'information_schema')
                THEN pg_get_functiondef(p.oid) END AS function
    FROM pg_trigger t
    JOIN pg_proc p ON p.oid = t.tgfoid
    JOIN pg_namespace pn ON pn.oid = p.pronamespace
    WHERE t.tgrelid = ANY(:oids) AND NOT t.tgisinternal
    ORDER BY t.tgrelid, t.tgname
    """
)
# The extensions whose members a table, its columns' types, indexes (operator classes),
# constraints, defaults or triggers depend on.
_EXTENSIONS = sa.text(
    """
    WITH objs AS (
        SELECT 'pg_class'::regclass AS classid, c.oid AS objid, c.oid AS rel
        FROM pg_class c WHERE c.oid = ANY(:oids)
        UNION ALL SELECT 'pg_class'::regclass, i.indexrelid, i.indrelid
        FROM pg_index i WHERE i.indrelid = ANY(:oids)
        UNION ALL SELECT 'pg_constraint'::regclass, oid, conrelid
        FROM pg_constraint WHERE conrelid = ANY(:oids)
        UNION ALL SELECT 'pg_attrdef'::regclass, oid, adrelid
        FROM pg_attrdef WHERE adrelid = ANY(:oids)
        UNION ALL SELECT 'pg_trigger'::regclass, oid, tgrelid
        FROM pg_trigger WHERE tgrelid = ANY(:oids) AND NOT tgisinternal
    )
    SELECT DISTINCT o.rel, e.extname
    FROM objs o
    JOIN pg_depend d ON d.classid = o.classid AND d.objid = o.objid
    JOIN pg_depend x ON x.classid = d.refclassid AND x.objid = d.refobjid
         AND x.refclassid = 'pg_extension'::regclass AND x.deptype = 'e'
    JOIN pg_extension e ON e.oid = x.refobjid
    ORDER BY o.rel, e.extname
    """
)

_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


def has_unique_key(conn: sa.Connection, schema: str | None, table: str,
                   key: Iterable[str]) -> bool:  # fmt: skip
    """Whether ``table`` has a primary key or a unique index (whole, on plain columns) on
    exactly the columns ``key``: what an upsert's conflict target needs."""
    return bool(conn.execute(_UNIQUE_KEY, {"rel": relation(schema, table),
                                           "key": sorted(key)}).scalar())  # fmt: skip


_UNIQUE_KEY = sa.text(
    """
    SELECT EXISTS (
        SELECT 1 FROM pg_index i
        WHERE i.indrelid = to_regclass(:rel) AND i.indisunique AND i.indpred IS NULL
          AND i.indexprs IS NULL
          AND ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = i.indrelid
                    AND a.attnum = ANY(i.indkey) ORDER BY a.attname COLLATE "C")
              = CAST(:key AS text[]))
    """
)


def read_objects(
    conn: sa.Connection, tables: Sequence[tuple[str | None, str]]
) -> dict[tuple[str | None, str], TableObjects]:
    """The schema objects of each of ``tables`` (``(schema or None, table)``); a table that
    does not exist is left out."""
    found = conn.execute(_RELATIONS, {"names": [relation(s, t) for s, t in tables]}).all()
    by_name = {relation(s, t): (s, t) for s, t in tables}
    rels: dict[int, _Rel] = {}
    for name, oid, schema, table, qualified in found:
        rels[oid] = _Rel(by_name[name], (schema, table), qualified)
    if not rels:
        return {}
    oids = {"oids": sorted(rels)}
    for row in conn.execute(_EXTENSIONS, oids):
        rels[row.rel].add(ObjectKind.EXTENSION, row.extname, f"EXTENSION {row.extname}")
    for row in conn.execute(_COLUMNS, oids):
        rels[row.rel].columns[row.attnum] = row.attname
        if row.attidentity:
            rels[row.rel].identity[row.attname] = "always" if row.attidentity == "a" else (
                "by default")
        if row.attnotnull:
            rels[row.rel].add(ObjectKind.NOT_NULL, row.attname, "NOT NULL", (row.attname,))
    _constraints(rels, conn.execute(_CONSTRAINTS, oids).all())
    for row in conn.execute(_INDEXES, oids):
        rel = rels[row.rel]
        rel.add(ObjectKind.INDEX, row.relname, row.definition, tuple(row.cols),
                body=_index_body(row.definition, rel.qualified), unique=row.indisunique,
                method="btree" if row.plain else "", descending=tuple(row.descending))  # fmt: skip
    sequences = _sequences(conn.execute(_SEQUENCES, oids).all())
    for row in conn.execute(_DEFAULTS, oids):
        rels[row.rel].add(ObjectKind.DEFAULT, row.attname, f"DEFAULT {row.expr}",
                          (row.attname,), body=row.expr)  # fmt: skip
    for (oid, column), (how, info) in sequences.items():
        kind = ObjectKind.IDENTITY if how == "identity" else ObjectKind.SEQUENCE
        identity = rels[oid].identity.get(column) if how == "identity" else None
        text = (f"GENERATED {identity.upper()} AS IDENTITY" if identity
                else f"SEQUENCE {info.schema}.{info.name}")  # fmt: skip
        rels[oid].add(kind, column, text, (column,), sequence=info, identity=identity)
    for row in conn.execute(_COMMENTS, oids):
        rels[row.rel].add(ObjectKind.COMMENT, row.attname or "", row.description,
                          (row.attname,) if row.attname else ())  # fmt: skip
    for row in conn.execute(_TRIGGERS, oids):
        rel = rels[row.rel]
        body = row.definition.replace(f" ON {rel.qualified} ", " ON {table} ", 1)
        rel.add(ObjectKind.TRIGGER, row.tgname, row.definition, body=body,
                note="" if row.builtin else (row.function or ""))  # fmt: skip
    return {rel.asked: TableObjects(rel.name, rel.objects) for rel in rels.values()}


class _Rel:
    """One table's objects as they are read."""

    def __init__(self, asked: tuple[str | None, str], name: TableName, qualified: str) -> None:
        self.asked = asked
        self.name = name
        self.qualified = qualified  # as the server prints it in a definition
        self.columns: dict[int, str] = {}
        self.identity: dict[str, str] = {}
        self.objects: list[SchemaObject] = []

    def add(self, kind: ObjectKind, name: str, definition: str,
            columns: tuple[str, ...] = (), **more: Any) -> None:  # fmt: skip
        self.objects.append(SchemaObject(kind, self.name, name, definition, columns, **more))


def _constraints(rels: dict[int, _Rel], rows: Iterable[Any]) -> None:
    kinds = {"p": ObjectKind.PRIMARY_KEY, "u": ObjectKind.UNIQUE, "c": ObjectKind.CHECK,
             "f": ObjectKind.FOREIGN_KEY, "x": ObjectKind.EXCLUSION}  # fmt: skip
    for row in rows:
        rel = rels[row.rel]
        kind = kinds[row.contype]
        body = row.definition.removesuffix(" NOT VALID")
        if row.indexdef is not None:
            body = _index_body(row.indexdef, rel.qualified)
        foreign = None
        if kind == ObjectKind.FOREIGN_KEY:
            foreign = ForeignKey(
                (row.fschema, row.ftable), tuple(row.fcols), _ACTIONS[row.confupdtype],
                _ACTIONS[row.confdeltype], row.confmatchtype == "f",
            )  # fmt: skip
        rel.add(kind, row.conname, row.definition, tuple(row.cols), body=body,
                unique=kind in (ObjectKind.PRIMARY_KEY, ObjectKind.UNIQUE),
                deferrable=row.condeferrable, deferred=row.condeferred,
                validated=row.convalidated, foreign=foreign)  # fmt: skip


def _sequences(rows: Iterable[Any]) -> dict[tuple[int, str], tuple[str, SequenceInfo]]:
    """Per (table, column): how it draws from its sequence (identity, owned, default) and
    the sequence; an identity wins over the rest, an owned sequence over a default's."""
    rank = {"identity": 0, "owned": 1, "default": 2}
    found: dict[tuple[int, str], tuple[str, SequenceInfo]] = {}
    for row in rows:
        info = SequenceInfo(
            row.nspname, row.relname, row.type, row.seqstart, row.seqincrement, row.seqmin,
            row.seqmax, row.seqcache, row.seqcycle, owned_by=row.attname if row.how != "default"
            else None, shown=row.shown,
        )  # fmt: skip
        key = (row.rel, row.attname)
        if key not in found or rank[row.how] < rank[found[key][0]]:
            if key in found and found[key][0] == "owned" and row.how == "default":
                continue
            found[key] = (row.how, info)
    return found


def _index_body(definition: str, qualified: str) -> str:
    """What follows ``ON schema.table`` in ``pg_get_indexdef``'s text: ``USING btree (…)…``."""
    for marker in (f" ON ONLY {qualified} ", f" ON {qualified} "):
        at = definition.find(marker)
        if at >= 0:
            return definition[at + len(marker):]
    raise ValueError(f"unexpected index definition: {definition}")
