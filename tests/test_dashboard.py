"""The Grafana dashboard (examples/grafana/sluice.json) and the live /metrics agree.

Every ``sluice_*`` metric a running daemon's endpoint serves is in some panel,
and every metric a panel queries is served: a metric added or renamed without
the dashboard (or the other way round) fails here.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.loader import load_config_text
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.observe.metrics import start_metrics
from scheduler.observe.snapshot import status_board
from scheduler.probe import Probe
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sources.abc import MemorySource
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource

DASHBOARD = Path(__file__).resolve().parent.parent / "examples" / "grafana" / "sluice.json"
CONFIG = """
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders,
           limits: {max_rows_per_s: 1000000, max_connections: 4, max_query_latency: 5s}}
targets:
  lake: {kind: parquet, path: ./lake}
batch: {max_items: 50, max_wait: 50ms}
"""
METRIC = re.compile(r"\bsluice_[a-z_]+")
STREAM_ONLY = {
    "sluice_stream_lag_seconds", "sluice_stream_changes_waiting", "sluice_stream_changes_read",
    "sluice_stream_retained_wal_bytes", "sluice_stream_max_retained_wal_bytes",
    "sluice_stream_caught_up",
}  # fmt: skip
"""Served only by a daemon with a stream source (``tests/test_stream_health.py`` checks
that it serves them, and that they are on the dashboard)."""


def _served(tmp_path: Path) -> set[str]:
    """The metric families a live endpoint serves, with a probe, limits, the ETA and a
    batch done."""
    cfg = load_config_text(CONFIG, str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoints = {n: ledger.sources.register(n, fingerprint(s)) for n, s in cfg.sources.items()}
    queues = {"orders": QueueingLimitedSource(MemorySource("orders", [(1,), (2,)]), 100, 10)}
    loop = MainLoop(cfg, queues, build_strategy(cfg), ledger, MemorySink(), checkpoints,
                    budgets=Budgets(cfg))  # fmt: skip
    queues["orders"].start()
    loop.run(until_drained=True)
    board = status_board(loop, queues)
    board.eta.counter.count_now()
    board.refresh()
    endpoint = start_metrics(0, loop, queues, probe=Probe(lambda: 3, ttl=60), eta=board.eta)
    try:
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        endpoint.stop()
        ledger.close()
    return {f.name for f in text_string_to_metric_families(text) if f.name.startswith("sluice_")}


def queried_metrics() -> dict[str, list[str]]:
    """Each metric family the dashboard's panels query, with the panels' titles."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    found: dict[str, list[str]] = {}
    for panel in panels:
        for target in panel.get("targets", []):
            for name in METRIC.findall(target["expr"]):
                found.setdefault(name.removesuffix("_total"), []).append(panel["title"])
    return found


@pytest.mark.timeout(60)
def test_every_served_metric_is_on_the_dashboard_and_every_panel_metric_is_served(
    tmp_path: Path,
) -> None:
    served = _served(tmp_path)
    queried = queried_metrics()
    assert len(served) > 20  # the endpoint really answered, probe and ledger included
    assert sorted(served - set(queried)) == [], "served but on no panel"
    assert {m: queried[m] for m in set(queried) - served - STREAM_ONLY} == {}, \
        "queried but not served"
    assert set(queried) >= STREAM_ONLY and not STREAM_ONLY & served


def test_the_dashboard_is_importable_as_it_is() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "sluice"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"])) | {"datasource"}
            assert used <= variables, (panel["title"], used - variables)
