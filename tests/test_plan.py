"""``sluice plan``: backlogs read-only, the strategy replayed, nothing written."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.daemon import Daemon
from sinks.abc import MemorySink
from tests.helpers import write_config

pytestmark = pytest.mark.timeout(60)

SLUICE = Path(sys.executable).with_name("sluice")

CONFIG = """
ledger: sqlite:///ledger.db
work_dir: ./work
sources:
  orders: {kind: sql, url: "sqlite:///orders.db", table: t, key: id, target: lake.orders}
  customers: {kind: sql, url: "sqlite:///customers.db", table: t, key: id, mode: sweep,
              where: "status = 'ready'", target: lake.customers}
targets:
  lake: {kind: parquet, path: ./lake}
strategy: {fair: {orders: 2, customers: 1}}
batch: {max_items: 50, max_wait: 50ms}
"""


def seed(url: str, first: int, last: int) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, status TEXT)"))
        conn.execute(
            sa.text("INSERT INTO t (id, status) VALUES (:id, :status)"),
            [{"id": i, "status": "ready" if i % 2 else "new"} for i in range(first, last + 1)],
        )
    engine.dispose()


def plan(config: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [str(SLUICE), "plan", str(config), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a digest of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def fed(output: str) -> list[tuple[str, int]]:
    return [(m[1], int(m[2])) for m in re.finditer(r"tick +\d+ +(\w+) +(\d+) items", output)]


def test_plan_reads_backlogs_and_replays_the_strategy_writing_nothing(tmp_path: Path) -> None:
    seed(f"sqlite:///{tmp_path / 'orders.db'}", 1, 250)
    seed(f"sqlite:///{tmp_path / 'customers.db'}", 1, 120)
    path, cfg = write_config(tmp_path, CONFIG)
    before = snapshot(tmp_path)

    code, out = plan(path, "--ticks", "6")
    assert code == 0, out
    assert re.search(r"orders +sql keyset +250 +rows from the start", out), out
    assert re.search(r"customers +sql sweep +60 +rows matching where:", out), out
    assert "ledger" in out and "none yet" in out
    # fair 2:1 from equal virtual times: orders, customers, orders, orders, customers, orders
    assert fed(out) == [("orders", 50), ("customers", 50), ("orders", 50), ("orders", 50),
                        ("customers", 10), ("orders", 50)]
    reasons = re.findall(r"tick +\d+ +(\w+) +\d+ items +(.+)", out)
    assert reasons and all(source in why for source, why in reasons)  # each tick says why
    assert "left after them: orders 50, customers 0" in out
    assert snapshot(tmp_path) == before  # no ledger, no work folder, no -wal/-shm files
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "work").exists()

    # After a run, the plan starts from the ledger's checkpoint, still writing nothing.
    daemon = Daemon(cfg, sink=MemorySink())
    try:
        assert daemon.run(until_drained=True).exit_code == 0
    finally:
        daemon.close()
    seed(f"sqlite:///{tmp_path / 'orders.db'}", 251, 280)
    before = snapshot(tmp_path)
    code, out = plan(path, "--ticks", "3")
    assert code == 0, out
    assert re.search(r"orders +sql keyset +30 +rows past \[250\]", out), out
    assert re.search(r"customers +sql sweep +60 +rows matching where:, 60 keys claimed", out), out
    assert fed(out) == [("orders", 30)]
    assert snapshot(tmp_path) == before


def test_plan_reports_an_unreadable_source_and_exits_1(tmp_path: Path) -> None:
    seed(f"sqlite:///{tmp_path / 'orders.db'}", 1, 10)
    path, _ = write_config(tmp_path, CONFIG)  # customers.db does not exist
    code, out = plan(path, "--ticks", "2")
    assert code == 1, out
    assert "customers" in out and "does not exist" in out
    assert fed(out) == [("orders", 10)]
    assert not (tmp_path / "customers.db").exists()
