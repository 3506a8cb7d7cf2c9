"""A change stream's health where operators see it: the page, ``/metrics``, the log, the ETA,
the progress line and ``sluice status``.

The observe layer is driven by a stand-in whose ``health()`` returns the
:class:`~sources.stream.StreamHealth` a test sets, on an injected clock: the
rates, the warning once per crossing of ``max_retained_wal``, the ETA's text.
The page and ``/metrics`` are read as an operator's tools read them (an HTML
parser, Prometheus' own text parser). One test reads a real slot of a
PostgreSQL with ``wal_level=logical`` and checks its figures against the
server's own catalogue.
"""

from __future__ import annotations

import io
import logging
import time
import urllib.request
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from config.base import parse_bytes
from config.errors import SourceError
from config.loader import load_config_text
from config.models import SluiceConfig, SqlSourceConfig
from scheduler.commands.status import collect_status, render_text
from scheduler.ledger import Ledger, LedgerReads, fingerprint
from scheduler.ledger.store import claim_changes
from scheduler.loop import MainLoop
from scheduler.observe.eta import BacklogCounter, EtaTracker, format_eta
from scheduler.observe.metrics import start_metrics
from scheduler.observe.page import render
from scheduler.observe.progress import BarProgress, LogProgress
from scheduler.observe.snapshot import status_board
from scheduler.observe.streams import StreamWatch, describe, human_bytes
from scheduler.stats import RunStats
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sources.abc import MemorySource
from sources.pg_changes import StreamNames
from sources.queueing import QueueingLimitedSource
from sources.stream import StreamHealth
from tests.helpers import FakeClock
from tests.test_dashboard import STREAM_ONLY, queried_metrics

GiB = 2**30
QUIET = StreamHealth(slot="sluice_items", publication="sluice_items", lag=None, changes_read=0,
                     waiting=0, retained_bytes=None, caught_up=False, loaded=False,
                     max_retained_wal=10 * GiB)  # fmt: skip


class FakeStream(MemorySource):
    """A stream source's stand-in: its health is what the test sets (``error``: raised)."""

    def __init__(self, name: str, health: StreamHealth = QUIET, *, owned: bool = True) -> None:
        super().__init__(name)
        self.names = StreamNames(health.publication, health.slot, owned)
        self.now = health
        self.error: Exception | None = None

    def set(self, **changes: Any) -> None:
        self.now = replace(self.now, **changes)

    def health(self, now: float | None = None) -> StreamHealth:
        if self.error is not None:
            raise self.error
        return self.now


def _watch(stream: FakeStream, clock: FakeClock) -> StreamWatch:
    return StreamWatch({stream.name: stream}, clock=clock, wall_clock=clock)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "sluice.streams" and r.levelno == logging.WARNING]  # fmt: skip


def test_bytes_are_shown_as_the_config_writes_them() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(parse_bytes("10GiB")) == "10.0 GiB"
    assert human_bytes(parse_bytes("750MiB")) == "750.0 MiB"
    assert human_bytes(3 * 2**40) == "3.0 TiB"


