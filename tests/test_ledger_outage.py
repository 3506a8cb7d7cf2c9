"""A ledger that goes away for a while: the daemon waits for it and goes on, losing nothing.

The ledger is reached through a TCP proxy that the test cuts (every
connection reset, new ones refused) and restores.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import LedgerError
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger, outage
from scheduler.ledger.outage import CommitUnknown, LedgerUnreachable
from scheduler.ledger.writer import SerialWriter
from sinks.spark import SparkSink
from tests.helpers import assert_same_rows, seed_orders, wait_until, write_config
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    with TcpProxy(("127.0.0.1", 5432)) as cut:
        yield cut


def _refused_while_waiting(proxy: TcpProxy, call: Callable[[], object]) -> list[object]:
    """Cut the ledger, run ``call`` on a thread until the ledger refused it twice, restore it.

    Returns what ``call`` returned, or raised, once it is back. Fails if the
    call ended while the ledger was away: it did not wait.
    """
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - the assertions report it
            outcome.append(error)

    proxy.pause()
    refused = proxy.refused
    caller = threading.Thread(target=run)
    caller.start()
    try:
        # Tried again and again (each new connection is refused), not given up.
        wait_until(lambda: proxy.refused >= refused + 2 or not caller.is_alive(),
                   "the ledger to be tried twice while it is away")
        assert caller.is_alive(), f"ended while the ledger was away: {outcome}"
    finally:
        proxy.resume()
        caller.join(60)
    assert not caller.is_alive()
    return outcome


def test_reads_and_writes_wait_for_the_ledger_to_come_back(pg_url: str, proxy: TcpProxy) -> None:
    ledger = Ledger(proxy.url_for(pg_url))
    try:
        ledger.owners.register()
        assert _refused_while_waiting(proxy, ledger.owners.heartbeat) == [0]  # a write
        assert _refused_while_waiting(proxy, ledger.reads.state_counts) == [{}]  # a read
        assert ledger.writer.failure is None
    finally:
        ledger.close()


def test_a_ledger_gone_longer_than_the_grace_period_stops_the_daemon(
    pg_url: str, proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outage, "GRACE", 1.0)
    died: list[BaseException] = []
    ledger = Ledger(proxy.url_for(pg_url), on_writer_death=died.append)
    try:
        proxy.pause()
        with pytest.raises(LedgerUnreachable, match="unreachable for over 1 s"):
            ledger.owners.register()
        assert died and ledger.writer.failure is died[0]
        with pytest.raises(LedgerUnreachable):
            ledger.reads.state_counts()
    finally:
        proxy.resume()
        ledger.close()


def test_a_connection_lost_while_committing_is_settled_by_the_server(
    pg_url: str, proxy: TcpProxy
) -> None:
    """The COMMIT goes to a cut connection: once the ledger is back, the server
    says the transaction did not commit, and the write is made again, once."""
    died: list[BaseException] = []
    ledger = Ledger(proxy.url_for(pg_url), on_writer_death=died.append)
    runs: list[int] = []
    try:

        def write_then_lose_the_connection(conn: sa.Connection) -> int:
            conn.execute(sa.text("CREATE TABLE written_once (n int)"))
            runs.append(1)
            if len(runs) == 1:
                proxy.pause()  # the COMMIT goes to a reset connection
            return len(runs)

        future = ledger.writer.submit(write_then_lose_the_connection)
        wait_until(lambda: proxy.refused >= 2, "the writer to ask the ledger again")
        proxy.resume()
        assert future.result(timeout=60) == 2
        assert not died and ledger.writer.failure is None
        with sa.create_engine(pg_url).connect() as conn:
            assert conn.scalar(sa.text("SELECT count(*) FROM written_once")) == 0
    finally:
        proxy.resume()
        ledger.close()


def test_a_commit_whose_answer_was_lost_stands_when_the_server_says_it_committed(
    pg_url: str,
) -> None:
    engine = sa.create_engine(pg_url)
    writer = SerialWriter(engine, patience=outage.Patience(5.0))
    try:
        with engine.connect() as conn:
            xid, pid = conn.execute(sa.text("SELECT txid_current(), pg_backend_pid()")).one()
            conn.execute(sa.text("CREATE TABLE committed_once (n int)"))
            conn.commit()

        def must_not_run_again(conn: sa.Connection) -> None:
            raise AssertionError("a committed write was made again")

        future: Future[Any] = Future()
        unknown = CommitUnknown("lost", (int(xid), int(pid)), ["its result"])
        assert writer._settle([(must_not_run_again, future)], unknown) == ["its result"]

        # A transaction still open on the server (its process has not seen
        # the connection go): that process is ended, and the write made again.
        stale = engine.connect()
        stale.execute(sa.text("INSERT INTO committed_once VALUES (1)"))
        xid, pid = stale.execute(sa.text("SELECT txid_current(), pg_backend_pid()")).one()
        again = writer._settle(
            [(lambda c: c.execute(sa.text("INSERT INTO committed_once VALUES (2)")).rowcount,
              Future())],
            CommitUnknown("lost", (int(xid), int(pid))),
        )  # fmt: skip
        assert again == [1]
        with engine.connect() as conn:
            assert conn.scalars(sa.text("SELECT n FROM committed_once")).all() == [2]
        stale.invalidate()

        # Not PostgreSQL, or an id the server forgot: the daemon stops.
        with pytest.raises(CommitUnknown):
            writer._settle([(must_not_run_again, Future())], CommitUnknown("lost"))
    finally:
        writer.close()
        engine.dispose()


ROWS, BATCHES = 600, 12


def _migration(  # type: ignore[no-untyped-def]
    tmp_path: Path, ledger_url: str, shop: str, target: str, spark, ledger_outage: str = "10m"
) -> Daemon:
    """A daemon moving :data:`ROWS` rows in batches of 50, one at a time."""
    path, cfg = write_config(tmp_path, f"""
