"""``sluice status``, ``retry`` and ``reset`` on ledgers filled through the real Ledger API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.loader import load_config
from config.models import RetryConfig, SluiceConfig
from scheduler.commands.status import collect_status, render_text
from scheduler.ledger import Checkpoint, Ledger

SLUICE = str(Path(sys.executable).parent / "sluice")
SECRET = "s3cret-pw"  # in the source URL; must never be printed
T0 = 1_000_000.0

CONFIG = """
ledger: "{ledger}"
sources:
  orders: {{kind: sql, url: "postgresql+psycopg://app:{secret}@db1/shop", table: orders,
            key: id, target: wh.orders}}
  customers: {{kind: sql, url: "sqlite:///c.db", table: customers, key: id, mode: sweep,
               target: wh.customers}}
  events: {{kind: sqs, queue_url: "http://127.0.0.1:1/q", key: id, target: wh.events}}
targets:
  wh: {{kind: jdbc, url: "postgresql+psycopg://loader:{secret}@dw/warehouse"}}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]) -> str:
    if request.param == "sqlite":
        return sqlite_url("ledger")
    return str(request.getfixturevalue("pg_factory").create("status"))


@pytest.fixture
def filled(ledger_url: str, tmp_path: Path) -> tuple[Path, SluiceConfig]:
    """A config and a ledger where every state and a poison message occur."""
    path = tmp_path / "sluice.yaml"
    path.write_text(CONFIG.format(ledger=ledger_url, secret=SECRET))
    cfg = load_config(path)
    now = [T0]
    ledger = Ledger(ledger_url, clock=lambda: now[0])
    retry = RetryConfig(max_attempts=2, backoff=1, max_backoff=1)
    try:
        start = ledger.sources.register("orders", "f" * 64)
        _, after = ledger.claim_range("b-done", "orders", "wh.orders", start, [100], 100)
        _, after = ledger.claim_range("b-dead", "orders", "wh.orders", after, [200], 100)
        ledger.claim_range("b-claimed", "orders", "wh.orders", after, [300], 100)
        ledger.begin("b-done")
        now[0] += 10
        ledger.finish("b-done", rows=100)
        for _ in range(2):
            ledger.begin("b-dead")
            ledger.fail("b-dead", f"password {SECRET} rejected: column amount too long", retry)
        for batch_id, keys in (("k-importing", [[1], [2]]), ("k-failed", [[3]])):
            ledger.claim_keys(batch_id, "customers", "wh.customers", keys)
            ledger.begin(batch_id)
        ledger.fail("k-failed", "connection reset", retry)
        for i in range(2):
            ledger.sources.record_poison("events", f"m{i}", "{not json", "bad JSON")
    finally:
        ledger.close()
    return path, cfg


def sluice(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SLUICE, *args], input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, check=False,
    )


def states(cfg: SluiceConfig) -> dict[str, str | None]:
    ledger = Ledger(cfg.ledger)
    try:
        ids = ("b-done", "b-dead", "b-claimed", "k-importing", "k-failed")
        return {batch_id: ledger.reads.state_of(batch_id) for batch_id in ids}
    finally:
        ledger.close()


def test_status_counts_states_rows_rate_and_errors(filled: tuple[Path, SluiceConfig]) -> None:
    _, cfg = filled
    ledger = Ledger(cfg.ledger)
    try:
        status = collect_status(cfg, ledger.reads, now=T0 + 20)
        later = collect_status(cfg, ledger.reads, now=T0 + 10 + 301)
    finally:
        ledger.close()
    by_name = {s.source: s for s in status.sources}
    orders, customers, events = by_name["orders"], by_name["customers"], by_name["events"]
    assert orders.states == {"claimed": 1, "importing": 0, "done": 1, "failed": 0, "dead": 1}
    assert (orders.items, orders.rows, orders.high_water) == (300, 100, [300])
    assert orders.rows_per_s == pytest.approx(100 / 20)  # since its first batch, 20 s ago
    assert orders.eta_s is None  # the backlog is the source's to know
    [dead] = orders.dead
    assert (dead.id, dead.attempts) == ("b-dead", 2)
    assert dead.error == "password *** rejected: column amount too long"
    assert orders.last_error == dead.error
    assert customers.states == {"claimed": 0, "importing": 1, "done": 0, "failed": 1, "dead": 0}
    assert customers.last_error == "connection reset"
    assert (events.poison, events.states["done"]) == (2, 0)
    assert status.totals()["states"]["dead"] == 1 and status.totals()["rows"] == 100
    assert later.sources[0].rows_per_s == 0.0  # the done batch left the 5-minute window
    assert "unknown" in render_text(status)


def test_eta_from_the_rows_left_and_done_when_nothing_is(
    filled: tuple[Path, SluiceConfig],
) -> None:
    path, cfg = filled
    ledger = Ledger(cfg.ledger)
    try:
        status = collect_status(cfg, ledger.reads, now=T0 + 20,
                                backlog={"orders": 150, "customers": 0, "events": 0})
    finally:
        ledger.close()
    orders, customers, events = status.sources
    assert (orders.left, orders.eta_s, orders.done) == (150, pytest.approx(30.0), False)
    # Nothing left to read, but a batch imports and one waits for its retry.
    assert (customers.eta_s, customers.done) == (None, False)
    assert (events.eta_s, events.done) == (0.0, True)
    assert status.totals()["eta_s"] == pytest.approx(30.0)
    rows = {line.split()[0]: line.split() for line in render_text(status).splitlines() if line}
    assert rows["orders"][10] == "0m30s" and rows["customers"][10] == "unknown"
    assert rows["events"][10] == "done"

    # A configured rate below the one measured: the ETA goes at the rate the source may go.
    path.write_text(path.read_text().replace(
        "key: id, target: wh.orders}", "key: id, target: wh.orders, limits: {max_rows_per_s: 2}}"))
    limited = load_config(path)
    ledger = Ledger(limited.ledger)
    try:
        status = collect_status(limited, ledger.reads, now=T0 + 20, backlog={"orders": 150})
    finally:
        ledger.close()
    assert status.sources[0].rows_per_s == pytest.approx(5.0)
    assert status.sources[0].eta_s == pytest.approx(75.0)
    assert status.sources[0].configured["max_rows_per_s"] == 2
    assert "  orders: batch 2,000,000, 2 rows/s" in render_text(status)  # sluice's largest