def test_changes_per_second_the_apply_rate_and_caught_up() -> None:
    clock, stream = FakeClock(0.0), FakeStream("items")
    watch = _watch(stream, clock)
    view = watch.poll()["items"]
    assert (view.lag_s, view.changes_per_s, view.applied_per_s, view.caught_up) == (
        None, None, None, False)  # fmt: skip
    assert "lag ?" in describe(view) and "full load running" in describe(view)

    # The full load ends: its rows wait beside the changes, not counted as changes read.
    clock.now = 5.0
    stream.set(loaded=True, changes_read=100, waiting=400, lag=3.0)
    view = watch.poll()["items"]
    assert view.changes_per_s == pytest.approx(20.0) and view.applied_per_s is None
    clock.now = 10.0
    stream.set(changes_read=200, waiting=280, lag=2.0)
    view = watch.poll()["items"]
    # 100 changes read, 120 fewer waiting: 220 reached the target in 5 s.
    assert view.changes_per_s == pytest.approx(200 / 10)
    assert view.applied_per_s == pytest.approx(220 / 5)
    assert describe(view).startswith("lag 2 s, 20.0 changes/s, 280 waiting, WAL ?")

    # The rates forget what is older than their window.
    for second in range(15, 65, 5):
        clock.now = float(second)
        stream.set(changes_read=200 + 10 * (second - 10))
        view = watch.poll()["items"]
    assert view.changes_per_s == pytest.approx(10.0)

    stream.set(caught_up=True, lag=0.0, waiting=0, retained_bytes=3 * 2**20)
    view = watch.poll()["items"]
    assert view.caught_up and describe(view) == (
        "caught up, 10.0 changes/s, 0 waiting, WAL 3.0 MiB, "
        "slot and publication sluice_items")  # fmt: skip
    # At the source's end but with changes not yet applied: not caught up.
    stream.set(lag=4.0, waiting=7)
    assert not watch.poll()["items"].caught_up


def test_the_retained_wal_is_warned_about_once_per_crossing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, stream = FakeClock(0.0), FakeStream("items", replace(QUIET, retained_bytes=GiB))
    watch = _watch(stream, clock)
    with caplog.at_level(logging.INFO, logger="sluice.streams"):
        assert not watch.poll()["items"].over_limit
        stream.set(retained_bytes=11 * GiB)
        views = [watch.poll()["items"] for _ in range(3)]
        assert all(v.over_limit for v in views)
        [warning] = _warnings(caplog)
        assert warning == views[0].warning
        assert "source items: slot sluice_items keeps 11.0 GiB of WAL" in warning
        assert "max_retained_wal (10.0 GiB; 11,811,160,064 > 10,737,418,240 bytes)" in warning
        assert "the target is behind; make room downstream" in warning
        assert "`sluice reset` the source to drop its slot" in warning
        assert describe(views[0]).endswith("WAL 11.0 GiB (over 10.0 GiB), slot and publication "
                                           "sluice_items, full load running")  # fmt: skip
        # Unknown for a while (no slot yet): neither over nor under, no new line.
        stream.set(retained_bytes=None)
        assert watch.poll()["items"].over_limit and len(_warnings(caplog)) == 1

        stream.set(retained_bytes=9 * GiB)
        assert not watch.poll()["items"].over_limit
        assert any("back under stream.max_retained_wal" in r.getMessage()
                   for r in caplog.records)  # fmt: skip
        stream.set(retained_bytes=12 * GiB)
        watch.poll()
        watch.poll()
    assert len(_warnings(caplog)) == 2 and "12.0 GiB" in _warnings(caplog)[1]

    # A slot the config names is the operator's: sluice never drops it.
    named = FakeStream("orders", replace(QUIET, slot="app_slot", publication="app_pub",
                                         retained_bytes=20 * GiB), owned=False)  # fmt: skip
    warning = _watch(named, clock).poll()["orders"].warning or ""
    assert "drop the slot app_slot yourself (the config names it" in warning


def test_a_failed_read_keeps_the_last_figures_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, stream = FakeClock(0.0), FakeStream("items")
    stream.error = SourceError("source items (table 'items' at postgresql://app@db/shop): "
                               "read failed: connection refused")  # fmt: skip
    watch = _watch(stream, clock)
    with caplog.at_level(logging.INFO, logger="sluice.streams"):
        view = watch.poll()["items"]
        assert view.slot == "sluice_items" and view.lag_s is None and view.retained_bytes is None
        assert view.error is not None and "connection refused" in view.error
        stream.error = None
        stream.set(lag=2.0, changes_read=5, retained_bytes=GiB)
        clock.now = 5.0
        assert watch.poll()["items"].error is None
        stream.error = SourceError("server closed the connection (postgresql://app:pw@db/shop)")
        clock.now = 10.0
        view = watch.poll()["items"]
        watch.poll()
    assert (view.lag_s, view.changes_read, view.retained_bytes) == (2.0, 5, GiB)
    assert view.error == "server closed the connection (postgresql://app:***@db/shop)"
    assert len(_warnings(caplog)) == 2  # once per failing spell, not per poll


