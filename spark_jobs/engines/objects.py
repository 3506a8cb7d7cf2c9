"""A table's schema objects beyond its columns, as any engine's catalogue describes them.

What an application relies on when it writes to a table: its indexes, its
primary, unique, check, exclusion and foreign-key constraints, its columns'
NOT NULL, defaults, sequences and identity (``AUTO_INCREMENT``), MariaDB's
``ON UPDATE CURRENT_TIMESTAMP``, its triggers and its comments. Each engine
reads them from its own catalogue (``introspection.py`` in its package) into
:class:`SchemaObject`; each engine's schema editor (``schema.py``) says what one
becomes in a table of its own (:class:`Planned`).

A :class:`SchemaObject` keeps the source's own words (``definition``, as
``pg_get_indexdef`` or ``SHOW CREATE TABLE`` prints it: what ``sluice plan``
shows), the structure a translation needs (columns, what a foreign key refers
to, a sequence's numbers), and ``body``: the part of the definition a target
of the same engine takes as it is (an index's ``USING btree (email)``, a
check's ``CHECK (…)``, a default's expression).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

TableName = tuple[str, str]
"""``(schema, table)`` as the database names them (MariaDB: the database as the schema)."""


BUILD_MEMORY = "512MB"
"""PostgreSQL's ``maintenance_work_mem`` for each connection that builds an index or
validates a constraint (a target's ``schema_jobs`` of them at once)."""


class ObjectKind(StrEnum):
    """What a schema object is."""

    NOT_NULL = "not null"
    DEFAULT = "default"
    SEQUENCE = "sequence"  # a sequence a column's default draws from (serial)
    IDENTITY = "identity"  # an identity column, or MariaDB's AUTO_INCREMENT
    PRIMARY_KEY = "primary key"
    INDEX = "index"
    UNIQUE = "unique"
    CHECK = "check"
    EXCLUSION = "exclusion"
    FOREIGN_KEY = "foreign key"
    ON_UPDATE = "on update"  # MariaDB: ON UPDATE CURRENT_TIMESTAMP
    TRIGGER = "trigger"
    COMMENT = "comment"
    EXTENSION = "extension"  # PostgreSQL: an extension the table's columns or objects use


class Stage(StrEnum):
    """When an object is built in a table sluice creates (pg_restore's and pgcopydb's order:
    the data first, into a table with only its key; the rest once it is in)."""

    CREATE = "with the table"
    LOADED = "after the table's first pass"
    PARENTS = "once both tables' first passes are done"
    CUTOVER = "at cutover"


@dataclass(frozen=True)
class SequenceInfo:
    """A sequence (or an identity's, or an ``AUTO_INCREMENT`` counter) and where it stands.

    ``last_value``: the last value handed out (None: none yet); the next is
    ``last_value + increment``, or ``start`` when none was handed out.
    """

    schema: str
    name: str
    type: str = "bigint"
    start: int = 1
    increment: int = 1
    minimum: int | None = None
    maximum: int | None = None
    cache: int = 1
    cycle: bool = False
    last_value: int | None = None
    owned_by: str | None = None  # the column the sequence belongs to (serial, identity)
    shown: str = ""  # its name as the source's definitions print it (``'orders_id_seq'``)


@dataclass(frozen=True)
class ForeignKey:
    """What a foreign key refers to and how it acts (SQL's own words: ``CASCADE``…)."""

    refers_to: TableName
    columns: tuple[str, ...]
    on_update: str = "NO ACTION"
    on_delete: str = "NO ACTION"
    match_full: bool = False


@dataclass(frozen=True)
class SchemaObject:
    """One schema object of a table, as its engine describes it.

    ``name``: the object's own name (an index's, a constraint's, a trigger's);
    for a column's attribute (not null, default, identity, sequence, on update,
    a column's comment) the column's name. ``columns``: the columns it is on,
    in order. ``body``: the engine's text a same-engine target takes as it is.
    ``validated``: a constraint the source holds as ``NOT VALID`` is copied so.
    """

    kind: ObjectKind
    table: TableName
    name: str
    definition: str
    columns: tuple[str, ...] = ()
    body: str = ""
    unique: bool = False
    deferrable: bool = False
    deferred: bool = False
    validated: bool = True
    foreign: ForeignKey | None = None
    sequence: SequenceInfo | None = None
    identity: str | None = None  # "always" | "by default" (AUTO_INCREMENT: by default)
    method: str = ""  # an index's kind where the engine names it (MariaDB: FULLTEXT, SPATIAL)
    prefixes: tuple[int | None, ...] = ()  # per column, MariaDB's index prefix length
    descending: tuple[bool, ...] = ()  # per column, an index's order (MariaDB)
    note: str = ""  # more the engine knows (a trigger's function, as the source defines it)
    column_sql: str = ""  # MariaDB: the whole column definition its attributes are part of

    @property
    def label(self) -> str:
        """``index orders_placed_idx``, ``default of status``: the object in messages."""
        if self.kind in (ObjectKind.NOT_NULL, ObjectKind.DEFAULT, ObjectKind.IDENTITY,
                         ObjectKind.ON_UPDATE):  # fmt: skip
            return f"{self.kind} of {self.name}"
        if self.kind == ObjectKind.COMMENT:
            return f"comment on {self.name or 'the table'}"
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Placement:
    """Where a source table's objects go: its target table (schema resolved), where every
    other source table went (a foreign key refers to the parent's target), and which
    source tables are streamed (a foreign key to or from one waits for the cutover)."""

    table: TableName
    refs: dict[TableName, TableName] = field(default_factory=dict)
    streamed: frozenset[TableName] = frozenset()

    def target_of(self, source: TableName) -> TableName:
        """Where the source table ``source`` went (itself, by name, when no source moved it)."""
        return self.refs.get(source, source)


@dataclass(frozen=True)
class Planned:
    """What a source object becomes in a target table.

    ``statements``: the SQL that builds it there, in order (empty: built with
    the table, or nothing to build); ``stage``: when; ``becomes``: the target's
    definition in words, for ``sluice plan``; ``signature``: how the target's
    own catalogue shows it once built, to tell whether a target has it (None:
    found by building it, see the editor); ``problem``: why it cannot be built
    there, with the fix (a plan error until the config skips or defines it).
    """

    source: SchemaObject
    stage: Stage
    statements: tuple[str, ...] = ()
    becomes: str = ""
    signature: Hashable | None = None
    problem: str | None = None
    skipped: str | None = None  # why the config leaves it out
    early: bool = False  # may be built in the transaction that makes its table: a check

    @property
    def label(self) -> str:
        """The source object, as messages name it."""
        return self.source.label


@dataclass
class TableObjects:
    """Every schema object of one table, in the order a target builds them."""

    table: TableName
    objects: list[SchemaObject] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)
    """Its columns (:class:`~spark_jobs.engines.base.Column`), where a translation needs
    their kinds (a MariaDB table's)."""

    def of(self, *kinds: ObjectKind) -> list[SchemaObject]:
        """The objects of these kinds."""
        return [o for o in self.objects if o.kind in kinds]


class SchemaProblem(ValueError):
    """A schema object that cannot be built in a target, with why and the fix."""
