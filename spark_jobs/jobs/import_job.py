"""The Spark import job: one batch from its source into its target.

One code path, run in-process by :class:`sinks.spark.SparkSink` or on its own:

    spark-submit spark_jobs/jobs/import_job.py --config CONFIG --manifest FILE [--result FILE]

The caller (a daemon's spark-submit sink) owns the batch in the ledger; this
job never reads or writes the ledger. To import a batch by its id, taking it
from the ledger and recording the outcome there, run
``spark-submit scheduler/commands/import_batch.py --config CONFIG --batch ID``
(what ``sluice import CONFIG --batch ID`` does in-process).

A batch already committed in its target is not imported again (the result
says ``skipped``): after a crash between the target commit and the ledger,
re-running the batch only reconciles. A commit carrying an older fencing token
than the one recorded is refused (:class:`~spark_jobs.load.target.StaleToken`).
Rows the target refuses are set aside in ``_sluice_rejects`` and counted in
``rows_rejected``; the rest of the batch commits.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and not __package__:
    # Run as a script by spark-submit from a checkout: make the project's
    # packages importable (the zip on spark.submit.pyFiles does it otherwise).
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import sqlalchemy as sa
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from config.errors import ConfigError, SluiceError
from config.models import (
    ParquetTargetConfig,
    SluiceConfig,
    SqlSourceConfig,
    SqsSourceConfig,
    split_target,
)
from spark_jobs.changes.apply_changes import COMMITTED_BEFORE
from spark_jobs.changes.stream_import import import_changes
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed, ImportResult, reason, transient
from spark_jobs.engines.transforms import for_target, target_engine
from spark_jobs.load.bulk_paths import may_copy_straight_in
from spark_jobs.load.target import Commit, TargetTable, Written, stale_token_error
from spark_jobs.load.write import committed_batch, sweep_stages, write_batch
from spark_jobs.read.computed import apply_columns
from spark_jobs.read.extract import SqlReader, extract
from spark_jobs.tasks.local_tasks import local_tasks

log = logging.getLogger(__name__)


def run_import(spark: SparkSession, cfg: SluiceConfig, manifest: Manifest) -> ImportResult:
    """Import one batch and commit it in its target; idempotent per batch id.

    Blocks until the target commit is done. Raises :class:`SluiceError`
    subclasses: ``StaleToken`` (a newer importer committed), ``TargetError``
    (the target cannot take the batch), ``BatchImportFailed`` (Spark/JDBC).
    """
    source = source_of(cfg, manifest)
    target = target_table(cfg, manifest)
    # A stream's batch asks in its own transaction, under its commit row's lock
    # (spark_jobs.changes.apply_changes): asking here too cost a connection and a query a batch.
    done = None if manifest.kind == "changes" else committed_before(spark, target, manifest)
    if done is not None:
        return done
    return import_new(spark, source, target, manifest)


def import_new(
    spark: SparkSession,
    source: SqlSourceConfig | SqsSourceConfig,
    target: TargetTable,
    manifest: Manifest,
) -> ImportResult:
    """Import a batch the target does not hold yet (see :func:`run_import`)."""
    if manifest.kind == "changes":
        assert isinstance(source, SqlSourceConfig)
        written = import_changes(source, target, manifest, local_tasks(spark))
        if written.method == COMMITTED_BEFORE:  # nothing read or written: as committed_before
            return ImportResult(manifest.batch_id, 0, written.rows, manifest.target, True)
        return imported(manifest, target, written)
    started = time.monotonic()
    try:
        one_task = may_copy_straight_in(target, manifest)
        into = target_engine_of(target)
        rows = apply_columns(extract(spark, source, manifest, one_task, into), source.columns)
        rows = for_target(rows, into, target.zero_dates)
        written = write_batch(spark, rows, target, manifest)
    except (PySparkException, Py4JError, sa.exc.SQLAlchemyError) as error:
        raise failure(spark, source, target, manifest, error) from error
    if written.seconds is None:  # no task of its own timed it: its time here
        written = replace(written, seconds=time.monotonic() - started)
    return imported(manifest, target, written)


def committed_before(
    spark: SparkSession, target: TargetTable, manifest: Manifest,
    known: Mapping[str, Commit] | None = None,
) -> ImportResult | None:  # fmt: skip
    """The result of a batch the target already holds (``skipped``), or None.

    After a crash between the target commit and the ledger, re-running the
    batch only reconciles. A commit with a newer token is another importer's:
    raises ``StaleToken``. ``known``: the commits of a group of batches asked
    at once (:func:`~spark_jobs.load.write.committed_batches`), this one among them
    if it has one; None: asked here.
    """
    if known is not None:
        commit = known.get(manifest.batch_id)
    else:
        commit = committed_batch(target, manifest.batch_id, spark)
    if commit is None:
        return None
    if commit.token > manifest.token:
        raise stale_token_error(target, manifest, commit.token)
    _sweep(target, manifest, spark)
    return ImportResult(manifest.batch_id, 0, commit.rows, manifest.target, True, commit.rejected)


def failure(
    spark: SparkSession,
    source: SqlSourceConfig | SqsSourceConfig,
    target: TargetTable,
    manifest: Manifest,
    error: Exception,
) -> BatchImportFailed:
    """Spark's or a database's error as the batch's :class:`BatchImportFailed`."""
    if isinstance(source, SqlSourceConfig):
        SqlReader(spark, source).forget_schema()  # the table may have changed
    return BatchImportFailed(
        f"batch {manifest.batch_id} ({manifest.source} -> {target.label}): {reason(error)}",
        transient=transient(error),
    )