def _tracker(
    clock: FakeClock, stream: FakeStream, done: dict[str, int], keys: int = 0
) -> tuple[EtaTracker, StreamWatch]:
    queues = {"items": QueueingLimitedSource(stream, 100, 10)}
    if keys:
        orders = MemorySource("orders", [(i,) for i in range(keys)])
        queues["orders"] = QueueingLimitedSource(orders, 100, 10)
    counter = BacklogCounter(queues, lambda: done, clock=clock)
    counter.count_now()
    tracker = EtaTracker(queues, lambda: done, counter=counter, clock=clock)
    # The watch is found among the queues (a source that reports a stream's health).
    assert set(tracker.streams.sources) == {"items"}
    tracker.streams.clock = tracker.streams.wall_clock = clock
    return tracker, tracker.streams


def test_a_stream_has_no_end_it_is_caught_up_or_drains_at_its_apply_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, stream, done = FakeClock(0.0), FakeStream("items"), {"items": 0}
    tracker, watch = _tracker(clock, stream, done)
    # Not read yet: a stream is never done, and its ETA is not known.
    items = tracker.sample().sources["items"]
    assert items.stream and not items.done and items.eta_s is None

    stream.set(loaded=True, caught_up=True, lag=0.0, retained_bytes=GiB)
    watch.poll()
    report = tracker.sample()
    items = report.sources["items"]
    assert (items.eta_s, items.done, items.caught_up, items.left) == (0.0, False, True, 0)
    assert format_eta(items.eta_s, items.done, items.caught_up) == "caught up"
    assert report.caught_up and not report.done and report.eta_s == 0.0
    with caplog.at_level(logging.INFO, logger="sluice.progress"):
        LogProgress()(RunStats(rows_by_source={"items": 10}), tracker.queues, report)
    [line] = [r.getMessage() for r in caplog.records if r.name == "sluice.progress"]
    assert "items 10 (buffer 0, caught up; caught up, ? changes/s, 0 waiting, WAL 1.0 GiB, " \
           "slot and publication sluice_items); caught up" in line

    screen = io.StringIO()
    bars = BarProgress({"items": 0}, console=Console(file=screen, width=200))
    bars(RunStats(rows_by_source={"items": 10}), tracker.queues, report)
    bars.close()
    [bar] = [line for line in screen.getvalue().splitlines() if line.startswith("items")]
    # No end, so no total and never done: caught up, with the stream's figures beside it.
    assert "10/?" in bar and "caught up, ? changes/s, 0 waiting" in bar and "done" not in bar

    # Behind, and nothing applied since: no apply rate to drain at, its lag says how long.
    stream.set(caught_up=False, lag=42.0, waiting=500, changes_read=500)
    clock.now = 5.0
    watch.poll()
    assert tracker.sample().sources["items"].eta_s == 42.0
    # 1,100 read since the first read, 400 waiting: 700 applied in 15 s; 400 left.
    stream.set(changes_read=1_100, waiting=400, lag=6.0)
    clock.now = 15.0
    watch.poll()
    report = tracker.sample()
    items = report.sources["items"]
    assert items.eta_s == pytest.approx(400 / (700 / 15)) and not items.caught_up
    assert items.left == 400 and report.left == 400 and report.eta_s == items.eta_s
    assert format_eta(items.eta_s, items.done, items.caught_up) == "0:00:09"


