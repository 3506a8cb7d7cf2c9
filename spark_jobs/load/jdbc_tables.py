"""The tables of a JDBC target: the target table itself (created, or checked
against the batch), sluice's own ``_sluice_commits``, ``_sluice_rejects`` and
``_sluice_streams``, and the staging table each import attempt writes into.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from config.errors import TargetError
from spark_jobs.engines import catalogued, dialect_engine, engine_of
from spark_jobs.engines.ddl import column_type
from spark_jobs.load import late_keys
from spark_jobs.load.batch_columns import BatchColumn, is_enum_cast
from spark_jobs.load.early import build_early
from spark_jobs.load.target import COMMITS_TABLE, MADE_TABLE, REJECTS_TABLE, TargetTable
from spark_jobs.load.target_fit import TargetFit, check_catalogued, check_reflected, with_nan_guards

log = logging.getLogger(__name__)

ROW_COLUMN = "_sluice_row"
"""A staging-only column numbering the batch's rows, so that a batch the target
refuses can be split into halves by row number (never copied to the target)."""

_LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")

STREAMS_TABLE = "_sluice_streams"
"""In a JDBC target, one row per change stream written into it: how far it is applied."""


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


def streams_table(metadata: sa.MetaData | None = None) -> sa.Table:
    """``_sluice_streams``: per stream source, the position of the last change applied
    (a JSON list of ints; NULL: none yet), the batch that applied it, and the batches of
    a full load applied ahead of it."""
    return sa.Table(
        STREAMS_TABLE,
        metadata or sa.MetaData(),
        sa.Column("source", sa.String(255), primary_key=True),
        sa.Column("position", sa.Text, nullable=True),
        sa.Column("batch_id", sa.String(255), nullable=True),
        # Batches of a full load's ranges applied past a gap (JSON [[lo, hi], …]), while
        # ``position`` is where every batch before is in (see spark_jobs.changes.load_ranges).
        sa.Column("ahead", sa.Text, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
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


def made_table(metadata: sa.MetaData | None = None) -> sa.Table:
    """``_sluice_tables``: the tables sluice created in this database (schema resolved)."""
    return sa.Table(
        MADE_TABLE,
        metadata or sa.MetaData(),
        sa.Column("schema_name", sa.String(255), primary_key=True),
        sa.Column("table_name", sa.String(255), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def create_made(engine: sa.Engine, table: sa.Table) -> bool:
    """Create ``table`` unless it exists, and record it in ``_sluice_tables`` as sluice's:
    in the same transaction where DDL is transactional (PostgreSQL), else just before
    (MySQL: a record without its table is made good by the next creation). Returns
    whether this call made it (False: another import made it first)."""
    ensure_own_tables(engine)  # _sluice_tables among them
    transactional = engine_of(engine.url).tables_made_in_transaction
    if not transactional:
        with engine.begin() as conn:
            record_made(conn, table.schema, table.name)
    try:
        # Two imports making the same table: one wins, the other's transaction fails here.
        with engine.begin() as conn:
            table.create(conn)
            if transactional:
                record_made(conn, table.schema, table.name)
                build_early(conn, table.schema, table.name)
    except sa.exc.DBAPIError:
        if not sa.inspect(engine).has_table(table.name, schema=table.schema):
            raise
        return False
    return True


def record_made(conn: sa.Connection, schema: str | None, *tables: str) -> None:
    """Record ``schema``'s ``tables`` (None: the default schema) as made by sluice, on
    ``conn``'s transaction, in one statement; ``_sluice_tables`` must exist."""
    catalogue = engine_of(conn.engine.url)
    if schema is None:
        schema = catalogue.default_schema(conn)
    statement = catalogue.insert_ignoring(made_table())
    now = dt.datetime.now(dt.UTC)
    conn.execute(statement, [{"schema_name": schema, "table_name": table, "created_at": now}
                             for table in tables])  # fmt: skip


def made_tables(conn: sa.Connection) -> set[tuple[str, str]]:
    """``(schema, table)`` of every table sluice created in ``conn``'s database."""
    if not sa.inspect(conn).has_table(MADE_TABLE):
        return set()
    made = made_table()
    return {(s, t) for s, t in conn.execute(sa.select(made.c.schema_name, made.c.table_name))}


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
    if catalogued(engine.url):
        create_if_missing(engine, made_table())
    with _own_tables_lock:
        _own_tables_ready.add(url)


