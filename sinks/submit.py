"""The ``spark.deploy: submit`` sink: every batch is its own ``spark-submit`` application.

For clusters where the import jobs should not share the scheduler's JVM: each
batch runs ``spark_jobs/jobs/import_job.py`` under pyspark's own ``bin/spark-submit``
with sluice's code zipped on ``--py-files``. Per batch, under ``work_dir``:

- ``manifests/<batch>.json``: the manifest the job reads (kept, for ``sluice`` to show);
- ``logs/<batch>.log``: the driver's output, every attempt appended;
- ``results/<batch>.json``: the job's outcome, read back and removed.

The exit status says success or failure; the result file says what was
written, or what went wrong and whether a retry can help. A JVM start costs
seconds per batch: this mode suits big batches on a cluster, not small ones.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pyspark

from config.catalog import CATALOG_ENV
from config.errors import ConfigError
from config.models import SluiceConfig
from sinks.abc import PoolSink, SinkClosed
from sinks.pyfiles import build_pyfiles_zip, executor_archives
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs import import_job
from spark_jobs.jobs.import_job import BatchImportFailed, ImportResult
from spark_jobs.load.write_parquet import file_tag
from spark_jobs.tasks.children import ignore_stop_signals
from spark_jobs.tasks.session import is_loopback_master, spark_submit_args

log = logging.getLogger(__name__)

SPARK_HOME = Path(pyspark.__file__).resolve().parent
"""pyspark's package folder, which holds ``bin/spark-submit`` and Spark's jars."""

_RESULT_FIELDS = {f.name for f in fields(ImportResult)}


class SubmitSink(PoolSink):
    """Runs each batch through ``spark-submit``, ``spark.max_concurrent_imports`` at a time.

    ``config_path`` is the YAML file the job loads (the driver runs on this
    machine: Python on a standalone cluster runs in client deploy mode).
    """

    label = "spark-submit sink"

    def __init__(
        self, cfg: SluiceConfig, config_path: str | os.PathLike[str], spark_home: Path = SPARK_HOME
    ) -> None:
        self.cfg = cfg
        self.config_path = Path(config_path).resolve()
        if not self.config_path.is_file():
            raise ConfigError(
                f"spark.deploy: submit needs the config file the jobs load; "
                f"{self.config_path} is not a file"
            )
        self.spark_home = spark_home
        self.work_dir = Path(cfg.work_dir)
        for folder in ("manifests", "logs", "results"):
            (self.work_dir / folder).mkdir(parents=True, exist_ok=True)
        self.py_files = [str(build_pyfiles_zip(self.work_dir / "pyfiles" / "sluice.zip"))]
        self.archives = executor_archives(cfg.spark, self.work_dir)
        super().__init__(cfg.spark.max_concurrent_imports, "sluice-submit")
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._forced = False

    def paths(self, batch_id: str) -> tuple[Path, Path, Path]:
        """The manifest, driver log and result file of a batch."""
        tag = file_tag(batch_id)
        return (
            self.work_dir / "manifests" / f"{tag}.json",
            self.work_dir / "logs" / f"{tag}.log",
            self.work_dir / "results" / f"{tag}.json",
        )

    def command(self, manifest: Manifest) -> list[str]:
        """The ``spark-submit`` command line of one batch."""
        manifest_path, _, result_path = self.paths(manifest.batch_id)
        name = f"sluice-import-{manifest.batch_id}"
        return [
            str(self.spark_home / "bin" / "spark-submit"),
            *spark_submit_args(
                self.cfg.spark, app_name=name, py_files=self.py_files, archives=self.archives
            ),
            str(Path(import_job.__file__).resolve()),
            "--config", str(self.config_path),
            "--manifest", str(manifest_path),
            "--result", str(result_path),
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The job's environment: ours (``${ENV}`` in the config still resolves), plus Spark's."""
        env = {**os.environ, "SPARK_HOME": str(self.spark_home)}
        # The driver's Python is this one; executors get spark.pyspark.python.
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", env["PYSPARK_PYTHON"])
        if is_loopback_master(self.cfg.spark.master):
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if self.cfg.groups:  # the job expands tables: sources without inspecting again
            env[CATALOG_ENV] = self.cfg.table_catalog.to_json()
        return env

    def close(self, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._forced = not wait
            running = list(self._running.values())
        if not wait:
            for proc in running:  # the driver and its children (spark-submit's JVM)
                # SIGKILL: they ignore the stop signals (see spark_jobs.tasks.children).
                _signal_group(proc, signal.SIGKILL)
        self._shutdown(wait)

    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        manifest_path, log_path, result_path = self.paths(manifest.batch_id)
        manifest_path.write_text(manifest.to_json(), encoding="utf-8")
        result_path.unlink(missing_ok=True)
        command = self.command(manifest)
        with log_path.open("ab") as driver_log:
            started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            header = f"=== {started} token {manifest.token}: {shlex.join(command)}\n"
            driver_log.write(header.encode())
            driver_log.flush()
            with self._lock:
                if self._forced:
                    raise SinkClosed("the spark-submit sink was closed before the batch started")
                # Its own process group, so that a forced close stops the JVM as
                # well; deaf to the stop signals a service manager sends the
                # whole service, so that a drain lets the batch finish.
                proc = subprocess.Popen(
                    command, stdout=driver_log, stderr=subprocess.STDOUT,
                    env=self.environment(), cwd=self.work_dir, start_new_session=True,
                    preexec_fn=ignore_stop_signals,
                )  # fmt: skip
                self._running[ticket] = proc
            try:
                code = proc.wait()
            finally:
                with self._lock:
                    self._running.pop(ticket, None)
        return self._outcome(manifest, code, log_path, result_path)

    def _outcome(
        self, manifest: Manifest, code: int, log_path: Path, result_path: Path
    ) -> ImportResult:
        try:
            outcome = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            outcome = {}
        result_path.unlink(missing_ok=True)
        if code == 0 and outcome.keys() >= _RESULT_FIELDS:
            return ImportResult(**{k: v for k, v in outcome.items() if k in _RESULT_FIELDS})
        if "error" in outcome:
            message = f"{outcome['error']} (driver log: {log_path})"
            raise BatchImportFailed(message, transient=bool(outcome.get("transient", True)),
                                    permanent=bool(outcome.get("permanent", False)))
        # No word from the job: the JVM died, was killed, or spark-submit refused
        # its options. A retry may help; the log says more.
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        raise BatchImportFailed(
            f"batch {manifest.batch_id}: spark-submit ended with {how} and no result; "
            f"driver log: {log_path}"
        )


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already ended
        os.killpg(proc.pid, signum)
