"""``spark.deploy: submit``: each batch runs as its own ``spark-submit`` application."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from config.errors import ConfigError
from config.models import SparkConfig
from sinks import make_sink
from sinks.pyfiles import DEPS_ALIAS, PACKAGES, build_pyfiles_zip, executor_archives
from sinks.spark import SparkSink, shipped
from sinks.submit import SubmitSink
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import BatchImportFailed, ImportResult
from spark_jobs.tasks.session import SparkUnavailable, session_conf, spark_submit_args
from tests.helpers import seed_orders, write_config

CONFIG = """
work_dir: ./work
spark:
  master: "local[1]"
  deploy: {deploy}
  max_concurrent_imports: 2
  conf: {{spark.sql.shuffle.partitions: "1"}}
sources:
  orders:
    kind: sql
    url: sqlite:///shop.db
    table: orders
    key: id
    target: lake.orders
targets:
  lake: {{kind: parquet, path: ./lake}}
"""


@pytest.mark.spark
def test_submit_sink_runs_each_batch_as_its_own_application(tmp_path: Path, spark: Any) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 300)  # ids 3, 6, …, 900
    path, cfg = write_config(tmp_path, CONFIG.format(deploy="submit"))
    sink = make_sink(cfg, path)
    assert isinstance(sink, SubmitSink)
    good = Manifest("g-1", "orders", "lake.orders", "range", 300, token=4, lo=None, hi=[900])
    unknown = Manifest("u-1", "gone", "lake.orders", "range", 1, token=1, lo=None, hi=[9])

    # Both at once: two applications side by side.
    futures = [sink.submit(good), sink.submit(unknown)]
    assert sink.in_flight() == 2 and sink.pending_items() == 301
    result = futures[0].result(timeout=240)
    error = futures[1].exception(timeout=240)
    sink.close()

    assert result == ImportResult("g-1", 300, 300, "lake.orders")
    assert isinstance(error, BatchImportFailed) and not error.transient
    assert "'gone' is not in sources" in str(error) and "logs/u-1.log" in str(error)
    assert (sink.in_flight(), sink.pending_items()) == (0, 0)
    work = tmp_path / "work"
    assert Manifest.from_json((work / "manifests" / "g-1.json").read_text()) == good
    driver_log = (work / "logs" / "g-1.log").read_text()
    assert driver_log.startswith("=== ") and "token 4: " in driver_log
    assert "--py-files" in driver_log and "sluice-import-g-1" in driver_log
    printed = [line for line in driver_log.splitlines() if line.startswith('{"batch_id"')]
    assert [json.loads(line)["rows_written"] for line in printed] == [300]
    assert not list((work / "results").iterdir())  # read back and removed
    assert spark.read.parquet(str(tmp_path / "lake" / "orders")).count() == 300


@pytest.mark.spark
def test_make_sink_follows_spark_deploy(tmp_path: Path, spark: Any) -> None:
    path, cfg = write_config(tmp_path, CONFIG.format(deploy="session"))
    sink = make_sink(cfg, path)  # starts its session at once, on a thread
    assert isinstance(sink, SparkSink) and sink.py_files == []  # local: nothing to ship
    assert sink.session().sparkContext is spark.sparkContext  # the process's own
    sink.close()
    assert spark.range(3).count() == 3  # not the sink's to stop
    _, submit = write_config(tmp_path, CONFIG.format(deploy="submit"))
    with pytest.raises(ConfigError, match="needs the config file"):
        SubmitSink(submit, tmp_path / "missing.yaml")


def test_pyfiles_zip_holds_the_packages_and_conf_ships_it(tmp_path: Path) -> None:
    zip_path = build_pyfiles_zip(tmp_path / "code" / "sluice.zip")
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
    assert {n.split("/")[0] for n in names} == set(PACKAGES)
    assert "spark_jobs/jobs/import_job.py" in names and "sinks/pyfiles.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert build_pyfiles_zip(zip_path).read_bytes() == zip_path.read_bytes()  # reproducible

    cluster = SparkConfig(
        master="spark://127.0.0.1:7077", conf={"spark.submit.pyFiles": "/opt/extra.zip"}
    )
    conf = session_conf(cluster, py_files=[str(zip_path)])
    assert conf["spark.submit.pyFiles"] == f"{zip_path},/opt/extra.zip"  # ours, then the user's
    assert conf["spark.files"] == str(zip_path)
    assert conf["spark.driver.host"] == "127.0.0.1"  # a cluster on loopback stays on loopback
    args = spark_submit_args(cluster, "job", py_files=[str(zip_path)])
    assert args[args.index("--py-files") + 1] == f"{zip_path},/opt/extra.zip"
    assert not any(a.startswith("spark.submit.pyFiles=") for a in args)


def test_dependencies_archive_holds_what_executors_import_and_conf_ships_it(
    tmp_path: Path,
) -> None:
    cluster = SparkConfig(
        master="spark://127.0.0.1:7077",
        conf={"spark.archives": "/opt/env.zip#env", "spark.executorEnv.PYTHONPATH": "env"},
    )
    [entry] = executor_archives(cluster, tmp_path)
    path, _, alias = entry.partition("#")
    with zipfile.ZipFile(path) as archive:
        tops = {n.split("/")[0] for n in archive.namelist()}
    assert alias == DEPS_ALIAS
    # Each distribution's packages and what they require; not what PySpark's
    # executors have, nor anything outside site-packages.
    assert {"psycopg", "psycopg_binary", "pymysql", "sqlalchemy", "pydantic", "cachetools",
            "pydantic_core", "typing_extensions.py"} <= tops  # fmt: skip
    assert not tops & {"pyarrow", "numpy", "pandas", "pyspark", "py4j", "..", "bin"}
    assert executor_archives(cluster, tmp_path) == [entry]  # built once, then reused
    assert Path(path).stat().st_mtime_ns == Path(executor_archives(cluster, tmp_path)[0]
                                                 .partition("#")[0]).stat().st_mtime_ns  # fmt: skip

    conf = session_conf(cluster, archives=[entry])
    assert conf["spark.archives"] == f"{entry},/opt/env.zip#env"  # ours, then the user's
    assert conf["spark.executorEnv.PYTHONPATH"] == f"env:{DEPS_ALIAS}"  # the user's first
    args = spark_submit_args(cluster, "job", archives=[entry])
    assert f"spark.archives={entry},/opt/env.zip#env" in args
    # Nothing to ship for a local master (the driver's own Python runs the
    # tasks), nor when the user says the executors have it.
    assert executor_archives(SparkConfig(master="local[2]"), tmp_path) == []
    off = SparkConfig(master="spark://127.0.0.1:7077", ship_dependencies=False)
    assert executor_archives(off, tmp_path) == []


def test_a_cluster_session_ships_the_code_and_packages_whoever_starts_it(tmp_path: Path) -> None:
    """What every command's session of a cluster master ships (``sluice run``'s sink, and
    verify, cutover and import, through :func:`sinks.spark.start_session`): verify's went
    without, and its executors could not import sluice or SQLAlchemy."""
    _, cfg = write_config(tmp_path, CONFIG.format(deploy="session").replace(
        '"local[1]"', '"spark://127.0.0.1:7077"'))  # fmt: skip
    py_files, archives = shipped(cfg)
    assert py_files == [str(tmp_path / "work" / "pyfiles" / "sluice.zip")]
    with zipfile.ZipFile(py_files[0]) as archive:
        assert {n.split("/")[0] for n in archive.namelist()} == set(PACKAGES)
    assert archives == executor_archives(cfg.spark, tmp_path / "work")
    sink = SparkSink(cfg)  # the same, for the daemon's session
    assert (sink.py_files, sink.archives) == (py_files, archives)
    sink.close()
    _, local = write_config(tmp_path, CONFIG.format(deploy="session"))
    assert shipped(local) == ([], [])  # a local master's tasks run here


def test_a_jvm_that_did_not_start_is_not_started_again_for_every_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sinks.spark

    starts: list[str] = []

    def no_jvm(*args: Any, **kwargs: Any) -> Any:
        starts.append("start")
        raise SparkUnavailable("Spark could not start its JVM (JAVA_GATEWAY_EXITED)")

    monkeypatch.setattr(sinks.spark, "build_session", no_jvm)
    _, cfg = write_config(tmp_path, CONFIG.format(deploy="session"))
    sink = SparkSink(cfg)
    for _ in range(3):
        with pytest.raises(SparkUnavailable, match="JAVA_GATEWAY_EXITED"):
            sink.session()
    assert starts == ["start"]
    sink.close()
