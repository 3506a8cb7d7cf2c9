"""Write one batch into its target, idempotently.

JDBC: Spark writes the rows into a per-batch staging table; then one
transaction on the driver upserts them into the target and records the batch
and its fencing token in ``_sluice_commits``. Parquet: Spark writes one file
under a staging folder (ignored by readers: its name starts with ``_``) and a
rename publishes it as ``{path}/{table}/batch-<id>.parquet``.

Either way, writing a batch again gives the same target, and whether a batch
is committed can be read back from the target alone (:func:`committed_batch`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pyspark.sql import DataFrame, SparkSession
from sqlalchemy.dialects import mysql, postgresql, sqlite

from config.errors import TargetError
from config.models import JdbcTargetConfig, ParquetTargetConfig
from spark_jobs.jdbc import JdbcEndpoint, sql_column_type, sql_engine
from spark_jobs.manifest import Manifest

log = logging.getLogger(__name__)

COMMITS_TABLE = "_sluice_commits"


class StaleToken(TargetError):
    """The batch was committed by a newer importer (a higher fencing token)."""


class CommitConflict(TargetError):
    """Another importer committed the same batch at the same moment; retry."""

    transient = True


@dataclass(frozen=True)
class TargetTable:
    """Where a batch goes: the target's config, its schema (None: default), table and key."""

    name: str
    config: JdbcTargetConfig | ParquetTargetConfig
    schema: str | None
    table: str
    key: tuple[str, ...]

    @property
    def label(self) -> str:
        """``target.schema.table`` for messages (no URL, so no secret)."""
        return ".".join(p for p in (self.name, self.schema, self.table) if p)


def write_batch(spark: SparkSession, df: DataFrame, target: TargetTable, manifest: Manifest) -> int:
    """Write the batch's rows and commit them; return the rows written."""
    # The rows are counted where they landed (staging table, published file):
    # a Spark Observation reports 0 for JDBC writes with numPartitions set.
    if isinstance(target.config, ParquetTargetConfig):
        return _write_parquet(spark, df, target, target.config, manifest)
    return _write_jdbc(df, target, target.config, manifest)


@dataclass(frozen=True)
class Commit:
    """A batch's commit as the target records it: its fencing token and rows."""

    token: int
    rows: int


def committed_batch(
    target: TargetTable, batch_id: str, spark: SparkSession | None = None
) -> Commit | None:
    """The batch's commit in the target, or None if it was not committed.

    A Parquet batch published without its marker (a crash between the rename
    and the marker) counts as committed with token 0 and 0 rows.
    """
    if isinstance(target.config, ParquetTargetConfig):
        files = BatchFiles.of(target.config.path, target.schema, target.table, batch_id)
        fs = filesystem(files.table_dir, spark)
        if not fs.exists(files.final):
            return None
        marker = json.loads(fs.read_text(files.marker) or '{"token": 0, "rows": 0}')
        return Commit(int(marker["token"]), int(marker["rows"]))
    engine = sql_engine(target.config.url)
    try:
        commits = _commits_table(sa.MetaData())
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(COMMITS_TABLE):
                return None
            query = sa.select(commits.c.token, commits.c.rows)
            row = conn.execute(query.where(commits.c.batch_id == batch_id)).one_or_none()
            return None if row is None else Commit(int(row.token), int(row.rows))
    finally:
        engine.dispose()


def stale_token_error(target: TargetTable, manifest: Manifest, committed: int) -> StaleToken:
    """The refusal of a commit that carries an older token than the one recorded."""
    return StaleToken(
        f"stale fencing token: batch {manifest.batch_id} was committed to {target.label} "
        f"with token {committed}, this import carries {manifest.token}"
    )


# ------------------------------------------------------------------- Parquet


@dataclass(frozen=True)
class BatchFiles:
    """Where a batch lives in a Parquet table.

    ``{table}/batch-<id>.parquet`` is the published batch: plain files in the
    table folder, because Spark only reads sub-folders named ``k=v`` (which
    would add a column). ``_stage-<id>/`` and ``_sluice_commits/<id>.json``
    start with ``_``, so readers skip them.
    """

    table_dir: str
    stage: str
    final: str
    marker: str

    @classmethod
    def of(cls, root: str, schema: str | None, table: str, batch_id: str) -> BatchFiles:
        """The paths of ``batch_id`` in table ``[schema/]table`` under ``root``."""
        table_dir = "/".join(p for p in (root.rstrip("/"), schema, table) if p)
        tag = _file_tag(batch_id)
        return cls(
            table_dir=table_dir,
            stage=f"{table_dir}/_stage-{tag}",
            final=f"{table_dir}/batch-{tag}.parquet",
            marker=f"{table_dir}/{COMMITS_TABLE}/{tag}.json",
        )


