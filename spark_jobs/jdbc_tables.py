"""The tables of a JDBC target: the target table itself (created, or checked
against the batch), sluice's own ``_sluice_commits`` and ``_sluice_rejects``,
and the staging table each import attempt writes into.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import logging
import re
import threading
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from config.errors import TargetError
from spark_jobs.manifest import Manifest
from spark_jobs.narrowing import Narrowing, narrowing
from spark_jobs.target import COMMITS_TABLE, REJECTS_TABLE, TargetTable

log = logging.getLogger(__name__)

ROW_COLUMN = "_sluice_row"
"""A staging-only column numbering the batch's rows, so that a batch the target
refuses can be split into halves by row number (never copied to the target)."""

_LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def commits_table(metadata: sa.MetaData | None = None) -> sa.Table:
    """``_sluice_commits``: one row per committed batch, with its token and rows."""
    return sa.Table(
        COMMITS_TABLE,
        metadata or sa.MetaData(),
        sa.Column("batch_id", sa.String(255), primary_key=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
    )


def rejects_table(metadata: sa.MetaData | None = None) -> sa.Table:
    """``_sluice_rejects``: the rows a target refused, as JSON text, with the reason."""
    return sa.Table(
        REJECTS_TABLE,
        metadata or sa.MetaData(),
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),  # SQLite: the rowid
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("batch_id", sa.String(255), nullable=False, index=True),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("key", _LONG_TEXT, nullable=False),  # JSON list of the key's values
        sa.Column("row", _LONG_TEXT, nullable=False),  # JSON object of the row
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("rejected_at", sa.DateTime(timezone=True), nullable=False),
    )


def create_if_missing(engine: sa.Engine, table: sa.Table) -> None:
    """Create ``table`` unless it exists; safe when two imports race to create it."""
    try:
        with engine.begin() as conn:
            table.create(conn, checkfirst=True)
    except sa.exc.DBAPIError:
        if not sa.inspect(engine).has_table(table.name, schema=table.schema):
            raise


_own_tables_ready: set[str] = set()
_own_tables_lock = threading.Lock()


def ensure_own_tables(engine: sa.Engine) -> None:
    """Create ``_sluice_commits`` and ``_sluice_rejects`` unless this process already did.

    Remembered per database until :func:`forget_target` (a commit that
    failed): otherwise four catalog round trips per batch ask again.
    """
    url = engine.url.render_as_string(hide_password=True)
    with _own_tables_lock:
        if url in _own_tables_ready:
            return
    create_if_missing(engine, commits_table())
    create_if_missing(engine, rejects_table())
    with _own_tables_lock:
        _own_tables_ready.add(url)


def own_tables_known(engine: sa.Engine) -> bool:
    """Whether this process has made sure of sluice's own tables in ``engine``'s database."""
    with _own_tables_lock:
        return engine.url.render_as_string(hide_password=True) in _own_tables_ready


# ------------------------------------------------------------------- staging


def staging_prefix(batch_id: str) -> str:
    """The start of every staging table name of ``batch_id`` (a plain lowercase identifier)."""
    tag = re.sub(r"[^a-z0-9]+", "_", batch_id.lower()).strip("_")[:16]
    digest = hashlib.sha1(batch_id.encode()).hexdigest()[:8]
    return f"_sluice_stage_{tag}_{digest}_"


def staging_table_name(batch_id: str, token: int, attempt: str | None = None) -> str:
    """``_sluice_stage_<batch>_<digest>_<token>_<attempt>``: unique per import attempt.

    Two importers of one batch (a takeover, or the same manifest run twice)
    never write into the same staging table. At most 58 characters, so that
    an index name derived from it fits PostgreSQL's and MySQL's limits.
    """
    return f"{staging_prefix(batch_id)}{token}_{attempt or uuid.uuid4().hex[:6]}"


def staging_table(manifest: Manifest, columns: Sequence[sa.Column], dialect: str) -> sa.Table:
    """A new staging table for one attempt: the batch's columns, nullable, and the row number.

    On PostgreSQL it is UNLOGGED: its rows are written once, read once by the
    commit and dropped, so writing them to the WAL too would only cost time
    (a crash empties it, and the attempt is re-run anyway).
    """
    return sa.Table(
        staging_table_name(manifest.batch_id, manifest.token),
        sa.MetaData(),
        *[sa.Column(c.name, c.type, nullable=True) for c in columns],
        sa.Column(ROW_COLUMN, sa.BigInteger, nullable=False),
        prefixes=["UNLOGGED"] if dialect == "postgresql" else [],
    )


def drop_stale_stages(engine: sa.Engine, manifest: Manifest) -> None:
    """Drop this batch's staging tables left by older tokens (crashed attempts).

    Best effort: a table still in use by a stale importer makes that importer
    fail, which is what should happen to it anyway.
    """
    prefix = staging_prefix(manifest.batch_id)
    stale = []
    for name in sa.inspect(engine).get_table_names():
        token, _, attempt = name[len(prefix) :].partition("_")
        if name.startswith(prefix) and token.isdigit() and attempt and int(token) < manifest.token:
            stale.append(name)
    for name in stale:
        drop_staging(engine, sa.Table(name, sa.MetaData()))


def drop_staging(engine: sa.Engine, staging: sa.Table) -> None:
    """Drop a staging table if it exists; log, never raise (the next attempt cleans up).

    ``DROP TABLE IF EXISTS`` rather than a catalog look-up first: one round
    trip per batch fewer.
    """
    mysql_family = engine.dialect.name in ("mysql", "mariadb")
    try:
        with engine.begin() as conn:
            # Do not wait long on a lock held by a stuck importer.
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql("SET LOCAL lock_timeout = '5s'")
            elif mysql_family:
                conn.exec_driver_sql("SET SESSION lock_wait_timeout = 5")
            try:
                conn.execute(sa.schema.DropTable(staging, if_exists=True))
            finally:
                if mysql_family:  # the connection goes back to the pool
                    conn.exec_driver_sql("SET SESSION lock_wait_timeout = DEFAULT")
    except sa.exc.SQLAlchemyError as error:
        log.warning("could not drop staging table %s: %s", staging.name, error)


def index_staging_rows(engine: sa.Engine, staging: sa.Table) -> None:
    """Index the row numbers, so that each half of a split batch is a range scan.

    Only done when a batch must be split: the happy path reads the staging
    table once, whole. Outside the commit transaction, as MySQL commits
    implicitly on DDL.
    """
    index = sa.Index(f"{staging.name}_r", staging.c[ROW_COLUMN])
    with engine.begin() as conn:
        index.create(conn)


# ----------------------------------------------------------- the target table


@dataclass(frozen=True)
class TargetFit:
    """How a batch's columns meet the target table, as :func:`prepare_target` found it.

    ``null_columns``: columns null in the whole batch (Spark ``void``); the
    commit writes NULL into them, whatever their type in the table.
    ``narrowings``: columns whose values the table's column may change (a
    fraction into an integer column); the commit sets those rows aside.
    """

    null_columns: frozenset[str] = frozenset()
    narrowings: tuple[Narrowing, ...] = ()


_checked: dict[tuple[str, ...], TargetFit] = {}
_checked_lock = threading.Lock()


def _check_key(
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[sa.Column],
    null_columns: Collection[str] = (),
) -> tuple[str, ...]:
    url = engine.url.render_as_string(hide_password=True)
    shape = [f"{c.name}:{'void' if c.name in null_columns else repr(c.type)}" for c in columns]
    return (url, target.schema or "", target.table, *target.key, "|", *shape)


def forget_target(engine: sa.Engine, target: TargetTable) -> None:
    """Check the target table again on the next batch (its commit failed: it may have changed).

    Sluice's own tables are made sure of again as well: one may have been dropped.
    """
    with _own_tables_lock:
        _own_tables_ready.discard(engine.url.render_as_string(hide_password=True))
    with _checked_lock:
        prefix = _check_key(engine, target, [])[:3]
        for key in [k for k in _checked if k[:3] == prefix]:
            del _checked[key]


def prepare_target(
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[sa.Column],
    null_columns: Collection[str] = (),
) -> TargetFit:
    """Create the target table, or check that the batch's columns fit the one there.

    ``null_columns`` are null in every row of the batch: their type in
    ``columns`` is only what a new table gets; an existing column of any
    type takes them. Whether the table exists is asked every time; whether
    the columns fit is remembered for the process once it passed (a dozen
    catalog queries per batch otherwise), until :func:`forget_target`.
    """
    void = frozenset(null_columns)
    inspector = sa.inspect(engine)
    if not inspector.has_table(target.table, schema=target.schema):
        table = sa.Table(
            target.table,
            sa.MetaData(),
            *[sa.Column(c.name, c.type, primary_key=c.name in target.key) for c in columns],
            schema=target.schema,
        )
        create_if_missing(engine, table)
        return TargetFit(void)
    key = _check_key(engine, target, columns, void)
    with _checked_lock:
        fit = _checked.get(key)
    if fit is not None:
        return fit
    fit = _check_target(inspector, engine, target, columns, void)
    with _checked_lock:
        _checked[key] = fit
    return fit


def _check_target(
    inspector: sa.Inspector,
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[sa.Column],
    null_columns: frozenset[str],
) -> TargetFit:
    existing = {c["name"]: c for c in inspector.get_columns(target.table, schema=target.schema)}
    narrowings = []
    for column in columns:
        found = existing.get(column.name)
        if found is None:
            raise TargetError(
                f"{target.label}: column {column.name!r} of the batch is not in the table "
                "(add it to the table, or map the batch's columns with columns:)"
            )
        if column.name in null_columns:
            continue  # NULL fits a column of any type
        if not _compatible(found["type"], column.type, engine.dialect.name):
            raise TargetError(
                f"{target.label}: column {column.name!r} is {found['type']} in the table "
                f"but {column.type.compile(engine.dialect)} in the batch"
            )
        narrowed = narrowing(column.name, found["type"], column.type, engine.dialect)
        if narrowed is not None:
            narrowings.append(narrowed)
    batch_names = {c.name for c in columns}
    for name, info in existing.items():
        if name not in batch_names and not info["nullable"] and info.get("default") is None:
            raise TargetError(
                f"{target.label}: column {name!r} is NOT NULL without a default, "
                "and the batch has no value for it"
            )
    if not _key_is_unique(inspector, target):
        raise TargetError(
            f"{target.label}: no primary key or unique constraint on {list(target.key)}; "
            "the upsert needs one"
        )
    return TargetFit(null_columns, tuple(narrowings))


def _key_is_unique(inspector: sa.Inspector, target: TargetTable) -> bool:
    """The upsert's conflict target needs a primary key or unique constraint/index."""
    table, schema = target.table, target.schema
    unique: list[Sequence[str | None]] = [
        inspector.get_pk_constraint(table, schema=schema)["constrained_columns"]
    ]
    unique += [u["column_names"] for u in inspector.get_unique_constraints(table, schema=schema)]
    unique += [
        i["column_names"] for i in inspector.get_indexes(table, schema=schema) if i["unique"]
    ]
    return any({c for c in cols if c} == set(target.key) for cols in unique)


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


def _compatible(table_type: sa.types.TypeEngine, batch_type: sa.types.TypeEngine, db: str) -> bool:
    a, b = _family(table_type), _family(batch_type)
    if a is None or b is None or a == b:
        return True
    # MySQL's BOOL is a TINYINT and SQLite has no booleans: both are numbers there.
    return db != "postgresql" and {a, b} == {"bool", "number"}
