"""PostgreSQL's schema editor: the SQL that builds a source table's objects in a PostgreSQL
target, one template per kind of object (as Django's ``DatabaseSchemaEditor`` keeps them).

From a PostgreSQL source every object is built as the source's server prints it
(``pg_get_indexdef``, ``pg_get_constraintdef``, ``pg_get_expr``: pg_dump's
round trip), in the order pg_restore builds them: sequences, defaults and
identity, then indexes (in parallel), then unique constraints on their
indexes (``USING INDEX``, so that building one does not lock the table for
the others), checks (``NOT VALID``, then ``VALIDATE``), exclusion
constraints, comments; foreign keys once both tables are loaded (``NOT
VALID``, then ``VALIDATE``); triggers at the cutover (their functions with
them), so that the final pass's upserts fire none. From another engine, the
source engine translates (:mod:`spark_jobs.engines.mysql.to_postgresql`).

:func:`signature` is how a target's own catalogue shows an object: what the
comparison of a target with its source goes by (names aside: an index the
operator made under another name counts).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace

from spark_jobs.engines.objects import (
    ObjectKind,
    Placement,
    Planned,
    SchemaObject,
    SequenceInfo,
    Stage,
    TableName,
    TableObjects,
)
from spark_jobs.engines.postgresql.catalog import quote

_NEXTVAL = re.compile(r"nextval\('((?:[^']|'')+)'::regclass\)")
# In pg_get_constraintdef's text: a name before "(" (a call, or SQL's own syntax), not a
# type's modifiers (::numeric(12,2)).
_CALL = re.compile(r'(?<![:\w"])([a-z_][a-z0-9_$]*|"[^"]+")\s*\(', re.IGNORECASE)
_SYNTAX = {"check", "and", "or", "not", "in", "any", "all", "some", "array", "between", "is",
           "like", "ilike", "similar", "when", "then", "else", "case", "distinct"}  # fmt: skip
_TEXT_LITERAL = re.compile(r"'(?:[^']|'')*'::(?:text|character varying|character|bpchar|name)\b")


def qualified(name: TableName | tuple[str | None, str]) -> str:
    """``"schema"."table"`` (``"table"`` when the schema is None)."""
    schema, table = name
    return f"{quote(schema)}.{quote(table)}" if schema else quote(table)


def literal(text: str) -> str:
    """``text`` as a string literal."""
    return "'" + text.replace("'", "''") + "'"


def signature(obj: SchemaObject, refers_to: TableName | None = None) -> Hashable:
    """How ``obj`` of a PostgreSQL table shows in the catalogue, names aside; a foreign key's
    parent is ``refers_to`` (its own, by default)."""
    kind = obj.kind
    if kind in (ObjectKind.NOT_NULL, ObjectKind.SEQUENCE, ObjectKind.EXTENSION):
        return kind, obj.name
    if kind == ObjectKind.DEFAULT:
        return kind, obj.name, _NEXTVAL.sub(lambda m: f"nextval({_bare(m.group(1))})", obj.body)
    if kind == ObjectKind.IDENTITY:
        return kind, obj.name, obj.identity
    if kind == ObjectKind.PRIMARY_KEY:
        return kind, obj.columns
    if kind == ObjectKind.INDEX and obj.method == "btree":
        # Plain columns: by structure, so that an index another engine's translation made
        # (named and spelt its own way) is recognised.
        return kind, obj.unique, obj.columns, obj.descending or (False,) * len(obj.columns)
    if kind == ObjectKind.INDEX:
        return kind, obj.unique, obj.body
    if kind in (ObjectKind.UNIQUE, ObjectKind.EXCLUSION):
        return kind, obj.body, obj.deferrable, obj.deferred
    if kind == ObjectKind.CHECK:
        return kind, obj.body
    if kind == ObjectKind.FOREIGN_KEY:
        assert obj.foreign is not None
        fk = obj.foreign
        return (kind, obj.columns, refers_to or fk.refers_to, fk.columns, fk.on_update,
                fk.on_delete, fk.match_full, obj.deferrable, obj.deferred)  # fmt: skip
    if kind == ObjectKind.COMMENT:
        return kind, obj.name, obj.definition
    return ObjectKind.TRIGGER, obj.name


def plan_same(objects: TableObjects, placement: Placement) -> list[Planned]:
    """Each object of a PostgreSQL source table, built in the target as the source prints it."""
    table = qualified(placement.table)
    schema = placement.table[0]
    drawing = (ObjectKind.SEQUENCE, ObjectKind.IDENTITY)
    sequences = {o.name: o.sequence for o in objects.objects
                 if o.kind in drawing and o.sequence}  # fmt: skip
    return [_plan(obj, table, schema, sequences, placement) for obj in objects.objects]


def _plan(obj: SchemaObject, table: str, schema: str,
          sequences: Mapping[str, SequenceInfo], placement: Placement) -> Planned:  # fmt: skip
    kind, name = obj.kind, quote(obj.name)
    same = "as on the source"
    if kind == ObjectKind.NOT_NULL:
        statement = f"ALTER TABLE {table} ALTER COLUMN {name} SET NOT NULL"
        return Planned(obj, Stage.CREATE, (statement,), same, signature(obj))
    if kind == ObjectKind.PRIMARY_KEY:
        return Planned(obj, Stage.CREATE, (), same, signature(obj))
    if kind == ObjectKind.EXTENSION:
        # Before the table: a column's type may be the extension's (made where sluice makes
        # the table: see spark_jobs/schema/plan.py).
        return Planned(obj, Stage.CREATE, (f"CREATE EXTENSION IF NOT EXISTS {name}",), same,
                       signature(obj))  # fmt: skip
    if kind == ObjectKind.SEQUENCE:
        assert obj.sequence is not None
        seq = _moved(obj.sequence, schema)
        statements = [create_sequence(seq)]
        if seq.owned_by:
            statements.append(f"ALTER SEQUENCE {qualified((seq.schema, seq.name))} OWNED BY "
                              f"{table}.{quote(seq.owned_by)}")  # fmt: skip
        return Planned(obj, Stage.LOADED, tuple(statements), same, signature(obj))
    if kind == ObjectKind.DEFAULT:
        expression = obj.body
        drawn = sequences.get(obj.name)
        if drawn is not None and drawn.shown:
            moved = _moved(drawn, schema)
            expression = expression.replace(
                f"nextval({literal(drawn.shown)}::regclass)",
                f"nextval({literal(qualified((moved.schema, moved.name)))}::regclass)")
        statement = f"ALTER TABLE {table} ALTER COLUMN {name} SET DEFAULT {expression}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.IDENTITY:
        assert obj.sequence is not None
        seq = _moved(obj.sequence, schema)
        options = _sequence_options(seq, with_type=False)
        statement = (f"ALTER TABLE {table} ALTER COLUMN {name} ADD GENERATED "
                     f"{(obj.identity or 'by default').upper()} AS IDENTITY "
                     f"(SEQUENCE NAME {qualified((seq.schema, seq.name))} {options})")  # fmt: skip
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.INDEX:
        unique = "UNIQUE " if obj.unique else ""
        statement = f"CREATE {unique}INDEX IF NOT EXISTS {name} ON {table} {obj.body}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.UNIQUE:
        return Planned(obj, Stage.LOADED, unique_statements(obj, table), same, signature(obj))
    if kind == ObjectKind.CHECK:
        # A check the source's rows all pass goes into the empty table as it is made.
        return Planned(obj, Stage.LOADED, check_statements(obj, table, obj.body), same,
                       signature(obj), early=passes_anywhere(obj))  # fmt: skip
    if kind == ObjectKind.EXCLUSION:
        statement = f"ALTER TABLE {table} ADD CONSTRAINT {name} {obj.body}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    if kind == ObjectKind.FOREIGN_KEY:
        return foreign_key(obj, table, placement)
    if kind == ObjectKind.COMMENT:
        on = f"COLUMN {table}.{name}" if obj.name else f"TABLE {table}"
        statement = f"COMMENT ON {on} IS {literal(obj.definition)}"
        return Planned(obj, Stage.LOADED, (statement,), same, signature(obj))
    # A trigger, with the function it calls; at the cutover, after the final pass.
    statements = ([obj.note] if obj.note else []) + [obj.body.replace("{table}", table)]
    return Planned(obj, Stage.CUTOVER, tuple(statements), same, signature(obj))


def passes_anywhere(obj: SchemaObject) -> bool:
    """Whether the rows a valid check passes on the source pass it in any target too, so
    that it may check them as they are loaded: inherited, calling no function (one's
    volatility, or its presence, may differ there) and ordering no text literal
    (collations may). Any other is validated after the load, where a row it refuses
    fails the check, not the row."""
    body = obj.body
    if not obj.validated or "NO INHERIT" in body:
        return False
    if any(m.group(1).lower() not in _SYNTAX for m in _CALL.finditer(body)):
        return False
    return not (_TEXT_LITERAL.search(body) and re.search(r"[<>]", body))


def unique_statements(obj: SchemaObject, table: str) -> tuple[str, ...]:
    """A unique constraint: its index first (built beside the table's other indexes), then
    the constraint on it."""
    name = quote(obj.name)
    return (
        f"CREATE UNIQUE INDEX IF NOT EXISTS {name} ON {table} {obj.body}",
        f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE USING INDEX {name}"
        + _deferrable(obj),
    )


def key_after_load(name: str | None, table: TableName,
                   columns: Sequence[str]) -> tuple[str, ...]:  # fmt: skip
    """A primary key added to a loaded table as pg_restore adds it: its unique index first
    (built beside the table's other indexes), then the key on it (which finds its columns
    NOT NULL already: no scan); ``name`` None: in one statement, named by the server (a
    free name, whatever the schema holds)."""
    where, keys = qualified(table), ", ".join(quote(c) for c in columns)
    if name is None:
        return (f"ALTER TABLE {where} ADD PRIMARY KEY ({keys})",)
    index = quote(name)
    return (
        f"CREATE UNIQUE INDEX {index} ON {where} USING btree ({keys})",
        f"ALTER TABLE {where} ADD CONSTRAINT {index} PRIMARY KEY USING INDEX {index}",
    )


def check_statements(obj: SchemaObject, table: str, body: str) -> tuple[str, ...]:
    """A check: added without a look at the rows, then validated (a lighter lock while
    the table is read), or left ``NOT VALID`` where the source holds it so."""
    name = quote(obj.name)
    statements = [f"ALTER TABLE {table} ADD CONSTRAINT {name} {body} NOT VALID"]
    if obj.validated:
        statements.append(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")
    return tuple(statements)


def foreign_key(obj: SchemaObject, table: str, placement: Placement,
                name: str | None = None) -> Planned:  # fmt: skip
    """A foreign key to where its parent went: once both tables are loaded (at the cutover
    where either is streamed), ``NOT VALID`` and then validated."""
    assert obj.foreign is not None
    fk = obj.foreign
    parent = placement.target_of(fk.refers_to)
    streamed = obj.table in placement.streamed or fk.refers_to in placement.streamed
    stage = Stage.CUTOVER if streamed else Stage.PARENTS
    constraint = quote(name or obj.name)
    text = (f"FOREIGN KEY ({_names(obj.columns)}) REFERENCES {qualified(parent)} "
            f"({_names(fk.columns)}){' MATCH FULL' if fk.match_full else ''} "
            f"ON UPDATE {fk.on_update} ON DELETE {fk.on_delete}{_deferrable(obj)}")  # fmt: skip
    statements = [f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {text} NOT VALID"]
    if obj.validated:
        statements.append(f"ALTER TABLE {table} VALIDATE CONSTRAINT {constraint}")
    becomes = text if name is not None else "as on the source"
    return Planned(obj, stage, tuple(statements), becomes, signature(obj, parent))


def create_sequence(seq: SequenceInfo) -> str:
    """``CREATE SEQUENCE IF NOT EXISTS`` with every number of ``seq``."""
    return (f"CREATE SEQUENCE IF NOT EXISTS {qualified((seq.schema, seq.name))} "
            f"{_sequence_options(seq, with_type=True)}")  # fmt: skip


def _sequence_options(seq: SequenceInfo, with_type: bool) -> str:
    parts = [f"AS {seq.type}"] if with_type else []
    parts.append(f"INCREMENT BY {seq.increment}")
    parts.append(f"MINVALUE {seq.minimum}" if seq.minimum is not None else "NO MINVALUE")
    parts.append(f"MAXVALUE {seq.maximum}" if seq.maximum is not None else "NO MAXVALUE")
    parts += [f"START WITH {seq.start}", f"CACHE {seq.cache}", "CYCLE" if seq.cycle else "NO CYCLE"]
    return " ".join(parts)


def _moved(seq: SequenceInfo, schema: str) -> SequenceInfo:
    """``seq`` in the target table's schema."""
    return replace(seq, schema=schema)


def _deferrable(obj: SchemaObject) -> str:
    if not obj.deferrable:
        return ""
    return " DEFERRABLE INITIALLY DEFERRED" if obj.deferred else " DEFERRABLE"


def _names(columns: tuple[str, ...]) -> str:
    return ", ".join(quote(c) for c in columns)


def _bare(shown: str) -> str:
    """A sequence's name from its text in ``nextval('…'::regclass)``, without its schema."""
    name = shown.replace("''", "'").rsplit(".", 1)[-1]
    return name[1:-1].replace('""', '"') if name.startswith('"') else name
