"""Write one batch into a JDBC table, idempotently.

PostgreSQL through psycopg takes the batch by binary COPY, MySQL and MariaDB
through PyMySQL by ``LOAD DATA LOCAL INFILE``, straight into the table or
through a staging table (:mod:`spark_jobs.load.write_bulk`). Otherwise (SQLite),
and for values the encoders cannot write exactly, Spark's JDBC writer
fills a staging table of this attempt's own (with a row number); then one
transaction on the driver, :func:`~spark_jobs.load.commit_jdbc.commit_staged`,
upserts the rows into the target and records the batch and its fencing token
in ``_sluice_commits`` (rows the target refuses go to ``_sluice_rejects``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyspark.sql.functions as F
import sqlalchemy as sa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from config.errors import TargetError
from config.models import JdbcTargetConfig
from spark_jobs.common.jdbc import JdbcEndpoint, sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import dialect_engine
from spark_jobs.engines.spark_names import quoted
from spark_jobs.engines.transforms import zero_columns, zero_dates
from spark_jobs.load.batch_columns import batch_columns
from spark_jobs.load.commit_jdbc import commit_staged
from spark_jobs.load.jdbc_tables import (
    ROW_COLUMN,
    TargetFit,
    commits_table,
    ensure_own_tables,
    forget_target,
    own_tables_known,
    prepare_target,
    rejects_table,
)
from spark_jobs.load.staging import (
    drop_staging,
    drop_stale_stages,
    staging_table,
    sweep_committed_stages,
)
from spark_jobs.load.target import Commit, TargetTable, Written
from spark_jobs.load.targets import Wanted, make_ready
from spark_jobs.load.write_bulk import write_bulk
from spark_jobs.load.write_direct import write_straight_in


@dataclass(frozen=True)
class Prepared:
    """The target made ready for a batch's columns: what every write path needs.

    ``columns``: the columns written (the batch's, less those the database
    computes), staged in their carriers' types; ``void``: those null in the
    whole batch.
    """

    engine: sa.Engine
    columns: list[sa.Column[Any]]
    void: list[str]
    fit: TargetFit

    @property
    def names(self) -> list[str]:
        """The names of the columns written, in order."""
        return [c.name for c in self.columns]


def prepare_target_for(
    schema: T.StructType, target: TargetTable, exists: bool | None = None
) -> Prepared:
    """Check a batch's columns (``schema``) against the target, create or fit its table and
    sluice's own (``exists``: the table is there and its fit known, :func:`targets_ready`)."""
    wanted = _wanted(schema, target)
    engine = sql_engine(_jdbc(target).url)
    fit = prepare_target(engine, target, wanted.columns, wanted.void, exists)
    ensure_own_tables(engine)
    sweep_committed_stages(engine)
    columns = [sa.Column(c.name, c.stage) for c in wanted.columns if c.name not in fit.skipped]
    return Prepared(engine, columns, [n for n in wanted.void if n not in fit.skipped], fit)


def targets_ready(batches: Sequence[tuple[T.StructType, TargetTable]]) -> list[bool]:
    """Which of the target tables of ``batches`` (each a batch's columns and its target)
    are ready for them, made ready together where they can be
    (:func:`~spark_jobs.load.targets.make_ready`); best effort: a table that is not is made
    ready by :func:`prepare_target_for` on its own, which says what is wrong."""
    ready = [False] * len(batches)
    by_url: dict[str, list[tuple[int, Wanted]]] = {}
    for i, (schema, target) in enumerate(batches):
        try:
            by_url.setdefault(_jdbc(target).url, []).append((i, _wanted(schema, target)))
        except TargetError:
            continue
    for url, wanted in by_url.items():
        found = make_ready(sql_engine(url), [w for _, w in wanted])
        for (i, _), is_ready in zip(wanted, found, strict=True):
            ready[i] = is_ready
    return ready


def _jdbc(target: TargetTable) -> JdbcTargetConfig:
    cfg = target.config
    assert isinstance(cfg, JdbcTargetConfig)
    return cfg