ledger: {ledger_url}
ledger_outage: {ledger_outage}
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: id, target: warehouse.orders,
            buffer: {{capacity: 200, replenish_below: 50}}}}
targets:
  warehouse: {{kind: jdbc, url: "{target}"}}
batch: {{max_items: 50, max_wait: 100ms}}
backpressure: {{max_pending: 100, resume_below: 50, max_importing_batches: 1}}
spark: {{master: "local[2]", max_concurrent_imports: 1}}
""")  # fmt: skip
    return Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))


def _running(daemon: Daemon) -> tuple[threading.Thread, list[object]]:
    """Run ``daemon`` until drained on a thread; the list gets its summary or its error."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(daemon.run(until_drained=True))
        except BaseException as error:  # noqa: BLE001 - what the CLI would get
            outcome.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    return runner, outcome


def _wait_for_done(ledger_url: str, batches: int) -> int:
    """Wait until ``batches`` batches are done (polled: the daemon has no hook); how many are."""
    direct = sa.create_engine(ledger_url)  # the test's own view, around the proxy
    done = [0]

    def enough() -> bool:
        with direct.connect() as conn:
            if sa.inspect(conn).has_table("sluice_batches"):
                done[0] = conn.execute(sa.text(
                    "SELECT count(*) FROM sluice_batches WHERE state = 'done'")).scalar_one()
        return done[0] >= batches

    try:
        wait_until(enough, f"{batches} batches done", timeout=300)
    finally:
        direct.dispose()
    return done[0]


@pytest.mark.spark
def test_a_migration_rides_out_a_ledger_restart(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_url: str, pg_target: str, pg_factory, proxy: TcpProxy, spark
) -> None:
    shop = pg_factory.create("outage_shop")
    seed_orders(shop, ROWS)
    daemon = _migration(tmp_path, proxy.url_for(pg_url), shop, pg_target, spark)
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(daemon.run(until_drained=True)))
    runner.start()
    try:
        done_at_cut = _wait_for_done(pg_url, 3)
        # A restart of the ledger's server: it stays away until the daemon has
        # been refused five times (it keeps trying: it waits, it does not stop).
        proxy.pause()
        wait_until(lambda: proxy.refused >= 5 or not runner.is_alive(),
                   "the daemon to try the ledger five times while it is away", timeout=120)
        assert runner.is_alive(), f"the daemon stopped during the outage: {outcome}"
        proxy.resume()
        runner.join(600)
    finally:
        proxy.resume()
        if runner.is_alive():
            if daemon.loop is not None:
                daemon.loop.request_stop()
            runner.join(60)
        daemon.close()
    assert 3 <= done_at_cut < BATCHES, "the cut must fall in the middle of the run"
    assert proxy.refused > 0
    assert outcome, "the daemon's run raised: see the log above"
    summary = outcome[0]
    assert getattr(summary, "exit_code", None) == 0, summary
    direct = sa.create_engine(pg_url)
    assert _batch_states(direct) == {"done": BATCHES}
    assert assert_same_rows(shop, "orders", pg_target, "orders") == ROWS