def test_the_run_takes_as_long_as_its_slowest_part_a_stream_included() -> None:
    clock, stream, done = FakeClock(0.0), FakeStream("items"), {"items": 0, "orders": 0}
    tracker, watch = _tracker(clock, stream, done, keys=1_000)
    stream.set(loaded=True, lag=30.0, waiting=900, changes_read=0)
    for second in range(0, 11):
        clock.now = float(second)
        done["orders"] = 10 * second  # 10 rows/s: 900 left, 90 s
        if second in (0, 10):
            watch.poll()
            stream.set(changes_read=100, waiting=800)  # 200 applied in 10 s: 800 at 20/s
        report = tracker.sample()
    assert report.sources["orders"].eta_s == pytest.approx(90.0)
    assert report.sources["items"].eta_s == pytest.approx(800 / 20)
    assert report.eta_s == pytest.approx(90.0) and report.left == 900 + 800
    assert not report.caught_up and not report.done


CONFIG = """
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders}
  items: {kind: sql, url: "postgresql+psycopg://app@db/shop", table: items, key: id,
          mode: stream, target: wh.items}
  lines: {kind: sql, url: "mysql+pymysql://app@db/shop", table: lines, key: id,
          mode: stream, target: wh.lines}
targets:
  lake: {kind: parquet, path: ./lake}
  wh: {kind: jdbc, url: "postgresql+psycopg://app@dw/wh"}
batch: {max_items: 50, max_wait: 50ms}
"""


