"""Signals sent the way service managers and terminals send them: to the whole process group.

``kill -TERM -PGID`` (a shell's job control, systemd's ``KillMode=control-group``)
reaches the Spark JVM and its Python workers as well as sluice. They must not
die of it: sluice drains the batches in flight and exits 143 (130 for SIGINT);
SIGHUP reloads the config and the run goes on. Each signal is sent while the
ledger shows a batch importing; every batch of the source sleeps in its
``where:`` so that one always is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.helpers import seed_orders

SLUICE = str(Path(sys.executable).parent / "sluice")
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
ROWS = 3000
BATCH = 200


class Run:
    """``sluice run CONFIG`` in a process group of its own, its output in files."""

    def __init__(self, folder: Path, config: Path) -> None:
        self.folder = folder
        self.stdout_path, self.stderr_path = folder / "stdout.txt", folder / "stderr.txt"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [SLUICE, "run", str(config)], stdout=out, stderr=err, env=ENV, cwd=folder,
                start_new_session=True,
            )
        self.ledger = sa.create_engine(f"sqlite:///{folder / 'sluice-ledger.db'}")

    def states(self) -> dict[str, int]:
        try:
            with self.ledger.connect() as conn:
                rows = conn.execute(
                    sa.text("SELECT state, count(*) FROM sluice_batches GROUP BY state")
                ).all()
        except sa.exc.OperationalError:
            return {}  # not created yet
        return {state: int(count) for state, count in rows}

    def wait_for(self, done: int, timeout: float = 150) -> None:
        """Until ``done`` batches are done and one is importing (the signal's moment)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.states()
            if states.get("done", 0) >= done and states.get("importing", 0) > 0:
                return
            try:
                self.proc.wait(timeout=0.1)  # polls another process's ledger; ends if it dies
            except subprocess.TimeoutExpired:
                continue
            break
        self.proc.kill()
        self.proc.wait(timeout=30)
        pytest.fail(f"never {done} batches done and one importing (exit {self.proc.returncode}, "
                    f"states {self.states()}): {self.stderr()[-3000:]}")

    def signal_group(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def finish(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.ledger.dispose()


@pytest.fixture
def run(tmp_path: Path, pg_url: str) -> Iterator[Run]:
    seed_orders(pg_url, ROWS)
    config = tmp_path / "sluice.yaml"
    config.write_text(
        f"""
sources:
  orders:
    kind: sql
    url: "{pg_url}"
    table: orders
    key: id
    where: "(SELECT pg_sleep(0.3)) IS NOT NULL"
    buffer: {{capacity: {4 * BATCH}, replenish_below: {2 * BATCH}}}
    target: lake.orders
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {BATCH}, max_wait: 50ms}}
backpressure: {{max_pending: {2 * BATCH}, resume_below: {BATCH}, max_importing_batches: 2}}
"""
    )
    started = Run(tmp_path, config)
    yield started
    started.close()


def _assert_drained(run: Run, spark, code: int, name: str) -> None:  # type: ignore[no-untyped-def]
    stderr = run.stderr()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert f"stopped by {name}" in run.stdout(), run.stdout()[-2000:]
    states = run.states()
    assert set(states) == {"done"}, states  # the batches in flight were finished, not dropped
    written = spark.read.parquet(str(run.folder / "lake" / "orders"))
    with run.ledger.connect() as conn:
        rows = conn.scalar(sa.text("SELECT sum(rows) FROM sluice_batches"))
    assert written.count() == rows == written.select("id").distinct().count()
    assert run.proc.returncode == code


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_sighup_to_the_group_reloads_and_sigterm_to_the_group_drains_and_exits_143(
    run: Run, spark  # type: ignore[no-untyped-def]
) -> None:
    run.wait_for(done=1)
    run.signal_group(signal.SIGHUP)
    done_at_hangup = run.states().get("done", 0)
    # The run goes on: more batches get done, by the same JVM.
    run.wait_for(done=done_at_hangup + 2)
    assert "config reloaded (SIGHUP)" in run.stderr()
    run.signal_group(signal.SIGTERM)
    _assert_drained(run, spark, run.finish(), "SIGTERM")
    assert run.proc.returncode == 143


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_sigint_to_the_group_drains_and_exits_130(run: Run, spark) -> None:  # type: ignore[no-untyped-def]
    run.wait_for(done=1)
    run.signal_group(signal.SIGINT)
    _assert_drained(run, spark, run.finish(), "SIGINT")
