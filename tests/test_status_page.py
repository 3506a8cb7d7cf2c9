"""The live status page (``/``) and ``/status.json``: rendered safely, and, during a real
run, read by headless Chromium after its script ran, with the same numbers as
``/status.json`` and the ledger.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.loader import load_config
from scheduler.daemon import Daemon, RunSummary
from scheduler.observe.eta import format_eta
from scheduler.observe.page import render
from scheduler.observe.snapshot import (
    DaemonView,
    DeadView,
    GateView,
    LimitsView,
    SourceView,
    StatusSnapshot,
    Totals,
)
from tests.conftest import need
from tests.helpers import seed_orders, wait_until

ROWS = 8_000
RATE = 800


class _Page(HTMLParser):
    """The numbers of a status page: ``data-field``/``data-value`` per source row and
    in the totals, and the attributes of the elements with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, dict[str, str]] = {}
        self.ids: dict[str, dict[str, str]] = {}
        self.texts: dict[tuple[str, str], str] = {}
        self._scope = "page"
        self._open: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if "id" in found:
            self.ids[found["id"]] = found
        if tag == "tr" and "data-source" in found:
            self._scope = found["data-source"]
        elif found.get("id") == "totals":
            self._scope = "totals"
        if "data-field" in found:
            self.fields.setdefault(self._scope, {})[found["data-field"]] = found.get(
                "data-value", ""
            )
            self._open = (self._scope, found["data-field"])

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self.texts.setdefault(self._open, data.strip())
            self._open = None


def _snapshot(name: str, error: str) -> StatusSnapshot:
    source = SourceView(
        name=name,
        kind="sql keyset",
        target="lake.orders",
        rows_done=1_500,
        rows_done_run=1_500,
        left=500,
        progress=0.75,
        rows_per_s=250.0,
        eta_s=2.0,
        done=False,
        chart=(0.0, 250.0),
        buffered=100,
        held=200,
        capacity=1_000,
        refilling=False,
        exhausted=False,
        failed=False,
        refill_error=None,
        failing_s=None,
        at_limit=True,
        batch_size=125,
        waiting_for=(),
        limits=LimitsView(500.0, 250.0, 0.5, 4, 2, 1, 0.5, 0.0),
        states={"done": 3},
        last_error=error,
    )
    return StatusSnapshot(
        at=1_700_000_000.0,
        owner="host:1:abc",
        run_s=12.0,
        sources=(source,),
        totals=Totals(1_500, 500, 250.0, 2.0, False),
        gate=GateView("open", "0 items pending", 0, None, 10, 5, 0, 2),
        dead=(DeadView(name, "b-1", 5, error, 0.0),),
        daemons=(DaemonView("host:1:abc", 1.0, True, True, "0.1.0"),),
    )


def test_the_page_escapes_what_users_and_databases_wrote() -> None:
    name, error = '<img src=x onerror="alert(1)">', "<script>alert('x')</script> & more"
    page = render(_snapshot(name, error))
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    parsed = _Page()
    parsed.feed(page)
    assert parsed.fields[name]["rows_done"] == "1500" and parsed.fields[name]["left"] == "500"
    assert parsed.fields[name]["rows_per_s_limit"] == "250.0"
    assert parsed.texts[(name, "eta_s")] == "0:00:02"
    assert parsed.ids["gate"]["data-state"] == "open"


def test_a_source_held_for_its_parents_says_which() -> None:
    snapshot = _snapshot("shop.order_lines", "")
    held = replace(snapshot.sources[0], waiting_for=("shop.orders", "shop.products"))
    page = render(replace(snapshot, sources=(held,)))
    assert '<span class="badge waiting" data-field="state">waiting</span>' in page
    assert "after shop.orders, shop.products" in page


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _status(base: str) -> dict[str, Any] | None:
    try:
        return dict(_get(f"{base}/status.json"))
    except OSError:  # not serving yet (or a 503 before the first snapshot)
        return None


def _ledger_rows(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(sa.text(
                "SELECT coalesce(sum(rows), 0) FROM sluice_batches WHERE state = 'done'"
            )) or 0)  # fmt: skip
    finally:
        engine.dispose()


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=True)


