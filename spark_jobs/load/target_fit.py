"""How a batch's columns go into a target table that exists: which are written, in which
type, and which values would change on the way.

For a PostgreSQL target the table is described by the engine's catalogue
(:mod:`spark_jobs.engines.postgresql.catalog`): a column the database
computes (generated) is left to it, an identity column that takes values
only under ``OVERRIDING SYSTEM VALUE`` is written so, and a column staged in
another type than the table's (a uuid staged as text) is cast to the table's
type on its way in; the database parses each value, and one that does not
parse is a rejected row. A column whose values can never be the table's
(:func:`~spark_jobs.engines.fit.fits`) is an error before any row is written.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa

from config.errors import TargetError
from spark_jobs.engines import dialect_engine, engine_of
from spark_jobs.engines.base import Column, Engine, UnsupportedColumn
from spark_jobs.engines.ddl import like
from spark_jobs.engines.fit import fits
from spark_jobs.load.batch_columns import BatchColumn
from spark_jobs.load.narrowing import Narrowing, NotANumber, ZeroDate, narrowing
from spark_jobs.load.target import TargetTable


@dataclass(frozen=True)
class TargetFit:
    """How a batch's columns meet the target table, as :func:`prepare_target` found it.

    ``null_columns``: columns null in the whole batch (Spark ``void``); the
    commit writes NULL into them, whatever their type in the table.
    ``narrowings``: columns whose values the table's column may change (a
    fraction into an integer column); the commit sets those rows aside.
    ``casts``: columns staged in another type than the table's, by the SQL
    (``{}``: the staged value) that puts each into the table's type. ``skipped``: columns
    the database computes (generated), never written. ``always``: identity
    columns the table generates ``ALWAYS``, which an insert fills only under
    ``OVERRIDING SYSTEM VALUE`` and an update leaves as they are.
    """

    null_columns: frozenset[str] = frozenset()
    narrowings: tuple[Narrowing | ZeroDate | NotANumber, ...] = ()
    casts: Mapping[str, str] = field(default_factory=dict)
    skipped: frozenset[str] = frozenset()
    always: frozenset[str] = frozenset()
    floats_as_text: frozenset[str] = frozenset()
    """Floating-point columns staged as text (MySQL, which stores no NaN)."""
    built_in: Mapping[str, str] | None = None
    """The table's columns of built-in types (:attr:`Column.built_in
    <spark_jobs.engines.base.Column.built_in>`), each type as the catalogue spells it: what a
    source's binary COPY may go into as it comes. None: not described."""

    @property
    def overriding(self) -> bool:
        """Whether inserts must override the identity columns the table generates."""
        return bool(self.always)

    def written(self, names: Sequence[str]) -> list[str]:
        """The batch's columns that are written, in order."""
        return [n for n in names if n not in self.skipped]


def missing_column(target: TargetTable, name: str) -> UnsupportedColumn:
    """The error of a batch column the target table does not have."""
    return UnsupportedColumn(
        f"{target.label}: column {name!r} of the batch is not in the table "
        "(add it to the table, or map the batch's columns with columns:)"
    )


def check_catalogued(
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[BatchColumn],
    null_columns: Collection[str],
    described: Sequence[Column] | None = None,
) -> TargetFit:
    """The fit of the batch's ``columns`` to a target table that exists, as its engine's
    catalogue describes the table (``described``, when the caller has just asked)."""
    catalogue = engine_of(engine.url)
    if described is None:
        with engine.connect() as conn:
            described = catalogue.describe(conn, target.schema, target.table)
    existing = {c.name: c for c in described}
    if catalogue.describes_plain_types:
        # What the narrowing checks compare (SQLAlchemy's reflection took ~30 ms a table).
        reflected = {c.name: like(c) or sa.types.NullType() for c in described}
    else:
        reflected = {
            c["name"]: c["type"]
            for c in sa.inspect(engine).get_columns(target.table, schema=target.schema)
        }
    narrowings: list[Narrowing | ZeroDate] = []
    casts: dict[str, str] = {}
    skipped: set[str] = set()
    always: set[str] = set()
    floats_as_text = frozenset(
        c.name for c in columns
        if isinstance(c.values, sa.Float) and isinstance(c.stage, sa.Text)
    )  # fmt: skip
    for column in columns:
        found = existing.get(column.name)
        if found is None:
            raise missing_column(target, column.name)
        if found.generated:
            skipped.add(column.name)  # the database computes it
            continue
        if found.identity == "always":
            always.add(column.name)
        if column.name in null_columns:
            continue  # NULL fits a column of any type
        if not fits(column.kind, found.kind):
            raise UnsupportedColumn(
                f"{target.label}: column {column.name!r} is {found.type} in the table but "
                f"{column.type_text} in the source, and no value of one is a value of the "
                "other; change the table's column, or convert the values with columns:"
            )
        if (target.zero_dates == "reject" and column.source is not None
                and column.source[0].zero_dates_into(catalogue.name, column.kind)):  # fmt: skip
            narrowings.append(ZeroDate(column.name))
        staged = str(column.stage.compile(dialect=engine.dialect))
        cast = catalogue.cast_sql(found, staged, column.kind)
        if cast is not None:
            casts[column.name] = cast
        values = column.values if column.values is not None else column.stage
        narrowed = narrowing(column.name, reflected[column.name], values, engine.dialect)
        if narrowed is not None:
            if isinstance(values, sa.Numeric) and not isinstance(column.stage, sa.Numeric):
                # Staged as text: compared as the number it is.
                narrowed = replace(narrowed, staged_as=_number_type(engine, values))
            narrowings.append(narrowed)
    batch_names = {c.name for c in columns}
    for name, info in existing.items():
        if (name not in batch_names and not info.nullable and not info.generated
                and info.identity is None and _no_default(engine, target, name)):  # fmt: skip
            raise UnsupportedColumn(
                f"{target.label}: column {name!r} is NOT NULL without a default, "
                "and the batch has no value for it"
            )
    built_in = {c.name: c.type for c in described if c.built_in}
    return TargetFit(frozenset(null_columns), tuple(narrowings), casts, frozenset(skipped),
                     frozenset(always), floats_as_text, built_in)  # fmt: skip


def _no_default(engine: sa.Engine, target: TargetTable, name: str) -> bool:
    columns = sa.inspect(engine).get_columns(target.table, schema=target.schema)
    return all(c.get("default") is None for c in columns if c["name"] == name)


def _number_type(engine: sa.Engine, values: sa.types.TypeEngine[Any]) -> str:
    """The SQL type a number staged as text is compared in."""
    return dialect_engine(engine.dialect).compared_number_type(isinstance(values, sa.Float))


def with_nan_guards(fit: TargetFit, columns: Sequence[BatchColumn]) -> TargetFit:
    """``fit`` with the floating-point columns staged as text (SQLite) guarded: NaN and the
    infinities, which SQLite would store as NULL, are set aside."""
    floats = [c.name for c in columns
              if isinstance(c.values, sa.Float) and isinstance(c.stage, sa.Text)]  # fmt: skip
    if not floats:
        return fit
    guards = tuple(NotANumber(name) for name in floats if name not in fit.null_columns)
    return replace(fit, narrowings=(*fit.narrowings, *guards),
                   floats_as_text=fit.floats_as_text | frozenset(floats))  # fmt: skip


def check_reflected(
    inspector: sa.Inspector,
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[BatchColumn],
    null_columns: frozenset[str],
) -> TargetFit:
    """The fit of the batch's ``columns`` to a target table that exists, as SQLAlchemy
    reflects it (an engine without a catalogue of sluice's: SQLite)."""
    existing = {c["name"]: c for c in inspector.get_columns(target.table, schema=target.schema)}
    narrowings = []
    for column in columns:
        found = existing.get(column.name)
        if found is None:
            raise missing_column(target, column.name)
        if column.name in null_columns:
            continue  # NULL fits a column of any type
        values = column.values if column.values is not None else column.stage
        if not _compatible(found["type"], values, dialect_engine(engine.dialect)):
            raise TargetError(
                f"{target.label}: column {column.name!r} is {found['type']} in the table "
                f"but {values.compile(engine.dialect)} in the batch"
            )
        narrowed = narrowing(column.name, found["type"], values, engine.dialect)
        if narrowed is not None:
            if isinstance(column.stage, sa.Text) and not isinstance(values, sa.Text):
                narrowed = replace(narrowed, staged_as="REAL")  # a float staged as text
            narrowings.append(narrowed)
    batch_names = {c.name for c in columns}
    for name, info in existing.items():
        if name not in batch_names and not info["nullable"] and info.get("default") is None:
            raise TargetError(
                f"{target.label}: column {name!r} is NOT NULL without a default, "
                "and the batch has no value for it"
            )
    return TargetFit(null_columns, tuple(narrowings))


def _family(type_: sa.types.TypeEngine) -> str | None:
    try:
        python_type = type_.python_type
    except NotImplementedError:
        return None
    for family, types in _FAMILIES:
        if issubclass(python_type, types):
            return family
    return None


_FAMILIES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("bool", bool),
    ("number", (int, float, decimal.Decimal)),
    ("text", str),
    ("time", (dt.datetime, dt.date, dt.time)),
    ("binary", bytes),
)


def _compatible(table_type: sa.types.TypeEngine, batch_type: sa.types.TypeEngine,
                db: Engine) -> bool:  # fmt: skip
    a, b = _family(table_type), _family(batch_type)
    if a is None or b is None or a == b:
        return True
    return db.booleans_are_numbers and {a, b} == {"bool", "number"}
