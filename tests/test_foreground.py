"""``sluice import CONFIG --batch ID``: one batch in the foreground, by the ledger's rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from config.errors import ClaimConflict, LedgerError
from config.models import RetryConfig, SluiceConfig
from scheduler.commands.import_batch import import_batch
from scheduler.ledger import Ledger, fingerprint
from tests.helpers import fetch_rows, seed_orders, write_config

SLUICE = str(Path(sys.executable).parent / "sluice")


def _config(tmp_path: Path) -> tuple[Path, SluiceConfig]:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 40)  # keys 3, 6, … 120
    return write_config(tmp_path, """
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders}
targets:
  lake: {kind: parquet, path: ./lake}
retry: {max_attempts: 1}
""")


def _claim(cfg: SluiceConfig, batch_id: str, hi: int, owner: str = "daemon") -> Ledger:
    """A ledger where ``owner`` claimed keys up to ``hi`` as ``batch_id``."""
    ledger = Ledger(cfg.ledger, owner=owner)
    ledger.owners.register()
    checkpoint = ledger.sources.register("orders", fingerprint(cfg.sources["orders"]))
    ledger.claim_range(batch_id, "orders", "lake.orders", checkpoint, [hi], hi // 3)
    return ledger


@pytest.mark.spark
def test_a_dead_batch_is_imported_in_the_foreground_once(tmp_path: Path, spark: Any) -> None:
    path, cfg = _config(tmp_path)
    daemon = _claim(cfg, "b1", 60)
    daemon.begin("b1")
    assert daemon.fail("b1", "the target was down", RetryConfig(max_attempts=1)) == "dead"
    daemon.owners.unregister()
    daemon.close()

    outcome = import_batch(cfg, "b1", lambda: spark)
    assert (outcome.state, outcome.exit_code, outcome.error) == ("done", 0, None)
    assert outcome.result is not None and outcome.result.rows_written == 20
    frame = spark.read.parquet(str(tmp_path / "lake" / "orders"))
    assert sorted(r["id"] for r in frame.collect()) == list(range(3, 61, 3))
    assert {r["id"] for r in frame.collect()} <= fetch_rows(cfg.sources["orders"].url,
                                                          "orders").keys()

    again = import_batch(cfg, "b1", lambda: pytest.fail("a done batch needs no Spark"))
    assert (again.state, again.result, again.exit_code) == ("done", None, 0)
    assert spark.read.parquet(str(tmp_path / "lake" / "orders")).count() == 20


def test_a_batch_a_live_daemon_holds_is_refused(tmp_path: Path) -> None:
    _, cfg = _config(tmp_path)
    daemon = _claim(cfg, "b1", 60)
    try:
        daemon.begin("b1")  # importing, with a fresh lease, by a live owner
        with pytest.raises(ClaimConflict, match="held by a running daemon"):
            import_batch(cfg, "b1", lambda: pytest.fail("a refused batch needs no Spark"))
        assert daemon.reads.state_of("b1") == "importing"
    finally:
        daemon.close()


def test_an_unknown_batch_is_named(tmp_path: Path) -> None:
    path, cfg = _config(tmp_path)
    _claim(cfg, "b1", 60).close()
    with pytest.raises(LedgerError, match="batch nope is not in the ledger"):
        import_batch(cfg, "nope", lambda: pytest.fail("no Spark"))
    shown = subprocess.run([SLUICE, "import", str(path), "--batch", "nope"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 1, shown.stderr
    assert "batch nope is not in the ledger sqlite:///" in shown.stderr


@pytest.mark.spark
def test_a_batch_that_fails_again_records_its_error(tmp_path: Path, spark: Any) -> None:
    _, cfg = _config(tmp_path)
    daemon = _claim(cfg, "b1", 60)
    daemon.owners.unregister()  # the daemon stopped: its claimed batch is free
    daemon.close()
    (tmp_path / "shop.db").unlink()  # the source is gone: the import cannot read it
    outcome = import_batch(cfg, "b1", lambda: spark)
    assert outcome.state == "dead" and outcome.exit_code == 1
    assert outcome.error and "b1" in outcome.error
    ledger = Ledger(cfg.ledger)
    try:
        assert ledger.reads.state_of("b1") == "dead"
    finally:
        ledger.close()


@pytest.mark.spark
def test_the_import_job_takes_a_batch_from_the_ledger(tmp_path: Path, spark: Any) -> None:
    """``spark-submit scheduler/commands/import_batch.py --config CONFIG --batch ID``: same steps.

    Called in-process: the job's build_session joins the test's session.
    """
    import json

    from scheduler.commands import import_batch as import_job

    path, cfg = _config(tmp_path)
    daemon = _claim(cfg, "b2", 30)
    daemon.owners.unregister()
    daemon.close()
    result = tmp_path / "result.json"
    code = import_job.main(["--config", str(path), "--batch", "b2", "--result", str(result)])
    outcome = json.loads(result.read_text())
    assert code == 0, outcome
    assert (outcome["state"], outcome["rows_written"]) == ("done", 10)
    ledger = Ledger(cfg.ledger)
    try:
        assert ledger.reads.state_of("b2") == "done"
    finally:
        ledger.close()
    assert import_job.main(["--config", str(path), "--batch", "b2"]) == 0  # done: left alone