@pytest.mark.spark
@pytest.mark.timeout(240)
def test_headless_chromium_reads_the_live_page_as_status_json_and_the_ledger_say(  # type: ignore[no-untyped-def]
    tmp_path: Path, spark
) -> None:
    need(
        shutil.which("chromium") is not None,
        "chromium is not installed (make test installs Debian's package)",
    )
    from sinks.spark import SparkSink

    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", ROWS)
    config, port = tmp_path / "sluice.yaml", _free_port()
    config.write_text(f"""
ledger: sqlite:///ledger.db
metrics_port: {port}
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           page_size: 400, limits: {{max_rows_per_s: {RATE}}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 2000, max_wait: 50ms}}
""")
    cfg = load_config(config)
    daemon = Daemon(cfg, config_path=str(config), sink=SparkSink(cfg, spark=spark))
    ended: list[RunSummary] = []
    runner = threading.Thread(target=lambda: ended.append(daemon.run(until_drained=True)),
                              daemon=True)  # fmt: skip
    runner.start()
    base, shot = f"http://127.0.0.1:{port}", tmp_path / "status-page.png"
    try:
        # Mid-run: rows done (the JVM is up), the rate known, most rows still to go.
        wait_until(lambda: (s := _status(base)) is not None
                   and s["sources"][0]["rows_per_s"] and 0 < s["totals"]["rows_done"] < ROWS / 2,
                   "the run to be under way", timeout=120, poll=0.2)  # fmt: skip
        ledger_before, read_at = _ledger_rows(cfg.ledger), time.time()
        # A snapshot built after that read: this one, and the page's, count those rows.
        wait_until(lambda: (s := _status(base)) is not None and s["at"] > read_at + 0.1,
                   "a snapshot newer than the ledger read", poll=0.1)  # fmt: skip
        before = _status(base)
        dom = _chromium("--virtual-time-budget=5000", "--dump-dom", f"{base}/",
                        profile=tmp_path / "chromium").stdout  # fmt: skip
        _chromium(f"--screenshot={shot}", "--window-size=1400,760", f"{base}/",
                  profile=tmp_path / "chromium")  # fmt: skip
        after, ledger_after = _status(base), _ledger_rows(cfg.ledger)
        with sa.create_engine(cfg.ledger).connect() as conn:
            owners = set(conn.scalars(sa.text("SELECT owner FROM sluice_owners")))
    finally:
        if daemon.loop is not None:
            daemon.loop.request_stop()  # seen: the rest of the run would only take time
        runner.join(120)
        daemon.close()
    assert before is not None and after is not None
    assert ended and ended[0].exit_code == 0, ended

    page = _Page()
    page.feed(dom)
    refreshed = re.search(r'<body data-refreshed="(\d+)"', dom)
    assert refreshed and int(refreshed.group(1)) >= 1, "the page's script never ran"
    orders, totals = page.fields["orders"], page.fields["totals"]
    done = int(orders["rows_done"])
    # The page's snapshot is between the two /status.json reads, and the ledger's.
    assert before["sources"][0]["rows_done"] <= done <= after["sources"][0]["rows_done"]
    assert ledger_before <= done <= ledger_after, (ledger_before, done, ledger_after)
    assert int(totals["rows_done"]) == done and 0 < done < ROWS
    # Rows done and left make the table (within a batch: a count races with the buffer).
    assert abs(done + int(orders["left"]) - ROWS) <= RATE // 2, orders
    assert int(totals["left"]) == int(orders["left"])
    # What the loop says, as the JSON says it.
    assert int(orders["batch_size"]) == after["sources"][0]["batch_size"] > 0
    assert (
        float(orders["rows_per_s_limit"])
        == after["sources"][0]["limits"]["rows_per_s_in_force"]
        == RATE
    )
    eta = float(orders["eta_s"])
    assert 0 < eta < 60 and page.texts[("orders", "eta_s")] == format_eta(eta)
    assert 0 < float(orders["rows_per_s"]) <= RATE
    assert page.ids["gate"]["data-state"] in {"open", "closed", "full"}
    assert page.ids["dead"]["class"] == "muted"  # "none"
    # The live daemons: this one, as the ledger lists it.
    owner = before["owner"]
    assert f'data-owner="{owner}"' in dom and owner in owners
    assert [(d["owner"], d["live"], d["me"]) for d in after["daemons"]] == [(owner, True, True)]
    # The screenshot is kept with the test's files.
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