def imported(manifest: Manifest, target: TargetTable, written: Written) -> ImportResult:
    """The result of a batch the target took (``written``), logged."""
    # Nothing between extract and write drops rows, except the duplicate
    # bodies of one key in a payloads batch.
    staged = written.rows + written.rejected
    rows_read = len(manifest.payloads) if manifest.kind in ("payloads", "changes") else staged
    log.info(
        "batch %s: %d rows into %s (%s), %d rejected",
        manifest.batch_id,
        written.rows,
        target.label,
        written.method,
        written.rejected,
    )
    if written.zero_dates:
        log.warning("batch %s: zero dates set to NULL in %s: %s", manifest.batch_id, target.label,
                    ", ".join(f"{c} {n}" for c, n in sorted(written.zero_dates.items())))
    return ImportResult(manifest.batch_id, rows_read, written.rows, manifest.target, False,
                        written.rejected, written.seconds, dict(written.zero_dates))


def is_committed(cfg: SluiceConfig, manifest: Manifest) -> bool:
    """True when the target records the batch as committed (reconciliation after a crash)."""
    target = target_table(cfg, manifest)
    spark = SparkSession.getActiveSession()  # only needed for non-local Parquet paths
    return committed_batch(target, manifest.batch_id, spark) is not None


def target_table(cfg: SluiceConfig, manifest: Manifest) -> TargetTable:
    """Resolve ``target.table`` / ``target.schema.table`` and the key of the batch's target."""
    name, schema, table = split_target(manifest.target)
    if name not in cfg.targets:
        raise ConfigError(f"batch {manifest.batch_id}: target {name!r} is not in targets:")
    source = source_of(cfg, manifest)
    cursor = source.cursor if isinstance(source, SqlSourceConfig) else None
    sql = source if isinstance(source, SqlSourceConfig) else None
    return TargetTable(name, cfg.targets[name], schema, table, target_key(source), cursor,
                       dict(sql.cast or {}) if sql else {},
                       (sql.zero_dates or "null") if sql else "null")  # fmt: skip


def target_engine_of(target: TargetTable) -> str:
    """The engine name of a batch's target (``parquet`` for a Parquet table)."""
    cfg = target.config
    return target_engine("parquet" if isinstance(cfg, ParquetTargetConfig) else cfg.url)