def _wanted(schema: T.StructType, target: TargetTable) -> Wanted:
    """What a batch of columns ``schema`` wants of its target table: its columns as they
    are written, those null in all of its rows; raises :class:`TargetError` for columns
    that cannot be written (the key missing, a name of sluice's own)."""
    names = schema.names
    missing_key = [k for k in target.key if k not in names]
    if missing_key:
        raise TargetError(
            f"{target.label}: key column(s) {missing_key} are not among the batch's columns "
            f"{names} (a columns: mapping must keep the key)"
        )
    if ROW_COLUMN in names:
        raise TargetError(f"{target.label}: the column name {ROW_COLUMN!r} is sluice's own")
    written = T.StructType([f for f in schema.fields if f.name not in zero_columns(names)])
    # Null in every row (an SQS field no message of the batch carries): the
    # commit writes NULL into whatever type the table's column has.
    void = [f.name for f in schema.fields if isinstance(f.dataType, T.NullType)]
    return Wanted(target, batch_columns(written, _jdbc(target).url, target.key, target.cast), void)


def write_jdbc(df: DataFrame, target: TargetTable, manifest: Manifest) -> Written:
    """Stage the batch's rows with Spark, then commit them in one transaction."""
    cfg = target.config
    assert isinstance(cfg, JdbcTargetConfig)
    endpoint = JdbcEndpoint.from_url(cfg.url)
    dialect = endpoint.dialect
    into = dialect_engine(dialect)
    prepared = prepare_target_for(df.schema, target)
    engine, columns, void, fit = prepared.engine, prepared.columns, prepared.void, prepared.fit
    names = prepared.names
    if manifest.token > 1:  # a first attempt has no older one: no catalog look-up
        drop_stale_stages(engine, manifest)
    try:
        written = write_bulk(df, engine, target, manifest, columns, fit)
    except sa.exc.DBAPIError:
        forget_target(engine, target)  # a changed table, perhaps: check it again next time
        raise
    if written is not None:
        return written
    staging = staging_table(manifest, columns, dialect)
    try:
        with engine.begin() as conn:
            staging.create(conn)
        options = {
            "batchsize": str(cfg.write.batchsize),
            # A database of one writer at a time: parallel inserts would only wait
            # on each other's lock.
            "numPartitions": "1" if into.one_writer else str(cfg.write.num_partitions),
            **dict(into.jdbc_write_options),
        }
        # Distinct per row (partition id in the high bits), computed by Spark
        # for nothing; the commit splits a refused batch by these numbers.
        # A void column has no JDBC type to bind; its staging column stays NULL.
        zeros = zero_dates(df)
        # Floating point (NaN has no SQLite value) and SQLite's decimals staged as text:
        # Spark binds by the frame's type, so the frame gives text too.
        texts = {c.name for c in columns if isinstance(c.type, sa.Text)}
        numbers = T.FloatType | T.DoubleType | T.DecimalType
        staged = df.select(*[
            F.col(quoted(n)).cast("string").alias(n)
            if n in texts and isinstance(df.schema[n].dataType, numbers)
            else F.col(quoted(n))
            for n in names if n not in void
        ])  # fmt: skip
        numbered = staged.withColumn(ROW_COLUMN, F.monotonically_increasing_id())
        numbered.write.jdbc(
            endpoint.url,
            staging.name,
            mode="append",
            properties=endpoint.connection_properties(**options),
        )
        try:
            written = commit_staged(engine, target, staging, names, manifest, fit)
            return replace(written, method="staged jdbc", zero_dates=zeros)
        except sa.exc.DBAPIError:
            forget_target(engine, target)  # a changed table, perhaps: check it again next time
            raise
    finally:
        drop_staging(engine, staging)


def write_jdbc_straight_in(
    df: DataFrame, target: TargetTable, manifests: Sequence[Manifest]
) -> list[Written | BaseException | None]:
    """Load several batches straight into their table by one Spark job, a task per batch.

    ``df`` has one partition per manifest, in order (see
    :func:`spark_jobs.read.extract.extract_ranges`), and every manifest may be
    loaded straight in (:func:`~spark_jobs.load.bulk_paths.may_copy_straight_in`).
    Each task commits its batch in a transaction of its own, as the direct
    load of one batch does. An outcome per batch: what it wrote, the error
    its task raised, or None where the batch must go its own way (its range
    taken, a row refused, values the table would change).
    """
    prepared = ready_to_load_straight_in(df.schema, target, manifests)
    if prepared is None:
        return [None] * len(manifests)
    outcomes = write_straight_in(df, prepared.engine, target, manifests, prepared.names)
    forget_if_refused(prepared.engine, target, outcomes)
    return outcomes