def _file_tag(batch_id: str) -> str:
    # Injective and safe in any file system: keep [A-Za-z0-9-], escape the rest.
    return "".join(
        chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) == "-") else f"_{b:02x}"
        for b in batch_id.encode()
    )


class LocalFs:
    """Batch files on a local disk: ``os.replace`` publishes atomically."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list(self, folder: str) -> list[str]:
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, name) for name in os.listdir(folder)]

    def delete(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)  # atomic, and over an older copy of the batch too

    def read_text(self, path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


class HadoopFs:
    """Batch files on any Hadoop file system (hdfs://, s3a://, file://) via the JVM."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark._jvm  # PySpark exposes the JVM only through these
        self._path = jvm.org.apache.hadoop.fs.Path
        self._jvm = jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._path(path).getFileSystem(conf)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list(self, folder: str) -> list[str]:
        if not self.exists(folder):
            return []
        return [s.getPath().toString() for s in self._fs.listStatus(self._path(folder))]

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def replace(self, src: str, dst: str) -> None:
        # Hadoop's rename refuses an existing destination: a re-run of a
        # published batch removes the old file first (readers may miss the
        # batch for that instant; they never see it twice).
        self._fs.delete(self._path(dst), False)
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise TargetError(f"could not rename {src} to {dst}")

    def read_text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        stream = self._fs.open(self._path(path))
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def filesystem(path: str, spark: SparkSession | None) -> LocalFs | HadoopFs:
    """Local paths through ``os``; URLs (``scheme://``) through Hadoop's FileSystem."""
    if "://" not in path:
        return LocalFs()
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise TargetError(f"{path}: a Hadoop path needs a running SparkSession")
    return HadoopFs(spark, path)


def _write_parquet(
    spark: SparkSession,
    df: DataFrame,
    target: TargetTable,
    cfg: ParquetTargetConfig,
    manifest: Manifest,
) -> int:
    if cfg.partition_by:
        # One file per batch is what makes publishing atomic; partitions would
        # spread a batch over several folders and several renames.
        raise TargetError(
            f"targets.{target.name}.partition_by is not supported yet: leave it empty"
        )
    files = BatchFiles.of(cfg.path, target.schema, target.table, manifest.batch_id)
    fs = filesystem(files.table_dir, spark)
    fs.delete(files.stage)
    # One task writes one file, so one rename publishes the whole batch; the
    # shuffle keeps the source reads parallel.
    df.repartition(1).write.mode("overwrite").option("maxRecordsPerFile", 0).parquet(files.stage)
    parts = [p for p in fs.list(files.stage) if re.search(r"/part-[^/]*\.parquet$", p)]
    if len(parts) != 1:
        raise TargetError(f"{target.label}: expected one Parquet file for the batch, got {parts}")
    marker = fs.read_text(files.marker)
    if marker and int(json.loads(marker)["token"]) > manifest.token:
        raise stale_token_error(target, manifest, int(json.loads(marker)["token"]))
    # Counted from the file's footers; the known schema spares an inference job.
    rows = spark.read.schema(df.schema).parquet(parts[0]).count()
    fs.replace(parts[0], files.final)
    record = {
        "batch_id": manifest.batch_id,
        "token": manifest.token,
        "rows": rows,
        "committed_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    fs.write_text(files.marker, json.dumps(record))
    fs.delete(files.stage)
    return rows


# ---------------------------------------------------------------------- JDBC


def staging_table_name(batch_id: str) -> str:
    """``_sluice_stage_<batch>``: a plain lowercase identifier, unique per batch id."""
    tag = re.sub(r"[^a-z0-9]+", "_", batch_id.lower()).strip("_")[:30]
    digest = hashlib.sha1(batch_id.encode()).hexdigest()[:10]
    return f"_sluice_stage_{tag}_{digest}"


def _commits_table(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        COMMITS_TABLE,
        metadata,
        sa.Column("batch_id", sa.String(255), primary_key=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
    )


def _create_if_missing(engine: sa.Engine, table: sa.Table) -> None:
    try:
        with engine.begin() as conn:
            table.create(conn, checkfirst=True)
    except sa.exc.DBAPIError:
        # Two imports may race to create the same table: fine if it exists now.
        if not sa.inspect(engine).has_table(table.name, schema=table.schema):
            raise


def _write_jdbc(
    df: DataFrame,
    target: TargetTable,
    cfg: JdbcTargetConfig,
    manifest: Manifest,
) -> int:
    endpoint = JdbcEndpoint.from_url(cfg.url)
    dialect = endpoint.dialect
    names = df.columns
    missing_key = [k for k in target.key if k not in names]
    if missing_key:
        raise TargetError(
            f"{target.label}: key column(s) {missing_key} are not among the batch's columns "
            f"{names} (a columns: mapping must keep the key)"
        )
    columns = [
        sa.Column(f.name, sql_column_type(f.dataType, dialect, f.name in target.key, f.name))
        for f in df.schema.fields
    ]
    engine = sql_engine(cfg.url)
    staging = sa.Table(staging_table_name(manifest.batch_id), sa.MetaData(), *columns)
    try:
        _prepare_target(engine, target, columns)
        _create_if_missing(engine, _commits_table(sa.MetaData()))
        with engine.begin() as conn:
            # A stage left by a crashed attempt is replaced, never appended to.
            staging.drop(conn, checkfirst=True)
            staging.create(conn)
        options = {
            "batchsize": str(cfg.write.batchsize),
            # SQLite has one writer at a time: parallel inserts would only
            # wait on each other's lock.
            "numPartitions": "1" if dialect == "sqlite" else str(cfg.write.num_partitions),
        }
        if dialect == "postgresql":
            options["reWriteBatchedInserts"] = "true"
        df.write.jdbc(
            endpoint.url,
            staging.name,
            mode="append",
            properties=endpoint.connection_properties(**options),
        )
        return _commit(engine, target, staging, names, manifest)
    finally:
        try:
            with engine.begin() as conn:
                staging.drop(conn, checkfirst=True)
        except sa.exc.SQLAlchemyError as error:  # the next attempt replaces it anyway
            log.warning("could not drop staging table %s: %s", staging.name, error)
        engine.dispose()


def _prepare_target(engine: sa.Engine, target: TargetTable, columns: Sequence[sa.Column]) -> None:
    """Create the target table, or check that the batch's columns fit the one there."""
    table = sa.Table(
        target.table,
        sa.MetaData(),
        *[sa.Column(c.name, c.type, primary_key=c.name in target.key) for c in columns],
        schema=target.schema,
    )
    inspector = sa.inspect(engine)
    if not inspector.has_table(target.table, schema=target.schema):
        _create_if_missing(engine, table)
        return
    existing = {c["name"]: c for c in inspector.get_columns(target.table, schema=target.schema)}
    for column in columns:
        found = existing.get(column.name)
        if found is None:
            raise TargetError(
                f"{target.label}: column {column.name!r} of the batch is not in the table "
                "(add it to the table, or map the batch's columns with columns:)"
            )
        if not _compatible(found["type"], column.type, engine.dialect.name):
            raise TargetError(
                f"{target.label}: column {column.name!r} is {found['type']} in the table "
                f"but {column.type.compile(engine.dialect)} in the batch"
            )
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


def _upsert(
    dialect: str, target: TargetTable, staging: sa.Table, names: Sequence[str]
) -> sa.Executable:
    table = sa.table(target.table, *[sa.column(n) for n in names], schema=target.schema)
    rows = sa.select(*[staging.c[n] for n in names])
    updates = [n for n in names if n not in target.key]
    if dialect == "mysql":
        stmt = mysql.insert(table).from_select(names, rows)
        # ON DUPLICATE KEY needs an assignment: with no other column, a no-op on the key.
        return stmt.on_duplicate_key_update({n: stmt.inserted[n] for n in updates or names[:1]})
    if dialect == "sqlite":
        # Without a WHERE, SQLite would read "ON CONFLICT" as a join's ON clause.
        rows = rows.where(sa.true())
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    upsert = insert(table).from_select(names, rows)
    if not updates:
        return upsert.on_conflict_do_nothing(index_elements=list(target.key))
    return upsert.on_conflict_do_update(
        index_elements=list(target.key), set_={n: upsert.excluded[n] for n in updates}
    )


def _commit(
    engine: sa.Engine,
    target: TargetTable,
    staging: sa.Table,
    names: Sequence[str],
    manifest: Manifest,
) -> int:
    """The one transaction: check the token, upsert the rows, record the commit.

    Returns the rows upserted (those in the staging table).
    """
    dialect = engine.dialect.name
    commits = _commits_table(sa.MetaData())
    with engine.begin() as conn:
        query = sa.select(commits.c.token).where(commits.c.batch_id == manifest.batch_id)
        if dialect != "sqlite":  # SQLite's BEGIN IMMEDIATE already holds the lock
            query = query.with_for_update()
        current = conn.execute(query).scalar_one_or_none()
        if current is not None and current > manifest.token:
            raise stale_token_error(target, manifest, current)
        rows = conn.execute(sa.select(sa.func.count()).select_from(staging)).scalar_one()
        conn.execute(_upsert(dialect, target, staging, names))
        values = {"token": manifest.token, "rows": rows, "committed_at": dt.datetime.now(dt.UTC)}
        try:
            if current is None:
                conn.execute(commits.insert().values(batch_id=manifest.batch_id, **values))
            else:
                where = commits.c.batch_id == manifest.batch_id
                conn.execute(commits.update().where(where).values(**values))
        except sa.exc.IntegrityError as error:
            # No row to lock yet, so a concurrent importer inserted it first.
            raise CommitConflict(
                f"batch {manifest.batch_id} was committed to {target.label} concurrently; retry"
            ) from error
    return int(rows)
