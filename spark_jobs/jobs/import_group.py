"""Several batches imported by one Spark job: ranges of one table, or of many small ones.

What :class:`sinks.spark.SparkSink` runs when batches of one :func:`group_key`
wait for an import thread together. Each batch still commits in its own
transaction, fenced by its token, as :func:`spark_jobs.jobs.import_job.run_import`
commits one; what a Spark job costs the driver (~100-250 ms on two cores) is
paid once for them all.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from typing import Any

import sqlalchemy as sa
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from config.errors import ConfigError
from config.models import JdbcTargetConfig, SluiceConfig, SqlSourceConfig, SqsSourceConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import ImportResult, reason
from spark_jobs.engines.transforms import for_target
from spark_jobs.jobs.import_job import (
    committed_before,
    failure,
    import_new,
    imported,
    source_of,
    target_engine_of,
    target_table,
)
from spark_jobs.load.bulk_paths import bulk_load, may_copy_straight_in
from spark_jobs.load.target import Commit, TargetTable, Written
from spark_jobs.load.write import committed_batches
from spark_jobs.load.write_direct import DirectLoad, direct_load, load_directly
from spark_jobs.load.write_jdbc import (
    forget_if_refused,
    ready_to_load_straight_in,
    targets_ready,
    write_jdbc_straight_in,
)
from spark_jobs.read.computed import apply_columns
from spark_jobs.read.extract import extract_ranges, native_ranges
from spark_jobs.read.read_sql import has_native_reader, tables_columns

log = logging.getLogger(__name__)


TABLES = "tables"
"""The :func:`group_key` of batches that may share a Spark job whatever their table."""


def group_key(cfg: SluiceConfig, manifest: Manifest) -> Hashable | None:
    """Batches with the same key may be imported together by :func:`run_imports`; None: alone.

    Keyset ranges that may be loaded straight into their table: of any
    table (:data:`TABLES`) when their source is read natively and maps no
    ``columns:`` (a task then runs the read itself, whatever the table), of
    one source and table otherwise.
    """
    if manifest.kind != "range" or manifest.source not in cfg.sources:
        return None
    try:
        target = target_table(cfg, manifest)
    except ConfigError:
        return None  # run_import says what is wrong
    if not may_copy_straight_in(target, manifest):
        return None
    if _read_in_task(cfg.sources[manifest.source]):
        return TABLES
    return manifest.source, manifest.target


def runs_without_spark(cfg: SluiceConfig) -> bool:
    """Whether every batch of ``cfg`` may go to a load that reads it in its own task
    (:data:`TABLES`): keyset sources read natively into databases with a bulk path.
    (A batch may still need Spark: a row refused, values the table would change.)"""
    return all(
        isinstance(source, SqlSourceConfig) and (source.mode == "stream" or (
            source.mode == "keyset" and _read_in_task(source)))
        for source in cfg.sources.values()
    ) and all(
        isinstance(target, JdbcTargetConfig) and bulk_load(sql_engine(target.url)) is not None
        for target in cfg.targets.values()
    )  # fmt: skip


def _read_in_task(source: SqlSourceConfig | SqsSourceConfig) -> bool:
    """Whether a direct load's own task may read the source's rows, planned without Spark."""
    return (isinstance(source, SqlSourceConfig) and not source.columns
            and has_native_reader(source.url))  # fmt: skip


def run_imports(
    spark: SparkSession, cfg: SluiceConfig, manifests: Sequence[Manifest]
) -> list[ImportResult | BaseException]:
    """Import batches of one :func:`group_key` by one Spark job; an outcome per batch, in order.

    Each batch is read by a task, which loads it straight into its table and
    commits it in its own transaction, fenced by its token, as
    :func:`~spark_jobs.jobs.import_job.run_import` does for one batch: what one
    Spark job costs is paid once for them all, the batches of many small
    tables too. A batch already committed is skipped; one the job could not
    load straight in (its range taken, a row refused, values the table would
    change, the job failed as a whole) is imported on its own, as
    :func:`~spark_jobs.jobs.import_job.run_import` imports it (its commit not
    looked up twice). An outcome is the batch's result or the
    error it failed with; nothing is raised.
    """
    outcomes: dict[str, ImportResult | BaseException] = {}
    tables: dict[tuple[str, str], list[Manifest]] = {}
    known = _commits(cfg, manifests)
    for manifest in manifests:
        try:
            target = target_table(cfg, manifest)
            url = target.config.url if isinstance(target.config, JdbcTargetConfig) else ""
            done = committed_before(spark, target, manifest, known.get(url))
        except Exception as error:  # noqa: BLE001 - this batch's outcome
            outcomes[manifest.batch_id] = error
            continue
        if done is not None:
            outcomes[manifest.batch_id] = done
        else:
            tables.setdefault((manifest.source, manifest.target), []).append(manifest)
    todo = [m for batches in tables.values() for m in batches]
    if todo and _read_in_task(source_of(cfg, todo[0])):
        outcomes.update(_tables_straight_in(spark, cfg, list(tables.values())))
    elif len(todo) > 1:
        outcomes.update(_straight_in(spark, source_of(cfg, todo[0]), target_table(cfg, todo[0]),
                                     todo))  # fmt: skip
    results: list[ImportResult | BaseException] = []
    for manifest in manifests:
        outcome = outcomes.get(manifest.batch_id)
        if outcome is None:
            try:
                outcome = import_new(spark, source_of(cfg, manifest), target_table(cfg, manifest),
                                      manifest)  # fmt: skip
            except Exception as error:  # noqa: BLE001 - this batch's outcome
                outcome = error
        results.append(outcome)
    return results


def _commits(cfg: SluiceConfig, manifests: Sequence[Manifest]) -> dict[str, dict[str, Commit]]:
    """The commits of ``manifests`` the targets hold, by target URL, one query per target
    database (a small table's batch asked its own otherwise); a database missing here
    (a Parquet target, one that failed to answer) is asked batch by batch."""
    ids: dict[str, tuple[TargetTable, list[str]]] = {}
    for manifest in manifests:
        try:
            target = target_table(cfg, manifest)
        except ConfigError:
            continue  # its own outcome says what is wrong
        if isinstance(target.config, JdbcTargetConfig):
            ids.setdefault(target.config.url, (target, []))[1].append(manifest.batch_id)
    found: dict[str, dict[str, Commit]] = {}
    for url, (target, batch_ids) in ids.items():
        try:
            commits = committed_batches(target, batch_ids)
        except sa.exc.SQLAlchemyError:
            continue  # each batch asks on its own, and fails with its own error
        if commits is not None:
            found[url] = commits
    return found


def _tables_straight_in(
    spark: SparkSession, cfg: SluiceConfig, tables: list[list[Manifest]]
) -> dict[str, ImportResult | BaseException]:
    """The outcomes of the batches of several tables that one Spark job loaded straight in
    (or that failed there); no others.

    Each table's read and target are made ready here, on the driver, with no
    Spark call (:func:`~spark_jobs.read.extract.native_ranges`); the job runs the
    reads and loads of them all in at most the batches' read partitions.
    A table whose batches cannot go that way (values the table would change,
    a table that is not there) leaves them to be imported one by one.
    """
    loads: list[DirectLoad] = []
    made: list[tuple[SqlSourceConfig, TargetTable, sa.Engine]] = []
    _look_up_columns([source_of(cfg, batches[0]) for batches in tables])
    reads: list[tuple[list[Manifest], SqlSourceConfig, TargetTable, T.StructType, Any]] = []
    for batches in tables:
        source = source_of(cfg, batches[0])
        assert isinstance(source, SqlSourceConfig)
        target = target_table(cfg, batches[0])
        try:
            reads.append((batches, source, target, *native_ranges(
                source, batches, target_engine_of(target), target.zero_dates)))
        except Exception as error:  # noqa: BLE001 - each batch then tries on its own
            log.info("batches %s: imported one by one: %s",
                     ", ".join(m.batch_id for m in batches), reason(error))  # fmt: skip
    try:
        ready = targets_ready([(schema, target) for _, _, target, schema, _ in reads])
    except Exception as error:  # noqa: BLE001 - each table is then made ready on its own
        log.info("target tables made ready one by one: %s", reason(error))
        ready = [False] * len(reads)
    for (batches, source, target, schema, queries), exists in zip(reads, ready, strict=True):
        try:
            prepared = ready_to_load_straight_in(schema, target, batches, exists)
            if prepared is None:
                continue
            load = direct_load(prepared.engine, target, batches, prepared.names, queries,
                               [[i] for i in range(len(batches))],
                               prepared.fit.built_in)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - each batch then tries on its own
            log.info("batches %s: imported one by one: %s",
                     ", ".join(m.batch_id for m in batches), reason(error))  # fmt: skip
            continue
        if load is not None:
            loads.append(load)
            made.append((source, target, prepared.engine))
    if not loads:
        return {}
    every = [m for load in loads for m in load.manifests]
    tasks = min(m.read_parts or source.read.num_partitions
                for load, (source, _, _) in zip(loads, made, strict=True)
                for m in load.manifests)  # fmt: skip
    try:
        written = load_directly(spark, loads, tasks)
    except Exception as error:  # noqa: BLE001 - each batch then tries on its own
        log.info("batches %s: imported one by one: %s",
                 ", ".join(m.batch_id for m in every), reason(error))  # fmt: skip
        return {}
    outcomes: dict[str, ImportResult | BaseException] = {}
    for load, (source, target, engine), results in zip(loads, made, written, strict=True):
        forget_if_refused(engine, target, results)
        outcomes.update(_outcomes(spark, source, target, list(load.manifests), results))
    return outcomes


def _look_up_columns(sources: Sequence[SqlSourceConfig | SqsSourceConfig]) -> None:
    """The columns of the tables ``sources`` read, looked up on one connection per source
    database; best effort (each table's read says what went wrong)."""
    by_url: dict[str, list[str]] = {}
    for source in sources:
        if isinstance(source, SqlSourceConfig) and source.table:
            by_url.setdefault(source.url, []).append(source.table)
    for url, names in by_url.items():
        try:
            tables_columns(url, names)
        except sa.exc.SQLAlchemyError as error:
            log.debug("columns of %d tables not looked up at once: %s", len(names), error)


def _straight_in(
    spark: SparkSession,
    source: SqlSourceConfig | SqsSourceConfig,
    target: TargetTable,
    manifests: list[Manifest],
) -> dict[str, ImportResult | BaseException]:
    """The outcomes of the batches one Spark job loaded straight in (or failed); no others."""
    assert isinstance(source, SqlSourceConfig)
    try:
        into = target_engine_of(target)
        rows = apply_columns(extract_ranges(spark, source, manifests, into), source.columns)
        rows = for_target(rows, into, target.zero_dates)
        written = write_jdbc_straight_in(rows, target, manifests)
    except Exception as error:  # noqa: BLE001 - each batch then tries on its own
        log.info("batches %s: imported one by one: %s",
                 ", ".join(m.batch_id for m in manifests), reason(error))  # fmt: skip
        return {}
    return _outcomes(spark, source, target, manifests, written)


def _outcomes(
    spark: SparkSession,
    source: SqlSourceConfig | SqsSourceConfig,
    target: TargetTable,
    manifests: list[Manifest],
    written: Sequence[Written | BaseException | None],
) -> dict[str, ImportResult | BaseException]:
    """The batches' results or errors from what their direct loads gave; None: no outcome."""
    outcomes: dict[str, ImportResult | BaseException] = {}
    for manifest, outcome in zip(manifests, written, strict=True):
        if isinstance(outcome, Written):
            outcomes[manifest.batch_id] = imported(manifest, target, outcome)
        elif isinstance(outcome, PySparkException | Py4JError | sa.exc.SQLAlchemyError):
            outcomes[manifest.batch_id] = failure(spark, source, target, manifest, outcome)
        elif outcome is not None:
            outcomes[manifest.batch_id] = outcome
    return outcomes
