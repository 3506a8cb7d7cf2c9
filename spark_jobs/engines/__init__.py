"""The engines sluice reads and writes, one module (or package) each, as SQLAlchemy keeps
one dialect per engine: :mod:`.postgresql`, :mod:`.mysql` (MySQL and MariaDB),
:mod:`.sqlite`, :mod:`.parquet`. Each owns what sluice knows of its engine: its
column types and how each is read, written, created and compared (:mod:`.base`).

A batch's columns carry what they were in their source: each Spark field of a
batch read from a SQL table holds its :class:`~.base.Column` in its metadata
(:func:`source_column`), so that a writer creates and fills the target in the
source's own types, whatever Spark type the values travel in. A column computed by
``columns:`` has none, and goes by its Spark type.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import sqlalchemy as sa
from pyspark.sql import types as T
from sqlalchemy.engine import Dialect

from config.errors import ConfigError
from spark_jobs.engines.base import Column, Engine, Kind, UserType
from spark_jobs.engines.traits import Traits

METADATA_KEY = "sluice.column"
"""The key of a Spark field's metadata under which its source column travels."""


_BACKENDS = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql"}
_DIALECTS = {**_BACKENDS, "sqlite": "sqlite"}


def engine_of(url: str | sa.URL) -> Engine:
    """The engine of a SQLAlchemy URL."""
    backend = _backend(url)
    if backend not in _BACKENDS:
        raise ConfigError(f"database {backend!r} has no engine in sluice's catalogue")
    return engine_named(_BACKENDS[backend])


def dialect_engine(dialect: str | Dialect) -> Engine:
    """The engine of a SQLAlchemy dialect, or of its name (``postgresql``, ``mysql``,
    ``mariadb``, ``sqlite``): SQLite's too, which the catalogue does not read from."""
    name = dialect if isinstance(dialect, str) else dialect.name
    if name not in _DIALECTS:
        raise ConfigError(f"database {name!r} has no engine in sluice's catalogue")
    return engine_named(_DIALECTS[name])


class _Unknown(Traits):
    """A database sluice has no engine for: the answers most engines share."""

    label = "a database sluice has no engine for"


_UNKNOWN = _Unknown()


def dialect_traits(dialect: str | Dialect) -> Traits:
    """What :func:`dialect_engine` finds for ``dialect`` (or its name), as it answers the
    questions of :class:`~spark_jobs.engines.traits.Traits`; for a dialect sluice has no
    engine of, the answers most engines share (its defaults) rather than an error."""
    name = dialect if isinstance(dialect, str) else dialect.name
    return dialect_engine(name) if name in _DIALECTS else _UNKNOWN


def url_traits(url: str | sa.URL) -> Traits:
    """:func:`dialect_traits` of the database at the SQLAlchemy ``url``."""
    return dialect_traits(_backend(url))


def catalogued(url: str | sa.URL) -> bool:
    """Whether the engine of ``url`` is in the catalogue."""
    return _backend(url) in _BACKENDS


def target_catalogue(url: str | sa.URL) -> Engine | None:
    """The engine whose catalogue types the tables sluice creates at ``url`` (SQLite's too,
    which is not read through the catalogue); None for none."""
    backend = _backend(url)
    if backend == "sqlite":
        return engine_named("sqlite")
    return engine_of(url) if backend in _BACKENDS else None


def _backend(url: str | sa.URL) -> str:
    return _backend_of_text(url) if isinstance(url, str) else url.get_backend_name()


@functools.lru_cache(maxsize=256)
def _backend_of_text(url: str) -> str:
    # Asked for each of a database's tables (1,000 URLs parsed took ~0.1 s of a start).
    return sa.make_url(url).get_backend_name()


def engine_named(name: str) -> Engine:
    """The engine called ``name`` (:attr:`Engine.name`)."""
    if name == "postgresql":
        from spark_jobs.engines.postgresql import ENGINE as POSTGRESQL

        return POSTGRESQL
    if name == "mysql":
        from spark_jobs.engines.mysql import ENGINE as MYSQL

        return MYSQL
    if name == "sqlite":
        from spark_jobs.engines.sqlite import ENGINE as SQLITE

        return SQLITE
    raise ConfigError(f"no engine {name!r} in sluice's catalogue")


def with_source(field: T.StructField, engine: Engine, column: Column) -> T.StructField:
    """``field`` carrying ``column`` of ``engine`` in its metadata."""
    payload = {"engine": engine.name, "column": _column_json(column)}
    return T.StructField(field.name, field.dataType, field.nullable,
                         {**(field.metadata or {}), METADATA_KEY: payload})  # fmt: skip


def source_column(field: T.StructField) -> tuple[Engine, Column] | None:
    """The source engine and column a batch's ``field`` carries; None for a computed one.

    A field renamed by ``columns:`` (``new: old``) keeps its source under its new name.
    """
    payload = (field.metadata or {}).get(METADATA_KEY)
    if not payload:
        return None
    column = _column_from(payload["column"])
    if column.name != field.name:
        column = column.renamed(field.name)
    return engine_named(payload["engine"]), column


def _column_json(column: Column) -> dict[str, Any]:
    data = dataclasses.asdict(column)
    data["kind"] = column.kind.value
    return data


def _column_from(data: dict[str, Any]) -> Column:
    values = dict(data)
    values["kind"] = Kind(values["kind"])
    values["labels"] = tuple(values.get("labels") or ())
    values["user_types"] = tuple(
        UserType(**{**u, "labels": tuple(u["labels"]), "checks": tuple(u["checks"])})
        for u in values.get("user_types") or ()
    )
    return Column(**values)


def column_json(column: Column) -> str:
    """``column`` as JSON text (manifests, plans)."""
    return json.dumps(_column_json(column), sort_keys=True)