def test_status_command_text_and_json(filled: tuple[Path, SluiceConfig]) -> None:
    path, _ = filled
    text = sluice("status", str(path))
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line.split() for line in text.stdout.splitlines() if line.strip()}
    # source target claimed importing done failed dead rows rejected rows/s ETA poison …
    assert lines["orders"][2:9] == ["1", "0", "1", "0", "1", "100", "0"]
    assert lines["events"][11] == "2"
    assert "dead orders batch b-dead (2 attempts): password *** rejected" in text.stdout

    as_json = sluice("status", str(path), "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    orders = next(s for s in report["sources"] if s["source"] == "orders")
    assert orders["states"]["dead"] == 1 and orders["dead"][0]["id"] == "b-dead"
    # ETA and done per source and overall; batch size and limits as configured.
    assert {"eta_s", "done", "left"} <= set(orders) and {"eta_s", "done"} <= set(report["totals"])
    assert orders["configured"] == {"batch_size": 2_000_000, "max_rows_per_s": None,
                                    "max_connections": 10, "max_query_latency_s": None}
    assert "configured (a running daemon's, in force, are on its /status.json):" in text.stdout
    assert report["totals"]["states"]["failed"] == 1 and report["totals"]["poison"] == 2
    for out in (text.stdout, text.stderr, as_json.stdout, as_json.stderr):
        assert SECRET not in out


def test_status_of_a_ledger_never_created_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "sluice.yaml"
    path.write_text(CONFIG.format(ledger="sqlite:///fresh.db", secret=SECRET))
    done = sluice("status", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["states"]["done"] == 0
    assert not (tmp_path / "fresh.db").exists()


def test_status_reads_a_ledger_without_writing_to_it(ledger_url: str, tmp_path: Path) -> None:
    """No table is created in an empty ledger database, and a ledger in use is only read."""
    path = tmp_path / "sluice.yaml"
    path.write_text(CONFIG.format(ledger=ledger_url, secret=SECRET))
    engine = sa.create_engine(ledger_url)
    try:
        if engine.dialect.name == "sqlite":  # an empty file, as a fresh database server would be
            engine.connect().close()
        empty = sluice("status", str(path), "--json")
        assert empty.returncode == 0, empty.stderr
        assert json.loads(empty.stdout)["totals"]["states"]["claimed"] == 0
        assert sa.inspect(engine).get_table_names() == []

        ledger = Ledger(ledger_url)
        try:
            ledger.sources.register("orders", "f" * 64)
            ledger.claim_range("b1", "orders", "wh.orders", Checkpoint(None, 0), [10], 10)
        finally:
            ledger.close()
        batches = sa.text("SELECT id, version, updated_at FROM sluice_batches")
        with engine.connect() as conn:
            before = conn.execute(batches).all()
        read = sluice("status", str(path), "--json")
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout)["totals"]["states"]["claimed"] == 1
        with engine.connect() as conn:
            after = conn.execute(batches).all()
        assert after == before
    finally:
        engine.dispose()


def test_retry_requeues_failed_then_dead(filled: tuple[Path, SluiceConfig]) -> None:
    path, cfg = filled
    failed_only = sluice("retry", str(path))
    assert failed_only.returncode == 0, failed_only.stderr
    assert "requeued 1 batches (customers 1)" in failed_only.stdout
    assert states(cfg)["k-failed"] == "claimed" and states(cfg)["b-dead"] == "dead"

    other = sluice("retry", str(path), "--dead", "--source", "customers")
    assert "requeued 0 batches" in other.stdout and states(cfg)["b-dead"] == "dead"
    dead = sluice("retry", str(path), "--dead", "--source", "orders")
    assert dead.returncode == 0 and "requeued 1 batches (orders 1)" in dead.stdout
    assert states(cfg)["b-dead"] == "claimed"
    assert sluice("retry", str(path), "--source", "nope").returncode == 2


def test_reset_asks_and_forgets_only_with_a_yes(filled: tuple[Path, SluiceConfig]) -> None:
    path, cfg = filled
    before = states(cfg)
    for stdin in (None, "n\n"):  # no stdin at all, then a "no"
        refused = sluice("reset", str(path), "--source", "orders", stdin=stdin)
        assert refused.returncode == 1 and "nothing changed" in refused.stderr
        assert states(cfg) == before
    assert sluice("reset", str(path), "--source", "nope", "--yes").returncode == 2

    done = sluice("reset", str(path), "--source", "orders", "--yes")
    assert done.returncode == 0, done.stderr
    assert "orders: forgot 3 batches" in done.stdout
    after = states(cfg)
    assert after["b-done"] is None and after["b-dead"] is None
    assert after["k-importing"] == "importing"  # other sources keep their progress
    ledger = Ledger(cfg.ledger)
    try:
        assert ledger.sources.register("orders", "e" * 64) == Checkpoint(None, 0)
    finally:
        ledger.close()

    everything = sluice("reset", str(path), stdin="y\n")
    assert everything.returncode == 0 and "customers: forgot 2 batches" in everything.stdout
    assert set(states(cfg).values()) == {None}
