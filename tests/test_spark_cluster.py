"""A migration and its verify on a real Spark standalone cluster on loopback.

One master and one worker, started with pyspark's own ``bin/spark-class``
(pip's pyspark has no ``sbin/`` scripts); then ``sluice run --until-drained``
and ``sluice verify``, each in its own process, with ``spark.master:
spark://127.0.0.1:PORT`` (Python in client deploy mode: the driver is the
sluice process, the executor runs on the worker). The master's ``/json/`` page
shows both applications really ran there, and the worker's their executors.

The executors' Python workers run this virtualenv's interpreter with sluice
itself and its Python dependencies hidden (as on a cluster that has only
PySpark, pyarrow, numpy and pandas): what they run of sluice's, and the
packages it imports, come from what sluice ships on ``spark.submit.pyFiles``
and ``spark.archives``. Each lookup of a hidden package there is traced, so
the test sees where the executors found it. One run covers the fast paths:
a PostgreSQL table copied as stored, a MariaDB table read by the executors'
own tasks (PyMySQL's read: ConnectorX is not shipped), a table of the MariaDB
catalogue's types into PostgreSQL, and SQLite read by Spark's JDBC reader into
Parquet; then ``verify`` finds them equal, on the cluster, and reads of the
databases' own text forms agree.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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

import pyarrow.parquet as pq
import pytest

from sinks.pyfiles import DEPS_ALIAS, PACKAGES
from sinks.submit import SPARK_HOME
from tests.conftest import need, spark_missing_reason
from tests.helpers import fetch_rows, seed_orders
from tests.type_matrix import (
    MARIADB_TO_PG,
    MARIADB_TYPES,
    PG_CANONICAL,
    column_name,
    compare,
    mariadb_create_source,
    mariadb_texts,
    pg_texts,
)

ROOT = Path(__file__).resolve().parent.parent
ROWS = 3_000
"""Rows of the PostgreSQL and the MariaDB orders tables: three batches each."""
LAKE_ROWS = 1_000
"""Rows of the orders table that goes into Parquet: one batch."""
HIDDEN = (*PACKAGES, "psycopg", "psycopg_binary", "pymysql", "sqlalchemy", "pydantic",
          "pydantic_core", "cachetools", "yaml", "connectorx")  # fmt: skip
"""What the executors' Python must not find installed: sluice ships it (ConnectorX excepted:
an executor reads MySQL through the PyMySQL sluice ships)."""
MATRIX = [(t, [v for v in values if t != "tinyint(1)" or v in ("0", "1")])
          for t, values in MARIADB_TYPES]  # fmt: skip
"""The MariaDB catalogue's types, without the values PostgreSQL's boolean refuses (the run
and its verify must find no reject)."""
ORDERS = ["customer", "amount", "flag", "placed_at"]
ORDERS_TYPES = ["varchar(60)", "decimal(12,2)", "smallint", "datetime"]

_HIDE = """
import importlib.machinery, os, sys, sysconfig

HIDDEN = set(os.environ["SLUICE_TEST_HIDDEN"].split(","))
# Installed: site-packages (the editable install's finder too), and this checkout.
INSTALLED = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
INSTALLED.add(os.path.realpath(os.environ["SLUICE_TEST_ROOT"]))
TRACE = os.environ["SLUICE_TEST_TRACE"]


class HideInstalled:
    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in HIDDEN:
            return None
        elsewhere = [p for p in sys.path if os.path.realpath(p or ".") not in INSTALLED]
        spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
        with open(TRACE, "a") as trace:  # one short line: an atomic append
            trace.write(f"{name}\\t{spec.origin if spec else '-'}\\n")
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} (not installed here)", name=name)
        return spec


sys.meta_path.insert(0, HideInstalled())
"""


def _bare_executor_python(folder: Path, trace: Path) -> Path:
    """An interpreter for executors: this one, without sluice or its dependencies installed;
    each lookup of one of them is a line of ``trace`` (the name, and where it was found)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(_HIDE)
    wrapper = folder / "python"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{folder}" '
        f"SLUICE_TEST_HIDDEN={','.join(HIDDEN)} SLUICE_TEST_ROOT='{ROOT}' "
        f"SLUICE_TEST_TRACE='{trace}' exec {sys.executable} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return wrapper


def _found(trace: Path) -> dict[str, set[str]]:
    """Per hidden package the executors looked up, where they found it (``-``: nowhere)."""
    found: dict[str, set[str]] = {}
    for line in trace.read_text().splitlines() if trace.exists() else ():
        name, _, origin = line.partition("\t")
        found.setdefault(name, set()).add(origin)
    return found


START_DEADLINE = 90.0  # seconds for master and worker to come up; usually ~6
RUN_TIMEOUT = 300.0  # seconds for the migration, and for its verify; usually ~25 and ~10


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
    # No PYTHONPATH: the executors, and their Python workers, inherit the worker's
    # environment, where it could lead them to sluice's code without its being shipped.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
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


