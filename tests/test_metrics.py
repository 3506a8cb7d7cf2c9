"""The Prometheus endpoint, scraped over HTTP while a real loop runs and after it drained."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.loader import load_config_text
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.observe.metrics import SluiceCollector, start_metrics
from scheduler.probe import Probe
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sources.abc import MemorySource
from sources.queueing import QueueingLimitedSource
from tests.helpers import WatchedSink, wait_until

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders,
           buffer: {capacity: 400, replenish_below: 100}}
  customers: {kind: sql, url: "sqlite:///c.db", table: customers, key: id,
              target: lake.customers, buffer: {capacity: 400, replenish_below: 100}}
targets:
  lake: {kind: parquet, path: ./lake}
strategy: {fair: {orders: 2, customers: 1}}
batch: {max_items: 50, max_wait: 50ms}
backpressure: {max_pending: 150, resume_below: 60, max_importing_batches: 3}
"""


def build(tmp_path: Path, sink: MemorySink, rows: dict[str, int]) -> MainLoop:
    """A loop over in-memory sources and a real SQLite ledger, as in test_loop."""
    cfg = load_config_text(CONFIG, str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoints = {n: ledger.sources.register(n, fingerprint(s)) for n, s in cfg.sources.items()}
    holder: list[MainLoop] = []
    queues = {
        name: QueueingLimitedSource(
            MemorySource(name, [(k,) for k in range(1, rows[name] + 1)]),
            src.buffer.capacity, src.buffer.replenish_below,
            on_refill=lambda: holder[0].notify() if holder else None,
        )
        for name, src in cfg.sources.items()
    }
    loop = MainLoop(cfg, queues, build_strategy(cfg), ledger, sink, checkpoints)
    holder.append(loop)
    for queue in queues.values():
        queue.start()
    return loop


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint, keyed by name and sorted labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.timeout(60)
def test_scrape_while_the_gate_is_closed_and_after_the_run(tmp_path: Path) -> None:
    sink = WatchedSink(auto_complete=False)
    loop = build(tmp_path, sink, {"orders": 600, "customers": 300})
    probe = Probe(lambda: 17, ttl=60)
    probe.refresh()
    endpoint = start_metrics(0, loop, loop.queues, probe=probe, ledger_ttl=0)
    runner = threading.Thread(target=lambda: loop.run(until_drained=True), daemon=True)
    runner.start()
    try:
        # Three batches of 50 fill max_pending (150): the gate closes, feeding stops.
        wait_until(lambda: sink.in_flight() == 3, "three batches importing", event=sink.arrived)
        # The loop closes its gate right after it handed the third batch over
        # (no hook: polled).
        wait_until(lambda: not loop.gate.is_open, "the gate to close", poll=0.005)
        live = scrape(endpoint.port)
        assert live[("sluice_pending_items", ())] == 150
        assert live[("sluice_importing_batches", ())] == 3
        assert live[("sluice_gate_open", ())] == 0
        assert live[("sluice_max_pending_items", ())] == 150
        assert live[("sluice_probe_pending_items", ())] == 17
        held = sum(live[("sluice_held_items", (("source", n),))] for n in loop.queues)
        assert held == 150
        for name in loop.queues:
            assert 0 <= live[("sluice_buffer_items", (("source", name),))] <= 400
        importing = sum(
            live.get(("sluice_ledger_batches", (("source", n), ("state", "importing"))), 0)
            for n in loop.queues
        )
        assert importing == 3

        # The downstream catches up; the loop drains every source.
        def downstream() -> None:
            while runner.is_alive():
                sink.arrived.clear()
                for batch_id in sink.held():
                    sink.complete(batch_id)
                sink.arrived.wait(0.1)  # the next batch, or a look at whether the run ended

        threading.Thread(target=downstream, daemon=True).start()
        runner.join(30)
        assert not runner.is_alive()
        done = scrape(endpoint.port)
    finally:
        loop.request_stop()
        runner.join(10)
        endpoint()
    assert done[("sluice_rows_written_total", (("source", "orders"),))] == 600
    assert done[("sluice_rows_written_total", (("source", "customers"),))] == 300
    assert done[("sluice_target_rows_written_total", (("target", "lake.orders"),))] == 600
    assert done[("sluice_batches_total", (("outcome", "done"),))] == 18
    assert done[("sluice_ledger_batches", (("source", "orders"), ("state", "done")))] == 12
    assert done[("sluice_ledger_rows", (("source", "customers"),))] == 300
    assert done[("sluice_source_exhausted", (("source", "orders"),))] == 1
    assert done[("sluice_gate_open", ())] == 1
    with pytest.raises(urllib.error.URLError):
        scrape(endpoint.port)  # stopped: nothing listens any more
    loop.ledger.close()


def test_ledger_counts_are_cached_and_a_failing_ledger_does_not_break_a_scrape(
    tmp_path: Path,
) -> None:
    loop = build(tmp_path, MemorySink(), {"orders": 100, "customers": 50})
    loop.run(until_drained=True)
    now = [0.0]
    collector = SluiceCollector(loop, loop.queues, ledger_ttl=5, clock=lambda: now[0])

    def ledger_done() -> float:
        families = {f.name: f for f in collector.collect()}
        samples = families["sluice_ledger_batches"].samples
        return sum(s.value for s in samples if s.labels["state"] == "done")

    assert ledger_done() == 3  # 2 batches of orders, 1 of customers
    loop.ledger.sources.reset("customers")
    now[0] = 4.0
    assert ledger_done() == 3  # within the TTL: no query, the cached counts
    now[0] = 5.0
    assert ledger_done() == 2

    loop.ledger.close()
    loop.ledger.engine.dispose()
    broken = tmp_path / "ledger.db"
    broken.unlink()
    broken.mkdir()  # SQLite cannot open a folder: every query fails
    now[0] = 10.0
    families = {f.name: f for f in collector.collect()}
    assert families["sluice_ledger_batches"].samples  # the last counts, kept
    assert families["sluice_ledger_read_errors"].samples[0].value == 1
    assert families["sluice_rows_written"].samples  # the rest of the scrape is whole


def test_other_routes_are_served_beside_the_metrics_and_closed_with_them(tmp_path: Path) -> None:
    import json

    from scheduler.observe.http import json_route

    loop = build(tmp_path, MemorySink(), {"orders": 10, "customers": 10})
    closed = threading.Event()

    class Echo:
        """A route with connections of its own to close."""

        def __init__(self) -> None:
            self.app = json_route(lambda query: (200, {"query": query}))

        def __call__(self, environ: dict[str, object], start_response: object) -> object:
            return self.app(environ, start_response)  # type: ignore[arg-type]

        def close(self) -> None:
            closed.set()

    endpoint = start_metrics(0, loop, loop.queues, routes={"/echo": Echo()})
    base = f"http://127.0.0.1:{endpoint.port}"
    try:
        with urllib.request.urlopen(f"{base}/echo?key=1&key=2", timeout=10) as response:
            assert json.loads(response.read()) == {"query": {"key": ["1", "2"]}}
        assert ("sluice_gate_open", ()) in scrape(endpoint.port)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/nowhere", timeout=10)
        assert missing.value.code == 404
        assert json.loads(missing.value.read())["paths"] == ["/echo", "/metrics"]
    finally:
        endpoint.stop()
        loop.ledger.close()
    assert closed.is_set()