def target_key(source: SqlSourceConfig | SqsSourceConfig) -> tuple[str, ...]:
    """The target's key columns: the SQL key, or the SQS key field (its last part if nested)."""
    if isinstance(source, SqlSourceConfig):
        return source.key_columns
    return (source.key.rsplit(".", 1)[-1],)


def _sweep(target: TargetTable, manifest: Manifest, spark: SparkSession) -> None:
    """Best effort: leftovers never fail a batch that is already committed."""
    try:
        sweep_stages(target, manifest, spark)
    except (PySparkException, Py4JError, sa.exc.SQLAlchemyError, OSError) as error:
        log.warning(
            "batch %s: could not remove what older attempts staged: %s",
            manifest.batch_id,
            reason(error),
        )


def source_of(cfg: SluiceConfig, manifest: Manifest) -> SqlSourceConfig | SqsSourceConfig:
    """The batch's source; a :class:`ConfigError` when the config has none of that name."""
    if manifest.source not in cfg.sources:
        raise ConfigError(
            f"batch {manifest.batch_id}: source {manifest.source!r} is not in sources:"
        )
    return cfg.sources[manifest.source]


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/jobs/import_job.py --config CONFIG --manifest FILE``.

    Prints the :class:`ImportResult` as one JSON line; exit 0 on success, the
    error's exit code (1 failed, 2 bad config) otherwise. With ``--result``,
    also writes the outcome there as JSON: the result's fields, or
    ``{"error": …, "transient": …, "exit_code": …}`` — how a ``spark-submit``
    sink learns what happened without parsing the driver log.
    """
    parser = argparse.ArgumentParser(prog="import_job", description="Import one sluice batch.")
    parser.add_argument("--config", required=True, type=Path, help="the sluice YAML config")
    parser.add_argument("--manifest", required=True, type=Path,
                        help="the batch manifest (JSON)")  # fmt: skip
    parser.add_argument("--result", type=Path, help="where to write the outcome (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Imported here: config.loader pulls in YAML handling the job itself does not need.
    from config.catalog import catalog_from_env
    from config.loader import load_config
    from spark_jobs.tasks.session import build_session

    try:
        cfg = load_config(args.config, tables=catalog_from_env(os.environ))
        manifest = Manifest.from_json(args.manifest.read_text(encoding="utf-8"))
        target_table(cfg, manifest)  # an unknown source or target fails before the JVM starts
        spark = build_session(cfg.spark, app_name=f"sluice-import-{manifest.batch_id}")
        result = run_import(spark, cfg, manifest)
    except SluiceError as error:
        return report_failure(args.result, str(error), error.transient, error.exit_code,
                              error.permanent)  # fmt: skip
    except (OSError, ValueError) as error:  # an unreadable config or manifest
        return report_failure(args.result, str(error), False, 2)
    except Exception as error:  # the JVM died under us, …: say so, in the result too
        return report_failure(args.result, f"{type(error).__name__}: {reason(error)}", True, 1)
    outcome = asdict(result)
    write_result(args.result, outcome)
    print(json.dumps(outcome))
    return 0


def report_failure(
    result: Path | None, message: str, transient: bool, exit_code: int, permanent: bool = False
) -> int:
    """Say why the job failed on stderr and in ``result``; returns ``exit_code``."""
    print(f"error: {message}", file=sys.stderr)
    write_result(result, {"error": message, "transient": transient, "exit_code": exit_code,
                          "permanent": permanent})
    return exit_code


def write_result(path: Path | None, outcome: dict[str, object]) -> None:
    """Write the job's outcome as JSON to ``path`` (if given), whole or not at all."""
    if path is None:
        return
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(outcome), encoding="utf-8")
    temporary.replace(path)  # the reader never sees half a file


if __name__ == "__main__":
    sys.exit(main())