def own_tables_known(engine: sa.Engine) -> bool:
    """Whether this process has made sure of sluice's own tables in ``engine``'s database."""
    with _own_tables_lock:
        return engine.url.render_as_string(hide_password=True) in _own_tables_ready


# ----------------------------------------------------------- the target table


_checked: dict[tuple[str, ...], TargetFit] = {}
_checked_lock = threading.Lock()


def fit_key(
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[BatchColumn],
    null_columns: Collection[str] = (),
) -> tuple[str, ...]:
    """What a batch's fit to its target is remembered by: the database, the table, the key
    and each column's name, carrier and source type."""
    url = engine.url.render_as_string(hide_password=True)
    shape = [
        f"{c.name}:{'void' if c.name in null_columns else repr(c.stage)}:{c.type_text}"
        for c in columns
    ]
    return (url, target.schema or "", target.table, *target.key, "|", *shape)


def forget_target(engine: sa.Engine, target: TargetTable) -> None:
    """Check the target table again on the next batch (its commit failed: it may have changed).

    Sluice's own tables are made sure of again as well: one may have been dropped.
    """
    with _own_tables_lock:
        _own_tables_ready.discard(engine.url.render_as_string(hide_password=True))
    with _checked_lock:
        prefix = fit_key(engine, target, [])[:3]
        for key in [k for k in _checked if k[:3] == prefix]:
            del _checked[key]


def forget_table(url: str, schema: str, table: str) -> None:
    """Check ``schema.table`` at ``url`` again on its next batch: its schema objects changed
    (an identity column the inserts must now override)."""
    shown = sa.make_url(url).render_as_string(hide_password=True)
    with _checked_lock:
        for key in [k for k in _checked if k[0] == shown and k[2] == table
                    and k[1] in ("", schema)]:  # fmt: skip
            del _checked[key]


def prepare_target(
    engine: sa.Engine,
    target: TargetTable,
    columns: Sequence[BatchColumn],
    null_columns: Collection[str] = (),
    exists: bool | None = None,
) -> TargetFit:
    """Create the target table, or check that the batch's columns fit the one there.

    ``null_columns`` are null in every row of the batch: their type in
    ``columns`` is only what a new table gets; an existing column of any
    type takes them. Whether the table exists is asked every time, unless
    ``exists`` says it was just now (:func:`spark_jobs.load.targets.make_ready`);
    whether the columns fit is remembered for the process once it passed (a
    dozen catalog queries per batch otherwise), until :func:`forget_target`.
    Raises :class:`~spark_jobs.engines.base.UnsupportedColumn` (terminal) for
    a column that cannot go in, naming both types.
    """
    void = frozenset(null_columns)
    created = False
    if not exists and not sa.inspect(engine).has_table(target.table, schema=target.schema):
        created = create_target(engine, target, columns)
    key = fit_key(engine, target, columns, void)
    with _checked_lock:
        fit = _checked.get(key)
    if fit is not None:
        return fit
    if catalogued(engine.url):
        # A table created now too: its types are the catalogue's, not the batch's carriers.
        fit = check_catalogued(engine, target, columns, void)
    elif created:
        fit = TargetFit(void)
    else:
        fit = check_reflected(sa.inspect(engine), engine, target, columns, void)
    if not dialect_engine(engine.dialect).keeps_nan:
        fit = with_nan_guards(fit, columns)
    # A table made here has the key as its primary key (or this process's first pass
    # leaves it out until the pass is done): no need to look.
    if not created and not _key_is_unique(sa.inspect(engine), engine, target):
        _key_missing(engine, target)
    remember_fit(key, fit)
    return fit


def _key_missing(engine: sa.Engine, target: TargetTable) -> None:
    """The table has no unique key on the batch's key: one this process made without its
    primary key goes on so until its first pass is done; one sluice made with no primary key
    at all, where the engine adds one after a load, gets its key now (another process's
    first pass left it out); else the upsert cannot be."""
    if late_keys.is_fresh(engine.url, target):
        return
    catalogue = engine_of(engine.url)
    keyless = False
    if catalogue.key_after_load(None, ("", target.table), target.key):  # it adds keys late
        with engine.connect() as conn:
            schema = target.schema or catalogue.default_schema(conn)
            keyless = ((schema, target.table) in made_tables(conn) and not sa.inspect(
                conn).get_pk_constraint(target.table, schema=schema)["constrained_columns"])
    if not keyless:
        raise TargetError(
            f"{target.label}: no primary key or unique constraint on {list(target.key)}; "
            "the upsert needs one"
        )
    late_keys.ensure_key(engine, target, "before this process writes into the table")