def ready_to_load_straight_in(
    schema: T.StructType,
    target: TargetTable,
    manifests: Sequence[Manifest],
    exists: bool | None = None,
) -> Prepared | None:
    """The target made ready for batches of ``schema`` loaded straight in, older attempts'
    stages dropped; None when the table would change values (the staged path sets them
    aside). ``exists``: as :func:`prepare_target_for` takes it."""
    prepared = prepare_target_for(schema, target, exists)
    if prepared.fit.narrowings:
        return None
    for manifest in manifests:
        if manifest.token > 1:
            drop_stale_stages(prepared.engine, manifest)
    return prepared


def forget_if_refused(
    engine: sa.Engine, target: TargetTable, outcomes: Sequence[object]
) -> None:
    """Check the table again next time when the database refused a direct load (it may
    have changed)."""
    if any(isinstance(o, sa.exc.DBAPIError) for o in outcomes):
        forget_target(engine, target)


def jdbc_commit(target: TargetTable, batch_id: str) -> Commit | None:
    """The batch's commit as ``_sluice_commits`` records it, with its rejects counted."""
    cfg = target.config
    assert isinstance(cfg, JdbcTargetConfig)
    engine = sql_engine(cfg.url)
    commits = commits_table()
    with engine.connect() as conn:
        # Asked before every batch: the catalog only until this process has
        # made sure both tables exist (then one query answers).
        if not own_tables_known(engine):
            inspector = sa.inspect(conn)
            if not inspector.has_table(commits.name):
                return None
            if not inspector.has_table(rejects_table().name):
                query = sa.select(commits.c.token, commits.c.rows, sa.literal(0).label("rejected"))
                row = conn.execute(query.where(commits.c.batch_id == batch_id)).one_or_none()
                return _commit(row)
        return _commits_of(conn, target, [batch_id]).get(batch_id)


def jdbc_commits(target: TargetTable, batch_ids: Sequence[str]) -> dict[str, Commit] | None:
    """What :func:`jdbc_commit` says of each of ``batch_ids`` that has a commit, asked at
    once; None until this process has made sure of sluice's own tables (:func:`jdbc_commit`
    asks the catalogue first)."""
    cfg = target.config
    assert isinstance(cfg, JdbcTargetConfig)
    engine = sql_engine(cfg.url)
    if not own_tables_known(engine):
        return None
    with engine.connect() as conn:
        return _commits_of(conn, target, batch_ids)


def _commits_of(
    conn: sa.Connection, target: TargetTable, batch_ids: Sequence[str]
) -> dict[str, Commit]:
    """The commits of those of ``batch_ids`` that ``_sluice_commits`` records, with their
    rejects counted; both tables must exist."""
    commits, rejects = commits_table(), rejects_table()
    found: dict[str, Commit] = {}
    for start in range(0, len(batch_ids), _IN_LIST):
        chunk = list(batch_ids[start:start + _IN_LIST])
        rejected = (
            sa.select(rejects.c.batch_id, sa.func.count().label("rejected"))
            .where(rejects.c.batch_id.in_(chunk))
            .group_by(rejects.c.batch_id)
            .subquery()
        )
        query = (
            sa.select(commits.c.batch_id, commits.c.token, commits.c.rows,
                      sa.func.coalesce(rejected.c.rejected, 0).label("rejected"))
            .outerjoin(rejected, rejected.c.batch_id == commits.c.batch_id)
            .where(commits.c.batch_id.in_(chunk))
        )  # fmt: skip
        try:
            rows: Sequence[Any] = conn.execute(query).all()
        except sa.exc.DBAPIError:
            forget_target(conn.engine, target)  # a table dropped under us: ask the catalog again
            raise
        for row in rows:
            commit = _commit(row)
            if commit is not None:
                found[row.batch_id] = commit
    return found


_IN_LIST = 200
"""Batch ids asked at most in one query of :func:`jdbc_commits`."""


def _commit(row: sa.Row[Any] | None) -> Commit | None:
    if row is None or row.rows < 0:  # < 0: a placeholder, never committed
        return None
    return Commit(int(row.token), int(row.rows), int(row.rejected))


def sweep_jdbc_stages(target: TargetTable, manifest: Manifest) -> None:
    """Drop the staging tables older attempts of a committed batch left behind.

    A crash between the target commit and the staging table's drop leaves
    one; the re-run finds the batch committed and imports nothing, so this
    is its one chance to go.
    """
    cfg = target.config
    assert isinstance(cfg, JdbcTargetConfig)
    drop_stale_stages(sql_engine(cfg.url), manifest)