@pytest.mark.spark
def test_a_ledger_gone_for_good_ends_the_run_with_a_ledger_error(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_url: str, pg_target: str, pg_factory, proxy: TcpProxy, spark
) -> None:
    shop = pg_factory.create("gone_shop")
    seed_orders(shop, ROWS)
    daemon = _migration(tmp_path, proxy.url_for(pg_url), shop, pg_target, spark,
                        ledger_outage="2s")
    runner, outcome = _running(daemon)
    try:
        assert _wait_for_done(pg_url, 2) >= 2
        proxy.pause()
        runner.join(300)
    finally:
        proxy.resume()
        daemon.close()
    assert not runner.is_alive() and outcome
    ended = outcome[0]
    # The CLI prints a SluiceError as one "error:" line: no traceback.
    assert isinstance(ended, LedgerError), ended


@pytest.mark.spark
def test_a_stop_during_a_ledger_outage_drains_without_waiting_for_the_ledger(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_url: str, pg_target: str, pg_factory, proxy: TcpProxy, spark
) -> None:
    """SIGTERM while the ledger is away: exit 143 at once, not after the 10-minute grace.

    The batches whose end could not be recorded are reconciled from the
    target by the next run: every row arrives once.
    """
    shop = pg_factory.create("stop_shop")
    seed_orders(shop, ROWS)
    daemon = _migration(tmp_path, proxy.url_for(pg_url), shop, pg_target, spark)
    runner, outcome = _running(daemon)
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sa.Connection) -> None:
        # Holds the single writer in a transaction's body, so that the cut
        # cannot land on a COMMIT (that would be CommitUnknown, a stop of
        # its own); its query then fails on the cut connection, and waits.
        if not entered.is_set():
            entered.set()
            release.wait(60)
        conn.execute(sa.text("SELECT 1"))

    try:
        assert _wait_for_done(pg_url, 2) >= 2
        daemon.ledger.writer.submit(hold)
        assert entered.wait(60)
        proxy.pause()  # the ledger goes away, for longer than this test waits
        release.set()
        daemon.signal_handlers._handle(signal.SIGTERM, None)  # what a SIGTERM runs
        runner.join(120)
        stopped_in_time = not runner.is_alive()
    finally:
        proxy.resume()
        runner.join(600)
        daemon.close()
    assert stopped_in_time, "the stop waited for the ledger to come back"
    assert outcome and getattr(outcome[0], "exit_code", None) == 143, outcome

    # The next run: on another host or after the process ended, the stopped
    # daemon's batches are free at once (here its owner row goes, as a dead pid would).
    direct = sa.create_engine(pg_url)
    with direct.begin() as conn:
        conn.execute(sa.text("DELETE FROM sluice_owners"))
    (tmp_path / "again").mkdir()
    again = _migration(tmp_path / "again", pg_url, shop, pg_target, spark)
    try:
        assert again.run(until_drained=True).exit_code == 0
    finally:
        again.close()
    assert _batch_states(direct) == {"done": BATCHES}
    assert assert_same_rows(shop, "orders", pg_target, "orders") == ROWS


def _batch_states(engine: sa.Engine) -> dict[str, int]:
    """Batches per state in the ledger, read past any proxy; disposes of ``engine``."""
    try:
        with engine.connect() as conn:
            return dict(conn.execute(  # type: ignore[arg-type]
                sa.text("SELECT state, count(*) FROM sluice_batches GROUP BY state")).all())
    finally:
        engine.dispose()
