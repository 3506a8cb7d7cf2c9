"""What every engine of the catalogue is: its columns, its type rules, its mapping.

An engine module (:mod:`spark_jobs.engines.postgresql`, ``mysql``, ``sqlite``,
``parquet``) owns everything sluice knows about one kind of database, as a
SQLAlchemy dialect does: how its column types are described, how their
values are read (:class:`TypeRule`: the Spark type a value travels in, and
the SQL that reads it so), how each source type becomes one of its own
(:meth:`Engine.target_type`), and the text verify compares
(:meth:`Engine.text_sql`). A type added or fixed is one line in the engine's
table of rules.

Values travel between engines in *carriers*: the Spark (and Arrow) type of a
column in a batch. A carrier holds every value of its source type exactly:
integers, floating point, booleans, text and bytes travel as themselves;
every type that Spark cannot hold exactly (PostgreSQL's numeric with NaN,
``infinity`` timestamps, MariaDB's zero dates, arrays, JSON, intervals…)
travels as the server's own text form, which the target parses in its own
column type. The mapping between engines goes by :class:`Kind`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pyspark.sql import types as T

from config.errors import TargetError
from spark_jobs.engines.objects import Placement, Planned, SchemaObject, TableName, TableObjects
from spark_jobs.engines.traits import Traits


class Kind(StrEnum):
    """What a column's values are, whatever the engine calls its type: the mapping's key."""

    BOOL = "boolean"
    INT = "integer"
    UINT = "unsigned integer"
    DECIMAL = "decimal"
    FLOAT = "floating point"
    MONEY = "money"
    TEXT = "text"
    CHAR = "fixed-length text"
    BYTES = "bytes"
    UUID = "uuid"
    JSON = "json"
    DATE = "date"
    TIME = "time"
    TIMETZ = "time with time zone"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamp with time zone"
    INTERVAL = "interval"
    YEAR = "year"
    BIT = "bit string"
    ENUM = "enum"
    SET = "set"
    ARRAY = "array"
    NETWORK = "network address"
    GEOMETRY = "geometry"
    RANGE = "range"
    OTHER = "other"


@dataclass(frozen=True)
class UserType:
    """A type the source database defines (PostgreSQL): created in a target sluice creates.

    ``kind``: ``enum`` (``labels`` in order) or ``domain`` (``base``: its
    type, ``checks``: its constraints as SQL, ``not_null``, ``default``).
    """

    schema: str
    name: str
    kind: str
    labels: tuple[str, ...] = ()
    base: str = ""
    checks: tuple[str, ...] = ()
    not_null: bool = False
    default: str | None = None


@dataclass(frozen=True)
class Column:
    """A table column as its engine describes it.

    ``type``: the engine's own spelling, as DDL takes it (``numeric(12,2)``,
    ``character varying(40)``, ``text[]``, ``bigint unsigned``,
    ``enum('a','b')``). ``base``: the name the engine's rules know it by
    (a domain's base type, an array's element type for ``array``).
    ``generated``: computed by the database (never written); ``identity``:
    ``always`` or ``by default`` for identity columns. ``built_in``: of a type
    every database of the engine has as its own, whose binary form is the same
    in all of them (PostgreSQL: an OID below ``FirstNormalObjectId``).
    """

    name: str
    type: str
    base: str
    kind: Kind
    nullable: bool = True
    generated: bool = False
    identity: str | None = None
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    unsigned: bool = False
    element: str | None = None
    labels: tuple[str, ...] = ()
    user_types: tuple[UserType, ...] = ()
    dims: int = 0
    built_in: bool = False

    def renamed(self, name: str) -> Column:
        """The same column under another name (a ``columns:`` mapping that only renames)."""
        return replace(self, name=name)


@dataclass(frozen=True)
class TypeRule:
    """How one source type of an engine is read.

    ``kind``: what its values are; ``carrier``: the Spark type they travel in
    (None: decided per column, see :meth:`Engine.carrier`); ``read``: SQL
    that reads the column as the carrier takes it (``{}`` is the quoted
    column); ``text``: SQL printing the value as the server prints it, the
    form verify compares; ``refused``: why sluice cannot move it, with the fix.
    """

    kind: Kind
    carrier: T.DataType | None = field(default_factory=T.StringType)
    read: str = "{}"
    text: str = "{}"
    refused: str | None = None


def rule_maker(text: str) -> Callable[..., TypeRule]:
    """A catalogue line's helper for an engine whose text of a value is ``text``
    (``{}::text``): ``rule(kind, carrier=text, read="{}", text=…)``."""

    def rule(kind: Kind, carrier: T.DataType | None = None, read: str = "{}",
             text: str = text) -> TypeRule:  # fmt: skip
        return TypeRule(kind, carrier if carrier is not None else T.StringType(), read, text)

    return rule


@dataclass(frozen=True)
class Mapped:
    """What a source column becomes in a target engine: the target's type, and what changes.

    ``change``: how values differ from the source's, in words ('' when they
    arrive as they were). ``refused``: the column cannot be represented
    there (a :meth:`Engine.target_type` that raises says the same).
    """

    type: str
    change: str = ""


class CannotEncode(ValueError):
    """A column, or a value in it, that a bulk path cannot write exactly: another path,
    or the text form, takes it."""


class UnsupportedColumn(TargetError):
    """A column that sluice cannot move as it is: a plan error before any batch.

    Permanent: no retry can change a column's type.
    """

    transient = False
    permanent = True


class Engine(Traits, ABC):
    """One engine's knowledge: rules per source type, mapping into its types, text forms.

    Stateless; one instance per engine (:func:`spark_jobs.engines.engine_of`). What the
    wings above ask of it beyond its types (how sluice connects to it, loads into it,
    reads and sums it) is in :class:`~spark_jobs.engines.traits.Traits`.
    """

    name: str
    label: str

    @abstractmethod
    def rule(self, column: Column) -> TypeRule:
        """The rule of ``column``'s type; one that refuses it when the catalogue has none."""

    def carrier(self, column: Column) -> T.DataType:
        """The Spark type ``column``'s values travel in."""
        rule = self.rule(column)
        if rule.refused is not None:
            raise UnsupportedColumn(f"column {column.name!r} ({column.type}): {rule.refused}")
        return rule.carrier if rule.carrier is not None else T.StringType()

    @abstractmethod
    def target_type(self, column: Column, source: Engine) -> Mapped:
        """The type ``column`` of a ``source`` table gets in a table of this engine sluice
        creates, and what changes; raises :class:`UnsupportedColumn` when none holds it."""

    @abstractmethod
    def spark_type(self, data_type: T.DataType, name: str, key: bool = False) -> str:
        """This engine's type for a batch column known only by its Spark type (an SQS
        field, a ``columns:`` expression); raises :class:`UnsupportedColumn`."""

    @abstractmethod
    def describe(self, conn: Any, schema: str | None, table: str) -> list[Column]:
        """The columns of ``schema.table`` (None: the default schema) on the SQLAlchemy
        connection ``conn``, in order; empty when there is no such table."""

    def describe_many(
        self, conn: Any, tables: Sequence[tuple[str | None, str]]
    ) -> dict[tuple[str | None, str], list[Column]]:
        """:meth:`describe` of each of ``tables`` (``(schema, table)``) that exists."""
        found = {(schema, table): self.describe(conn, schema, table) for schema, table in tables}
        return {name: columns for name, columns in found.items() if columns}

    def kind_of_type(self, type_sql: str) -> Kind:
        """The kind of a column type of this engine written as SQL (a ``cast:`` override);
        ``other`` for one the catalogue does not name."""
        return Kind.OTHER

    def cast_sql(self, target: Column, staged: str, source: Kind | None = None) -> str | None:
        """SQL (``{}``: the staged value) that puts a value staged in SQL type ``staged``
        (of kind ``source``) into the ``target`` column; None where it goes in as it is."""
        return None

    def key_type(self, mapped: str) -> str:
        """``mapped`` as the type of a key column (MySQL indexes no TEXT without a prefix)."""
        return mapped

    def prepare_types(self, conn: Any, columns: Sequence[Column]) -> None:
        """Create what ``columns`` (of this engine) need before a table holds them (the
        enums and domains a PostgreSQL table uses); nothing by default."""
        return None

    def create_enum(self, conn: Any, schema: str | None, name: str, labels: Sequence[str]) -> str:
        """Create an enum type ``name`` of ``labels`` (in their order) unless it exists, and
        return it as DDL: ``cast: {column: enum}``. Only engines with named enum types."""
        raise UnsupportedColumn(f"{self.name} has no enum types to create")

    def leaving(self, column: Column, mapped: Mapped, target: Engine) -> Mapped:
        """``mapped`` (``column``'s type in ``target``, by its kind), with what this engine
        knows that changes on the way (MariaDB's zero dates)."""
        return mapped

    def zero_dates_into(self, target: str, kind: Kind | None) -> bool:
        """Whether this engine's values of ``kind`` may be dates no other engine holds,
        which become NULL on their way into a target of engine ``target`` (MySQL's zero
        dates: a NOT NULL column of them is nullable there)."""
        return False

    # -- schema objects (indexes, constraints, defaults, sequences…: engines/objects.py) ------

    parallel_indexes = True
    """Whether one table's indexes are built side by side (PostgreSQL's ``CREATE INDEX``
    lets them), or one after the other in the source's order (MariaDB's ``ALTER TABLE``
    takes the table for each, and lists its keys in the order they were added)."""

    describes_plain_types = False
    """Whether :meth:`describe` knows each column's plain type (``ddl.like``) as well as
    SQLAlchemy's reflection does for the narrowing checks (not MySQL's: reflection knows
    the ranges of its unsigned integers)."""

    def has_unique_key(self, engine: Any, schema: str | None, table: str,
                       key: Sequence[str]) -> bool | None:  # fmt: skip
        """Whether ``table`` has a primary key or unique index on exactly ``key`` (what an
        upsert's conflict target needs), in one query; None: SQLAlchemy's reflection says."""
        return None

    def row_estimates(self, conn: Any, tables: Sequence[str]) -> dict[str, float]:
        """The rows the database's statistics count in each of ``tables`` (``schema.table``
        or ``table``) that it has statistics of, in one query; none by default."""
        return {}

    def default_schema(self, conn: Any) -> str:
        """The schema a table named without one is in (MariaDB: the database)."""
        raise NotImplementedError(f"{self.label} keeps no schema objects of sluice's")

    def read_objects(
        self, conn: Any, tables: Sequence[tuple[str | None, str]]
    ) -> dict[tuple[str | None, str], TableObjects]:
        """The schema objects of each of ``tables`` that exists; none by default."""
        return {}

    def plan_objects(
        self, objects: TableObjects, source: Engine, placement: Placement
    ) -> list[Planned] | None:
        """What each object of a ``source`` table becomes in this engine's target table at
        ``placement``; None where this engine builds no schema objects (SQLite)."""
        return None

    def key_after_load(self, name: str | None, table: TableName,
                       columns: Sequence[str]) -> tuple[str, ...] | None:  # fmt: skip
        """The statements that give ``table``, made without it and loaded, its primary key
        ``name`` (None: as the database names it) on ``columns``; None where a table is made
        with its key, always (a table the engine keeps in its key's order: InnoDB would copy
        it again to add one)."""
        return None

    def name_taken(self, conn: Any, schema: str, name: str, table: str) -> bool:
        """Whether a relation of ``schema`` other than an index of ``table`` is named
        ``name`` (a key built under that name would clash); names no relation by default."""
        return False

    def translate_objects(
        self, objects: TableObjects, target: Engine, placement: Placement
    ) -> list[Planned]:
        """This engine's objects, translated for a ``target`` of another engine."""
        raise NotImplementedError(f"{self.label} objects have no translation for {target.label}")

    def sequence_positions(self, conn: Any, objects: Sequence[SchemaObject]) -> list[int | None]:
        """The last value each of ``objects``' sequences (or counters) handed out (None: none
        yet), in order."""
        raise NotImplementedError(f"{self.label} keeps no sequences of sluice's")

    def set_sequence(self, conn: Any, table: TableName, obj: SchemaObject,
                     position: int | None) -> str:  # fmt: skip
        """Set the sequence (or counter) of ``obj``, a column of ``table`` as this engine's
        catalogue has it, after ``position`` and the column's largest value; says what."""
        raise NotImplementedError(f"{self.label} keeps no sequences of sluice's")

    def signature(self, obj: SchemaObject, refers_to: TableName | None = None) -> Hashable:
        """How this engine's catalogue shows ``obj``, names aside (see the comparison)."""
        return obj.kind, obj.name

    def text_sql(self, column: Column, quoted: str) -> str:
        """SQL printing ``column`` (``quoted``) as this engine's server prints it."""
        return self.rule(column).text.format(quoted)

    def read_sql(self, column: Column, quoted: str, target: str | None = None) -> str:
        """SQL reading ``column`` (``quoted``) as its carrier takes it, for a target of engine
        ``target`` (a form the target parses, where the mapping says so)."""
        return self.rule(column).read.format(quoted)


def carriers(engine: Engine, columns: Sequence[Column]) -> T.StructType:
    """The Spark schema of a batch of ``columns`` read from ``engine``."""
    return T.StructType([T.StructField(c.name, engine.carrier(c), True) for c in columns])


def refusals(engine: Engine, columns: Sequence[Column]) -> list[str]:
    """Why each column of ``columns`` that ``engine``'s catalogue cannot read is refused."""
    found = []
    for column in columns:
        rule = engine.rule(column)
        if rule.refused is not None:
            found.append(f"column {column.name!r} ({column.type}): {rule.refused}")
    return found


def plain(value: Any) -> Any:
    """A JSON-able form of a catalogue value (for plans and reports)."""
    return value.value if isinstance(value, Kind) else value
