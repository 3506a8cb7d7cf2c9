"""The ``sluice`` command as a user runs it: real processes, real exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_until_then_stop, seed_orders

SLUICE = str(Path(sys.executable).parent / "sluice")
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def sluice(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SLUICE, *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False
    )


@pytest.mark.spark
def test_demo_migrates_every_row_to_parquet(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "demo"
    done = sluice("demo", "--rows", "3000", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3,000 rows in" in done.stdout
    assert "dead batches 0, rejected rows 0" in done.stdout
    assert spark.read.parquet(str(out / "lake" / "orders")).count() == 2000
    assert spark.read.parquet(str(out / "lake" / "customers")).count() == 1000
    assert (out / "demo.yaml").exists()


@pytest.mark.spark
def test_run_until_drained_exits_zero_with_a_summary(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 1500)
    config = tmp_path / "sluice.yaml"
    config.write_text(
        """
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           buffer: {capacity: 1000, replenish_below: 400}}
targets:
  lake: {kind: parquet, path: ./lake}
batch: {max_items: 400, max_wait: 100ms}
"""
    )
    done = sluice("run", str(config), "--until-drained")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1,500 rows in" in done.stdout and "source orders" in done.stdout
    assert spark.read.parquet(str(tmp_path / "lake" / "orders")).count() == 1500
    # The default ledger lives next to the config.
    assert (tmp_path / "sluice-ledger.db").exists()


def test_run_with_a_broken_config_exits_two(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("sources:\n  orders: {kind: sql, url: 'sqlite:///x.db', tabel: t}\n")
    done = sluice("run", str(config), "--until-drained", timeout=60)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "tabel" in done.stderr and "bad.yaml line 2" in done.stderr


def test_run_with_an_unreachable_source_names_it_waits_for_it_and_stops_on_a_signal(
    tmp_path: Path,
) -> None:
    config = tmp_path / "dead.yaml"
    config.write_text(
        """
sources:
  orders: {kind: sql, url: "postgresql+psycopg://u:hunter2@127.0.0.1:1/shop", table: orders,
           key: id, target: lake.orders}
targets:
  lake: {kind: parquet, path: ./lake}
"""
    )
    code, shown = run_until_then_stop(config, "refill failed", signal.SIGINT)
    # Waited for, named with why, never a crash; a stop ends it as a drain (130).
    assert code == 130, shown[-3000:]
    assert "Traceback" not in shown, shown[-3000:]
    assert "source orders: its database did not answer at start" in shown, shown
    assert (
        "source orders (table 'orders' at postgresql+psycopg://u:***@127.0.0.1:1/shop): "
        "cannot connect: " in shown
    ), shown
    assert "Connection refused" in shown
    assert "hunter2" not in shown


def test_version_names_the_installed_release() -> None:
    from importlib.metadata import version

    shown = sluice("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"sluice {version('sluice')}"