def _sluice(
    cluster: Cluster, folder: Path, bare: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``sluice ARGS`` in ``folder``, its executors' Python ``bare``; this checkout's code
    on the driver (the virtualenv's sluice may be installed from another)."""
    env = {**cluster.env, "PYSPARK_PYTHON": str(bare), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(Path(sys.executable).with_name("sluice")), *args], env=env, cwd=folder,
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip


def _methods(output: str, target: str) -> list[tuple[int, str]]:
    """How each batch into ``target`` was written, as the import logged it: (rows, method)."""
    found = re.findall(rf"batch \S+: (\d+) rows into {re.escape(target)} \(([^)]*)\)", output)
    return [(int(rows), method) for rows, method in found]


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.mariadb
def test_fast_paths_and_verify_run_on_a_standalone_cluster(
    tmp_path: Path, standalone_cluster: Cluster, pg_url: str, pg_target: str, mariadb_url: str
) -> None:
    shop = f"sqlite:///{tmp_path / 'shop.db'}"
    seed_orders(shop, LAKE_ROWS)
    seed_orders(pg_url, ROWS)
    seed_orders(mariadb_url, ROWS)
    matrix_rows = mariadb_create_source(mariadb_url, "matrix", MATRIX)
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
  lite:
    kind: sql
    url: {shop}
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
  legacy:
    kind: sql
    url: {mariadb_url}
    table: orders
    key: id
    read: {{num_partitions: 1}}
    target: wh.legacy
  matrix:
    kind: sql
    url: {mariadb_url}
    table: matrix
    key: id
    target: wh.matrix
targets:
  lake: {{kind: parquet, path: ./lake}}
  wh: {{kind: jdbc, url: "{pg_target}"}}
batch: {{max_items: 1000, max_wait: 200ms}}
"""
    )
    trace = tmp_path / "executors.trace"
    bare = _bare_executor_python(tmp_path / "bare", trace)

    # -v: each batch's import logs how it was written.
    run = _sluice(standalone_cluster, tmp_path, bare, "run", str(config), "--until-drained", "-v")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert f"{2 * ROWS + LAKE_ROWS + matrix_rows:,} rows" in run.stdout, run.stdout[-2000:]
    # The executors loaded every batch themselves: none fell back to the driver.
    assert "staged on the driver" not in output, output[-3000:]
    # What the executors ran of sluice's came from the zip it shipped, the packages
    # it imports from its archive; nothing from this checkout or site-packages.
    found = _found(trace)
    assert found.keys() >= {"spark_jobs", "sqlalchemy", "psycopg"}, found
    assert all(".zip/" in where for name in PACKAGES for where in found.get(name, ())), found
    assert all(f"/{DEPS_ALIAS}/" in where for name in ("sqlalchemy", "psycopg")
               for where in found[name]), found  # fmt: skip
    # (a) The PostgreSQL table went in as stored: each batch by the source's binary COPY.
    copied = _methods(output, "wh.orders")
    assert sum(r for r, _ in copied) == ROWS, copied
    assert all(m.startswith("copy as stored") for _, m in copied), copied
    assert pg_texts(pg_target, "orders", ORDERS) == pg_texts(pg_url, "orders", ORDERS)
    # (b) The MariaDB tables were read by the executors' own tasks, straight into their
    # COPY: through PyMySQL (an executor has no ConnectorX), which only a read of the
    # source imports there (the JVM's JDBC reader would read it otherwise).
    assert found.get("connectorx") == {"-"} and found.get("pymysql"), found
    assert all(f"/{DEPS_ALIAS}/" in where for where in found["pymysql"]), found
    read = _methods(output, "wh.legacy")
    assert sum(r for r, _ in read) == ROWS and all(m.startswith("copy") for _, m in read), read
    legacy = compare(mariadb_texts(mariadb_url, "orders", ORDERS, ORDERS_TYPES),
                     pg_texts(pg_target, "legacy", ORDERS), ORDERS, ORDERS_TYPES,
                     "mariadb -> postgresql", MARIADB_TO_PG)  # fmt: skip
    assert set(legacy.results.values()) == {"same"}, legacy.table()
    # (c) Every type of the catalogue's MariaDB matrix, as the mapping says.
    columns = [column_name(t) for t, _ in MATRIX] + ["n_generated"]
    ddls = [t for t, _ in MATRIX] + ["bigint"]
    copied_matrix = pg_texts(pg_target, "matrix", columns)
    matrix = compare(mariadb_texts(mariadb_url, "matrix", columns, ddls), copied_matrix, columns,
                     [*ddls[:-1], "generated column"], "mariadb -> postgresql, on a cluster",
                     MARIADB_TO_PG, PG_CANONICAL)  # fmt: skip
    assert len(copied_matrix) == matrix_rows
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    # The Parquet lake: every row once, with its content (read by pyarrow).
    lake = pq.read_table(tmp_path / "lake" / "orders").to_pylist()
    written = {row["id"]: row for row in lake}
    source = fetch_rows(shop, "orders")
    assert len(lake) == len(written) and written.keys() == source.keys()
    assert all(str(written[k]["customer"] or "NULL") == source[k][1] for k in (3, 51, 3000))

    # (d) verify, on the cluster too (the matrix's floats and JSON, and the lake, are
    # compared by Spark's tasks there), finds every table equal.
    verify = _sluice(standalone_cluster, tmp_path, bare, "verify", str(config), "--json")
    assert verify.returncode == 0, (verify.stdout + verify.stderr)[-3000:]
    report = json.loads(verify.stdout)
    checked = {t["source"]: (t["equal"], t["checked"]) for t in report["tables"]}
    assert checked == {"lite": (True, LAKE_ROWS), "shop": (True, ROWS), "legacy": (True, ROWS),
                       "matrix": (True, matrix_rows)}, report  # fmt: skip

    # Both applications ran on this master, and their executors on this worker.
    master = _json(standalone_cluster.master_json)
    apps = master["activeapps"] + master["completedapps"]
    assert sorted(app["name"] for app in apps) == ["sluice", "sluice-verify"]
    worker = _json(standalone_cluster.worker_json)
    ran = [e["appid"] for e in worker["executors"] + worker["finishedexecutors"]]
    assert all(app["id"] in ran for app in apps), (apps, ran)