class _Page(HTMLParser):
    """The page's stream rows: ``data-field`` values and texts, per ``data-stream`` row."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str], str] = {}
        self.texts: dict[tuple[str, str], str] = {}
        self._row = ""
        self._open: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "tr":
            self._row = found.get("data-stream") or found.get("data-source") or self._row
        if "data-field" in found:
            self._open = (self._row, found["data-field"])
            self.values[self._open] = found.get("data-value", "")

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self.texts.setdefault(self._open, data.strip())
            self._open = None


def _loop(tmp_path: Path, stream: FakeStream) -> tuple[MainLoop, SluiceConfig]:
    cfg = load_config_text(CONFIG, str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoints = {n: ledger.sources.register(n, fingerprint(s)) for n, s in cfg.sources.items()}
    sources = {"orders": MemorySource("orders", [(k,) for k in range(1, 101)]), "items": stream,
               "lines": MemorySource("lines")}  # fmt: skip
    queues = {name: QueueingLimitedSource(source, 400, 100) for name, source in sources.items()}
    return MainLoop(cfg, queues, build_strategy(cfg), ledger, MemorySink(), checkpoints), cfg


def test_the_page_and_the_metrics_show_each_stream(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    stream = FakeStream("items", replace(QUIET, loaded=True, lag=12.5, changes_read=1_000,
                                         waiting=250, retained_bytes=11 * GiB))  # fmt: skip
    loop, _ = _loop(tmp_path, stream)
    board = status_board(loop, loop.queues)
    watch = board.eta.streams
    watch.clock = watch.wall_clock = clock
    watch.poll()
    clock.now = 10.0
    stream.set(changes_read=1_500)
    watch.poll()
    snapshot = board.refresh()
    assert snapshot.to_json()["streams"][0]["slot"] == "sluice_items"

    page = _Page()
    page.feed(render(snapshot))
    row = {field: (page.values[("items", field)], page.texts.get(("items", field)))
           for field in ("lag_s", "changes_per_s", "waiting", "retained_bytes", "slot",
                         "publication", "stream_state", "wal_warning")}  # fmt: skip
    assert row["lag_s"] == ("12.5", "12 s") and row["changes_per_s"] == ("50.0", "50.0")
    assert row["waiting"] == ("250", "250") and row["retained_bytes"][1] == "11.0 GiB"
    assert row["slot"][1] == row["publication"][1] == "sluice_items"
    assert row["stream_state"][1] == "lagging"
    assert (row["wal_warning"][1] or "").startswith("source items: slot sluice_items keeps")
    # In the sources' table, the stream's ETA: its waiting changes at its apply rate.
    assert page.texts[("items", "state")] == "lagging"
    assert page.texts[("items", "eta_s")] == "0:00:05"  # 500 applied in 10 s: 250 at 50/s

    stream.set(caught_up=True, lag=0.0, waiting=0, retained_bytes=2**20)
    clock.now = 15.0
    watch.poll()
    page = _Page()
    page.feed(render(board.refresh()))
    assert page.texts[("items", "lag_s")] == "caught up"
    assert page.texts[("items", "eta_s")] == "caught up"
    assert page.texts[("items", "stream_state")] == "caught up"
    assert ("items", "wal_warning") not in page.texts

    endpoint = start_metrics(0, loop, loop.queues, eta=board.eta, ledger_ttl=0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics",
                                    timeout=10) as response:  # fmt: skip
            text = response.read().decode()
    finally:
        endpoint.stop()
        loop.ledger.close()
    samples = {(s.name, s.labels.get("source")): s.value
               for family in text_string_to_metric_families(text)
               for s in family.samples}  # fmt: skip
    assert samples[("sluice_stream_lag_seconds", "items")] == 0.0
    assert samples[("sluice_stream_changes_waiting", "items")] == 0
    assert samples[("sluice_stream_changes_read_total", "items")] == 1_500
    assert samples[("sluice_stream_retained_wal_bytes", "items")] == 2**20
    assert samples[("sluice_stream_max_retained_wal_bytes", "items")] == 10 * GiB
    assert samples[("sluice_stream_caught_up", "items")] == 1
    assert not any(source == "orders" for name, source in samples if "stream" in name)
    served = {f.name for f in text_string_to_metric_families(text)
              if f.name.startswith("sluice_stream_")}  # fmt: skip
    assert served == STREAM_ONLY and served <= set(queried_metrics())  # the dashboard's


def test_status_offline_names_the_slot_and_the_position_claimed(tmp_path: Path) -> None:
    cfg = load_config_text(CONFIG, str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    try:
        for name in ("items", "lines"):
            start = ledger.sources.register(name, fingerprint(cfg.sources[name]))
            hi = [(0x16 << 32) + 0xB374D848, 3] if name == "items" else [1234, 2]
            claim_changes(ledger, f"b-{name}", name, f"wh.{name}", start, hi, ["{}"], [""])
        status = collect_status(cfg, LedgerReads(ledger.engine), backlog={"items": 0})
    finally:
        ledger.close()
    by = {s.source: s for s in status.sources}
    assert by["items"].stream is not None and by["items"].stream.slot == "sluice_items"
    assert by["lines"].stream is not None and by["lines"].stream.slot is None
    assert by["orders"].stream is None
    # A stream is never done, whatever its backlog: it follows the source.
    assert not by["items"].done and by["items"].eta_s is None
    text = render_text(status)
    assert "  items: slot sluice_items, publication sluice_items; claimed up to " \
           "LSN 16/B374D848, event 3" in text  # the LSN as PostgreSQL prints it
    assert "  lines: binary log; claimed up to GTID sequence 1234, event 2" in text
    assert status.to_json()["sources"][1]["stream"]["position"] == [0x16B374D848, 3]


@pytest.mark.postgres
def test_a_real_slot_s_figures_match_the_server_s_catalogue(
    tmp_path: Path, logical_pg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from sources.stream import StreamSource

    url = logical_pg.create("health_src")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE items (id integer PRIMARY KEY, name text)"))
        conn.execute(sa.text("INSERT INTO items SELECT i, 'row ' || i "
                             "FROM generate_series(1, 5) AS i"))  # fmt: skip
    cfg = load_config_text(f"""
ledger: sqlite:///ledger.db
sources:
  items: {{kind: sql, url: '{url}', table: items, key: id, mode: stream, page_size: 100,
          target: wh.items, stream: {{max_retained_wal: 100}}}}
targets:
  wh: {{kind: jdbc, url: '{url}'}}
