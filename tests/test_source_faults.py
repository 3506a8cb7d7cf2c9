"""A source database that goes away mid-run while another source keeps flowing.

The ``flaky`` source (PostgreSQL or MariaDB) is reached through a
:class:`~tests.tcp_proxy.TcpProxy` that the test cuts while the real daemon
runs; the ``steady`` source (SQLite) is untouched. The downstream is a
:class:`~sinks.abc.MemorySink` whose batches the test completes itself, so the
test decides when buffers drain and refills happen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.daemon import Daemon, RunSummary
from scheduler.ledger import Ledger
from sinks.abc import MemorySink
from spark_jobs.common.manifest import Manifest
from tests.helpers import write_config
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(90)

FLAKY_ROWS = 600
STEADY_ROWS = 1500
WAIT = 30.0  # hard limit on each phase of a test, in seconds


def seed(url: str, rows: int) -> list[int]:
    engine = sa.create_engine(url)
    md = sa.MetaData()
    items = sa.Table("items", md, sa.Column("id", sa.Integer, primary_key=True,
                                            autoincrement=False))
    md.create_all(engine)
    keys = [2 * i for i in range(1, rows + 1)]
    with engine.begin() as conn:
        conn.execute(items.insert(), [{"id": k} for k in keys])
    engine.dispose()
    return keys


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ]
)
def flaky_db(request: pytest.FixtureRequest) -> Iterator[tuple[str, TcpProxy]]:
    """A database behind a proxy: (its URL through the proxy, the proxy)."""
    url = request.getfixturevalue("pg_url" if request.param == "postgres" else "mariadb_url")
    parsed = sa.make_url(url)
    assert parsed.host is not None and parsed.port is not None
    with TcpProxy((parsed.host, parsed.port)) as proxy:
        yield proxy.url_for(url), proxy


def wait_until(what: str, condition: Callable[[], bool], *, pump: MemorySink | None = None) -> None:
    """Wait (at most WAIT s) until ``condition()``; meanwhile complete ``pump``'s batches."""
    deadline = time.monotonic() + WAIT
    idle = threading.Event()
    while not condition():
        if pump is not None:
            for batch_id in pump.held():  # the downstream keeps up
                pump.complete(batch_id)
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        idle.wait(0.01)


def count(sink: MemorySink, source: str) -> int:
    return sum(1 for m in list(sink.submitted) if m.source == source)


def covered(manifests: list[Manifest], source: str, keys: list[int]) -> dict[int, int]:
    """How many range batches of ``source`` each key falls in."""
    hits = dict.fromkeys(keys, 0)
    for m in manifests:
        if m.source != source:
            continue
        assert m.kind == "range" and m.hi is not None
        lo = m.lo[0] if m.lo else None
        for k in keys:
            if (lo is None or lo < k) and k <= m.hi[0]:
                hits[k] += 1
    return hits


def test_a_source_that_goes_away_is_retried_while_the_other_keeps_flowing(
    tmp_path: Path, flaky_db: tuple[str, TcpProxy]
) -> None:
    flaky_url, proxy = flaky_db
    flaky_keys = seed(flaky_url, FLAKY_ROWS)
    steady_url = f"sqlite:///{tmp_path / 'steady.db'}"
    steady_keys = seed(steady_url, STEADY_ROWS)
    _, cfg = write_config(
        tmp_path,
        f"""
ledger: sqlite:///ledger.db
sources:
  flaky: {{kind: sql, url: "{flaky_url}", table: items, key: id, target: lake.flaky,
           buffer: {{capacity: 100, replenish_below: 50}}}}
  steady: {{kind: sql, url: "{steady_url}", table: items, key: id, target: lake.steady,
            buffer: {{capacity: 100, replenish_below: 50}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 50, max_wait: 50ms}}
backpressure: {{max_pending: 1000, resume_below: 500, max_importing_batches: 2}}
""",
    )
    sink = MemorySink(auto_complete=False)
    daemon = Daemon(cfg, sink=sink)
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["summary"] = daemon.run(until_drained=True)
        except BaseException as error:  # reported by the assertions below
            result["error"] = error

    runner = threading.Thread(target=run, name="daemon", daemon=True)
    runner.start()
    try:
        # Both sources flow.
        wait_until("both sources have batches",
                   lambda: count(sink, "flaky") >= 1 and count(sink, "steady") >= 1, pump=sink)
        assert daemon.queues["flaky"].health().errors == 0

        # The flaky database goes away: its refills fail, the steady source keeps going.
        proxy.pause()
        flaky = daemon.queues["flaky"]
        wait_until("a flaky refill failed", lambda: flaky.health().errors >= 1, pump=sink)
        steady_then = count(sink, "steady")
        wait_until(
            "more steady batches were submitted and flaky failed again",
            lambda: count(sink, "steady") >= steady_then + 3 and flaky.health().errors >= 2,
            pump=sink,
        )
        during = flaky.health()
        assert during.consecutive_errors >= 2 and during.refilling
        assert during.last_error is not None and "source flaky" in during.last_error
        assert runner.is_alive() and "error" not in result  # nothing reached the loop

        # The database is back: everything completes, each key exactly once.
        proxy.resume()
        wait_until("the daemon drained", lambda: not runner.is_alive(), pump=sink)
    finally:
        if daemon.loop is not None:
            daemon.loop.request_stop()
        for batch_id in sink.held():
            sink.complete(batch_id)
        runner.join(WAIT)
        daemon.close()

    assert "error" not in result, result.get("error")
    summary: RunSummary = result["summary"]
    assert summary.exit_code == 0
    after = flaky.health()
    assert after.errors >= 2 and after.consecutive_errors == 0
    assert proxy.refused >= 1  # reconnects were attempted while it was down
    for source, keys in (("flaky", flaky_keys), ("steady", steady_keys)):
        hits = covered(sink.submitted, source, keys)
        wrong = {k: n for k, n in hits.items() if n != 1}
        assert not wrong, f"{source}: keys not in exactly one batch: {list(wrong.items())[:5]}"
    ledger = Ledger(cfg.ledger)
    try:
        assert {p.source: set(p.states) for p in ledger.reads.progress()} == {
            "flaky": {"done"}, "steady": {"done"}
        }
    finally:
        ledger.close()
