"""A stream source's batch into its target: no Spark, one transaction.

A ``changes`` batch (:mod:`spark_jobs.change_batches`) carries its rows in
its manifest, as the source's own text of each value: it needs no read and
no Spark job, only the target's transaction
(:func:`spark_jobs.apply_changes.apply_changes`). A target table that does
not exist yet is created first in the types the catalogue maps the source
table's columns to (from PostgreSQL: its own, with the enums and domains they
use), the key as primary key.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import sqlalchemy as sa

from config.errors import TargetError
from config.models import JdbcTargetConfig, SqlSourceConfig
from spark_jobs.apply_changes import apply_changes
from spark_jobs.engines import engine_of
from spark_jobs.engines.postgresql.catalog import create_user_types, quote
from spark_jobs.jdbc import sql_engine
from spark_jobs.jdbc_tables import ensure_own_tables
from spark_jobs.manifest import Manifest
from spark_jobs.outcomes import BatchImportFailed, reason, transient
from spark_jobs.target import TargetTable, Written

_made: set[tuple[str, str]] = set()
_made_lock = threading.Lock()


def import_changes(source: SqlSourceConfig, target: TargetTable, manifest: Manifest) -> Written:
    """Apply a ``changes`` batch to its target (see the module); its :class:`Written`.

    Raises :class:`~spark_jobs.outcomes.BatchImportFailed` (transient or not, as the
    database's error says), ``StaleToken``, or :class:`TargetError`.
    """
    if not isinstance(target.config, JdbcTargetConfig):
        raise TargetError(f"{target.label}: a stream source's changes go to a JDBC target "
                          "(PostgreSQL), not Parquet")  # fmt: skip
    started = time.monotonic()
    engine = sql_engine(target.config.url)
    try:
        ensure_own_tables(engine)
        ensure_table(sql_engine(source.url), source.table, engine, target)
        written = apply_changes(engine, target, manifest)
    except sa.exc.SQLAlchemyError as error:
        raise BatchImportFailed(
            f"batch {manifest.batch_id} ({manifest.source} -> {target.label}): {reason(error)}",
            transient=transient(error),
        ) from error
    return replace(written, seconds=time.monotonic() - started)


def ensure_table(
    source_engine: sa.Engine, source_table: str, engine: sa.Engine, target: TargetTable
) -> None:
    """Create ``target``'s table unless it exists: ``source_table``'s columns in the types the
    catalogue maps them to (the source's own, with its enums and domains, from PostgreSQL)."""
    ident = (engine.url.render_as_string(hide_password=True), target.label)
    with _made_lock:
        if ident in _made:
            return
    if not sa.inspect(engine).has_table(target.table, schema=target.schema):
        if engine.dialect.name != "postgresql":
            raise TargetError(f"{target.label}: a stream source's changes go to PostgreSQL "
                              f"for now, not {engine.dialect.name}")  # fmt: skip
        source, into = engine_of(source_engine.url), engine_of(engine.url)
        schema, _, table = source_table.rpartition(".")
        with source_engine.connect() as conn:
            columns = [c for c in source.describe(conn, schema or None, table) if not c.generated]
        if not columns:
            raise TargetError(f"{target.label}: the source table {source_table!r} is gone")
        name = quote(target.table) if target.schema is None else (
            f"{quote(target.schema)}.{quote(target.table)}")  # fmt: skip
        types = {c.name: target.cast.get(c.name) or into.target_type(c, source).type
                 for c in columns}  # fmt: skip
        body = ", ".join(
            [f"{quote(c.name)} {types[c.name]}" for c in columns]
            + [f"PRIMARY KEY ({', '.join(quote(k) for k in target.key)})"]
        )
        with engine.begin() as conn:
            if source is into:
                create_user_types(conn, columns)
            conn.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {name} ({body})"))
    with _made_lock:
        _made.add(ident)