""", str(tmp_path / "sluice.yaml"))  # fmt: skip
    src = cfg.sources["items"]
    assert isinstance(src, SqlSourceConfig)
    source = StreamSource("items", src)
    try:
        source.check()
        begun = time.time()  # the transaction commits between these two (one clock)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO items VALUES (6, 'six'), (7, 'seven')"))
            conn.execute(sa.text("UPDATE items SET name = 'one' WHERE id = 1"))
        committed = time.time()
        events = 0
        for _ in range(20):
            events += sum(item.rows for item in source.next_batch(1_000))
            if source.exhausted:
                break
        with caplog.at_level(logging.INFO, logger="sluice.streams"):
            watch = StreamWatch({"items": source})
            asked = time.time()
            view = watch.poll()["items"]
            answered = time.time()
            watch.poll()
        with engine.connect() as conn:
            kept = conn.execute(sa.text(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) "
                "FROM pg_replication_slots WHERE slot_name = 'sluice_items'")).scalar_one()
            published = conn.execute(sa.text(
                "SELECT count(*) FROM pg_publication_tables "
                "WHERE pubname = 'sluice_items' AND tablename = 'items'")).scalar_one()
        # Nothing acknowledged: the slot keeps at least what it kept when the watch read it.
        assert view.retained_bytes is not None and 0 < view.retained_bytes <= int(kept)
        assert published == 1 and view.slot == view.publication == "sluice_items"
        assert view.loaded and view.changes_read == 3  # two inserts, one update
        # The load read the table as the slot's snapshot had it (5 rows), then the 3 changes
        # came; no target applied anything: the changes wait, and the target lags.
        assert events == 5 + 3 and view.waiting == 3
        # Behind by the age of the oldest change not applied: the transaction's commit time.
        assert view.lag_s is not None and asked - committed <= view.lag_s <= answered - begun
        assert committed + 60 - begun >= source.lag(now=committed + 60) >= 60
        assert not view.caught_up
        [warning] = _warnings(caplog)
        assert "slot sluice_items keeps" in warning and "(100 B;" in warning
    finally:
        source.drop()
        source.close()
        engine.dispose()


class _AtItsEnd:
    """A change stream with nothing in it: what a stream source reads when it is at its end
    (its watermarks come back through it; its table is empty)."""

    what, at_end, reached, shared = "nothing", True, 0, False
    whole_chunks = False
    snapshot = None  # its load reads between watermarks

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.end = 0

    def open(self) -> None: ...
    def columns(self) -> list[str]:
        return ["id"]

    def read(self, after: int, messages: int) -> list[Any]:
        from sources.stream_backends import Txn

        self.end += 1
        found, self.marks = self.marks, []
        return [Txn(self.end, 0.0, [], found)] if found else []

    def acknowledge(self, end: int) -> None: ...
    def mark(self, content: str) -> None:
        self.marks.append(content)

    def chunk(self, after: Any, rows: int) -> list[dict[str, Any]]:
        return []

    def retained_bytes(self) -> None:
        return None

    def close(self) -> None: ...
    def current(self, keys: Any, columns: Any) -> dict[Any, Any]:
        return {}


def test_a_stream_is_caught_up_only_while_its_last_read_at_the_end_is_recent() -> None:
    import time

    from sources.stream import StreamSource
    from sources.stream_applied import FRESH_END

    cfg = SqlSourceConfig(kind="sql", url="postgresql+psycopg://u@127.0.0.1:1/db",
                          table="items", key=["id"], mode="stream", target="wh.items")  # fmt: skip
    stream = StreamSource("items", cfg)
    stream._stream = _AtItsEnd()  # type: ignore[assignment]  # no server: its end at once
    assert stream.next_batch(100) == [] and stream.exhausted
    now = time.time()
    assert stream.health(now).caught_up and stream.lag(now) == 0.0
    # Not asked again since (a closed gate, a busy loop): behind by up to that long.
    later = now + FRESH_END + 8.0
    assert not stream.health(later).caught_up
    assert stream.lag(later) == pytest.approx(FRESH_END + 8.0, abs=1.0)
