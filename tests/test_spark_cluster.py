"""A migration on a real Spark standalone cluster on loopback.

One master and one worker, started with pyspark's own ``bin/spark-class``
(pip's pyspark has no ``sbin/`` scripts); then ``sluice run --until-drained``
in its own process with ``spark.master: spark://127.0.0.1:PORT`` (Python in
client deploy mode: the driver is the sluice process, the executor runs on
the worker). The master's ``/json/`` page shows the application really ran
there, and the worker's shows its executor.

The executor's Python workers run this virtualenv's interpreter with
sluice's Python dependencies hidden (as on a cluster that has only PySpark,
pyarrow, numpy and pandas): the PostgreSQL ranges are still COPYed straight
in by the executor, with what sluice ships on ``spark.archives``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sinks.submit import SPARK_HOME
from tests.conftest import need, spark_missing_reason
from tests.helpers import fetch_rows, seed_orders

ROWS = 3_000
HIDDEN = ("psycopg", "psycopg_binary", "pymysql", "sqlalchemy", "pydantic", "pydantic_core")
"""What the executors' Python must not find installed: sluice ships it."""

_HIDE = """
import importlib.machinery, os, sys, sysconfig

HIDDEN = set(os.environ["SLUICE_TEST_HIDDEN"].split(","))
SITE = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}


class HideInstalled:
    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in HIDDEN:
            return None
        elsewhere = [p for p in sys.path if os.path.realpath(p or ".") not in SITE]
        spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} (not installed here)", name=name)
        return spec


sys.meta_path.insert(0, HideInstalled())
"""


def _bare_executor_python(folder: Path) -> Path:
    """An interpreter for executors: this one, without sluice's dependencies installed."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(_HIDE)
    wrapper = folder / "python"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{folder}" '
        f'SLUICE_TEST_HIDDEN={",".join(HIDDEN)} exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


START_DEADLINE = 90.0  # seconds for master and worker to come up; usually ~6
RUN_TIMEOUT = 300.0  # seconds for the migration; usually ~25


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster: where to submit, and its two JSON pages."""

    master: str
    master_json: str
    worker_json: str
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _worker_alive(url: str) -> bool:
    try:
        return any(w["state"] == "ALIVE" for w in _json(url)["workers"])
    except (OSError, ValueError, KeyError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a daemon and every process it started (its own process group)."""
    for signum, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A master and one worker (1 core, 1 GB) on free loopback ports, for one test."""
    need(spark_missing_reason() is None, spark_missing_reason() or "")
    port, web, worker_web = _free_port(), _free_port(), _free_port()
    # SPARK_LOCAL_IP: the web UIs, the worker and its executors bind to loopback too.
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    # No REST submission server: it would take the fixed port 6066.
    master_env = {**env, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [
            spark_class, "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web),
        ],
        "worker": [
            spark_class, "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
            "--webui-port", str(worker_web), "--work-dir", str(tmp_path / "worker"),
            master_url,
        ],
    }  # fmt: skip
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, command in commands.items():
            with (tmp_path / f"{name}.log").open("wb") as log:
                procs[name] = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT,
                    env=master_env if name == "master" else env, start_new_session=True,
                )  # fmt: skip
        master_json = f"http://127.0.0.1:{web}/json/"
        deadline = time.monotonic() + START_DEADLINE
        while not _worker_alive(master_json):
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = {n: (tmp_path / f"{n}.log").read_text(errors="replace")[-1500:]
                        for n in procs}  # fmt: skip
                pytest.fail(f"standalone cluster did not come up (ended: {dead}): {logs}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                procs["master"].wait(timeout=0.25)  # the poll interval, cut short if it dies
        yield Cluster(master_url, master_json, f"http://127.0.0.1:{worker_web}/json/", env)
    finally:
        for proc in reversed(procs.values()):
            _stop(proc)


@pytest.mark.spark
@pytest.mark.postgres
def test_migration_runs_on_a_standalone_cluster(
    tmp_path: Path, standalone_cluster: Cluster, spark: Any, pg_url: str, pg_target: str
) -> None:
    shop = f"sqlite:///{tmp_path / 'shop.db'}"
    seed_orders(shop, ROWS)
    seed_orders(pg_url, ROWS)
    config = tmp_path / "sluice.yaml"
    config.write_text(
        f"""
ledger: sqlite:///ledger.db
work_dir: ./work
spark:
  master: {standalone_cluster.master}
  max_concurrent_imports: 2
  conf:
    spark.executor.memory: 512m
    spark.cores.max: "1"
    spark.sql.shuffle.partitions: "1"
sources:
  orders:
    kind: sql
    url: sqlite:///shop.db
    table: orders
    key: id
    buffer: {{capacity: 2000, replenish_below: 500}}
    read: {{num_partitions: 1}}
    target: lake.orders
  shop:
    kind: sql
    url: {pg_url}
    table: orders
    key: id
    read: {{num_partitions: 1}}
    target: wh.orders
targets:
  lake: {{kind: parquet, path: ./lake}}
  wh: {{kind: jdbc, url: "{pg_target}"}}
batch: {{max_items: 1000, max_wait: 200ms}}
"""
    )
    sluice = Path(sys.executable).with_name("sluice")
    bare = _bare_executor_python(tmp_path / "bare")
    env = {**standalone_cluster.env, "PYSPARK_PYTHON": str(bare)}
    run = subprocess.run(
        [str(sluice), "run", str(config), "--until-drained"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert f"{2 * ROWS:,} rows" in run.stdout
    # The executor COPYed the PostgreSQL ranges itself: none fell back to the driver.
    assert "staged on the driver" not in output, output[-3000:]
    assert fetch_rows(pg_target, "orders") == fetch_rows(pg_url, "orders")

    # Every row once, with its content.
    frame = spark.read.parquet(str(tmp_path / "lake" / "orders"))
    written = {row["id"]: row for row in frame.collect()}
    source = fetch_rows(shop, "orders")
    assert written.keys() == source.keys()
    assert all(str(written[k]["customer"] or "NULL") == source[k][1] for k in (3, 51, 9000))

    # The application ran on this master, and its executor on this worker.
    master = _json(standalone_cluster.master_json)
    apps = master["activeapps"] + master["completedapps"]
    assert [app["name"] for app in apps] == ["sluice"]
    worker = _json(standalone_cluster.worker_json)
    ran = [e["appid"] for e in worker["executors"] + worker["finishedexecutors"]]
    assert apps[0]["id"] in ran
