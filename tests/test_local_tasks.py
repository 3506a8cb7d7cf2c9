"""Local tasks: the direct loads of a local master run by worker processes, with no JVM.

The pool must hand back what a task returns or raises, survive a worker that
dies, stop a running task when it is closed, and leave no worker behind
when sluice itself is killed (kill -9). A PostgreSQL → PostgreSQL run with
the defaults must never start Spark, and still copy every row once; so must
the tests' in-process runs, which take the same path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.loader import load_config_text
from spark_jobs.tasks.local_tasks import LocalTasks, SessionOnDemand, WorkerLost
from spark_jobs.tasks.session import local_cores
from tests.helpers import drain, scalar, wait_until

SLUICE = str(Path(sys.executable).with_name("sluice"))


def _pid() -> int:
    return os.getpid()


def _fail() -> None:
    raise ValueError("refused")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_local_masters_cores() -> None:
    assert local_cores("local[2]") == 2
    assert local_cores("local") == 1
    assert local_cores("local[*]") == os.cpu_count()
    assert local_cores("local[4, 3]") == 4
    assert local_cores("local-cluster[2,1,1024]") is None
    assert local_cores("spark://127.0.0.1:7077") is None


def test_a_task_s_value_and_error_come_back_and_workers_are_reused() -> None:
    tasks = LocalTasks(2)
    try:
        first = tasks.run(_pid)
        assert first != os.getpid()
        with pytest.raises(ValueError, match="refused"):
            tasks.run(_fail)
        assert tasks.run(_pid) == first  # the worker outlives a task's error
    finally:
        tasks.close()


def test_a_worker_that_dies_is_replaced() -> None:
    tasks = LocalTasks(1)
    try:
        first = tasks.run(_pid)
        with pytest.raises(WorkerLost):
            tasks.run(_die)
        assert tasks.run(_pid) not in (first, os.getpid())
    finally:
        tasks.close()


def test_close_stops_a_running_task() -> None:
    tasks = LocalTasks(1)
    worker = tasks.run(_pid)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            tasks.run(_sleep, 60)
        except BaseException as error:  # noqa: BLE001 - looked at below
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    tasks.close()
    thread.join(15)
    assert not thread.is_alive() and isinstance(raised[0], WorkerLost)
    assert not _alive(worker)


def test_workers_die_with_a_killed_sluice(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
        from spark_jobs.tasks.local_tasks import LocalTasks
        from tests.test_local_tasks import _pid, _sleep
        if __name__ == "__main__":  # the workers' start imports this module again
            tasks = LocalTasks(1)
            print(tasks.run(_pid), flush=True)
            tasks.run(_sleep, 120)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    assert parent.stdout is not None
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.5)
        parent.kill()  # only sluice's own process, as the OOM killer would
        parent.wait(10)
        wait_until(lambda: not _alive(worker), "the worker gone with its parent", timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)


def _items(pg_url: str, pg_target: str, folder: Path) -> str:
    """A PostgreSQL table of 5,000 items and a config that copies it into ``pg_target``
    with the defaults; the config's text, also written to ``folder``."""
    source = sa.create_engine(pg_url)
    with source.begin() as conn:
        conn.execute(sa.text("CREATE TABLE items (id bigint PRIMARY KEY, name text, n numeric)"))
        conn.execute(sa.text("INSERT INTO items SELECT g, 'item ' || g, g / 3.0 "
                             "FROM generate_series(1, 5000) g"))  # fmt: skip
    source.dispose()
    text = f"""
ledger: sqlite:///{folder / 'ledger.db'}
sources:
  items: {{kind: sql, url: "{pg_url}", table: items, key: id, target: out.items}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
"""
    (folder / "sluice.yaml").write_text(text)
    return text


def _same_items(pg_url: str, pg_target: str) -> None:
    """The target's items are the source's, by the server's own texts."""
    digest = "SELECT (count(*), sum(id), string_agg(name || n, ',' ORDER BY id))::text FROM items"
    assert scalar(pg_target, digest) == scalar(pg_url, digest)


@pytest.mark.postgres
def test_a_postgresql_copy_with_the_defaults_never_starts_spark(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    _items(pg_url, pg_target, tmp_path)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained", "-v"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "Spark session starting" not in said
    assert "copy as stored" in said
    _same_items(pg_url, pg_target)


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("spark_jobs", [False, True], ids=["default", "spark_jobs"])
def test_the_tests_daemon_loads_where_sluice_run_does(
    pg_url: str, pg_target: str, tmp_path: Path, spark: Any, spark_jobs: bool
) -> None:
    """The in-process runs of the tests (:func:`tests.helpers.drain`) take the path of
    ``sluice run`` unless told to take Spark's: the copy above never touches the session
    it is handed (standing in for the one ``sluice run`` would start); with
    ``spark_jobs`` its batches are Spark jobs on it."""
    config = load_config_text(_items(pg_url, pg_target, tmp_path), str(tmp_path / "sluice.yaml"))
    used = threading.Event()

    def start() -> Any:
        used.set()
        return spark

    summary = drain(config, tmp_path / "sluice.yaml", SessionOnDemand(start),
                    spark_jobs=spark_jobs)  # fmt: skip
    assert summary.exit_code == 0, summary
    assert used.is_set() == spark_jobs
    _same_items(pg_url, pg_target)