def remember_fit(key: tuple[str, ...], fit: TargetFit) -> None:
    """Remember that a batch of the shape ``key`` (:func:`fit_key`) fits as ``fit``."""
    with _checked_lock:
        _checked[key] = fit


def fit_known(key: tuple[str, ...]) -> bool:
    """Whether a batch of the shape ``key`` (:func:`fit_key`) is known to fit."""
    with _checked_lock:
        return key in _checked


def create_target(engine: sa.Engine, target: TargetTable, columns: Sequence[BatchColumn]) -> bool:
    """Create the target table in the types the catalogue maps the batch's columns to
    (the types its source defines, first, where the target is of the same engine).
    Returns whether this call made it (False: another import made it first, perhaps
    without its key)."""
    # Most tables use built-in types only: no transaction of their own for nothing.
    if not of_built_in_types(engine, target, columns):
        catalogue = engine_of(engine.url)
        sources = [c.source[1] for c in columns
                   if c.source is not None and c.source[0] is catalogue]  # fmt: skip
        enums = [c for c in columns if c.source is not None and is_enum_cast(
            target.cast.get(c.name))]  # fmt: skip
        with engine.begin() as conn:
            catalogue.prepare_types(conn, sources)
            created = {
                c.name: column_type(catalogue.create_enum(
                    conn, target.schema, f"{target.table}_{c.name}", c.source[1].labels,
                ), c.source[1])
                for c in enums if c.source is not None
            }  # fmt: skip
        columns = [replace(c, create=created[c.name]) if c.name in created else c
                   for c in columns]  # fmt: skip
    table = new_table(engine, target, columns)
    if catalogued(engine.url):
        return create_made(engine, table)  # its other schema objects follow its load
    create_if_missing(engine, table)
    return True


def of_built_in_types(engine: sa.Engine, target: TargetTable,
                      columns: Sequence[BatchColumn]) -> bool:  # fmt: skip
    """Whether the table for ``columns`` needs no type of the target database's own made
    first (a user type of the source's, an enum a cast makes)."""
    if not catalogued(engine.url):
        return True
    catalogue = engine_of(engine.url)
    return not any(
        (c.source[0] is catalogue and c.source[1].user_types) or is_enum_cast(
            target.cast.get(c.name))
        for c in columns if c.source is not None
    )  # fmt: skip


def new_table(engine: sa.Engine, target: TargetTable, columns: Sequence[BatchColumn]) -> sa.Table:
    """The target table as sluice creates it for ``columns``: their columns, the key as its
    primary key (its other schema objects follow its load), or the key's columns ``NOT
    NULL`` only, where the key follows the load too (:func:`late_keys.make_keyless`)."""
    keyed = not late_keys.make_keyless(engine.url, target)
    return sa.Table(
        target.table,
        sa.MetaData(),
        *[sa.Column(c.name, c.create, primary_key=keyed and c.name in target.key,
                    nullable=(keyed or c.name not in target.key) and (
                        c.name in target.key or _nullable(c, engine)))
          for c in columns],
        schema=target.schema,
    )  # fmt: skip


def _nullable(column: BatchColumn, engine: sa.Engine) -> bool:
    """Whether a column sluice creates takes NULL: as its source column does, unless the
    mapping makes NULLs of values on the way (MySQL's zero dates, in another engine)."""
    if column.source is None:
        return True
    source, described = column.source
    into = dialect_engine(engine.dialect).name
    return described.nullable or source.zero_dates_into(into, described.kind)


def _key_is_unique(inspector: sa.Inspector, engine: sa.Engine, target: TargetTable) -> bool:
    """The upsert's conflict target needs a primary key or unique constraint/index."""
    table, schema = target.table, target.schema
    found = (engine_of(engine.url).has_unique_key(engine, schema, table, list(target.key))
             if catalogued(engine.url) else None)  # fmt: skip
    if found is not None:
        return found
    unique: list[Sequence[str | None]] = [
        inspector.get_pk_constraint(table, schema=schema)["constrained_columns"]
    ]
    unique += [u["column_names"] for u in inspector.get_unique_constraints(table, schema=schema)]
    unique += [
        i["column_names"] for i in inspector.get_indexes(table, schema=schema) if i["unique"]
    ]
    return any({c for c in cols if c} == set(target.key) for cols in unique)
