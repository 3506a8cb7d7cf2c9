"""The backpressure probe: a real PostgreSQL count and a real HTTP endpoint, cached reads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sqlalchemy as sa
from apscheduler.schedulers.background import BackgroundScheduler

from config.errors import ConfigError
from config.models import ProbeConfig
from scheduler.probe import Probe, build_probe, check_sql
from tests.helpers import FakeClock

PASSWORD = "probe-s3cret"  # PostgreSQL trusts loopback and ignores it; it must never show


@pytest.mark.postgres
def test_sql_probe_counts_caches_and_goes_stale(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE staging (id int)"))
        conn.execute(sa.text("INSERT INTO staging SELECT generate_series(1, 3)"))
    url = sa.make_url(pg_url).set(password=PASSWORD).render_as_string(hide_password=False)
    clock = FakeClock()
    probe = build_probe(ProbeConfig(sql="SELECT count(*) FROM staging", url=url, ttl=5),
                        clock=clock)
    assert probe.value() == 0 and probe.reading().value is None  # nothing read yet
    assert probe.refresh().value == 3
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO staging VALUES (4), (5)"))
    assert probe.value() == 3  # cached: value() does no I/O
    clock.now += 5
    assert probe.refresh().value == 5
    clock.now += 16  # three TTLs without a fresh reading: unknown, not a stale number
    assert probe.value() == 0 and "stale" in (probe.reading().error or "")

    check_sql(url, "SELECT count(*) FROM staging;")
    with pytest.raises(ConfigError, match="backpressure.probe.sql") as refused:
        check_sql(url, "SELECT count(*) FROM no_such_table")
    missing = ProbeConfig(sql="SELECT count(*) FROM no_such_table", url=url)
    broken = build_probe(missing, clock=clock)
    with caplog.at_level(logging.WARNING, logger="sluice.probe"):
        reading = broken.refresh()
    assert reading.value is None and "no_such_table" in (reading.error or "")
    assert PASSWORD not in str(refused.value) + (reading.error or "") + caplog.text
    probe.stop()
    broken.stop()
    engine.dispose()


class Downstream:
    """A tiny HTTP endpoint answering ``body`` with ``status``."""

    def __init__(self) -> None:
        self.body, self.status = b"42\n", 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/pending"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def downstream() -> Iterator[Downstream]:
    server = Downstream()
    yield server
    server.close()


def test_http_probe_reads_a_number_and_treats_failures_as_unknown(downstream: Downstream) -> None:
    probe = build_probe(ProbeConfig(http=downstream.url, ttl=5), clock=FakeClock())
    assert probe.refresh().value == 42
    for body, status in ((b"lots", 200), (b"-3", 200), (b"7", 503)):
        downstream.body, downstream.status = body, status
        reading = probe.refresh()
        assert reading.value is None and reading.error and probe.value() == 0
    downstream.body, downstream.status = b" 12.0 ", 200
    assert probe.refresh().value == 12
    downstream.close()
    assert probe.refresh().value is None  # connection refused: unknown


@pytest.mark.timeout(30)
def test_background_refresh_wakes_the_loop_and_value_never_waits(downstream: Downstream) -> None:
    changed = threading.Event()
    periodic = BackgroundScheduler(daemon=True)
    periodic.start()
    probe = build_probe(ProbeConfig(http=downstream.url, ttl=0.02), on_change=changed.set)
    probe.schedule(periodic)
    assert changed.wait(10) and probe.value() == 42
    changed.clear()
    downstream.body = b"3"
    assert changed.wait(10) and probe.value() == 3
    assert probe.stop()

    # A read stuck in I/O never holds up value().
    release, entered = threading.Event(), threading.Event()

    def stuck() -> int:
        entered.set()
        release.wait(10)
        return 9

    slow = Probe(stuck, ttl=60, name="slow")
    slow.schedule(periodic)
    assert entered.wait(10)
    assert slow.value() == 0  # answered from the cache while the read hangs
    release.set()
    assert slow.stop()
    assert slow.value() == 9
    periodic.shutdown()
