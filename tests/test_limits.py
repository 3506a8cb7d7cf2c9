"""Source limits that hold: rows per second and connections to a source database.

The bucket and the permits are checked on a fake clock; the connection
bound on a real PostgreSQL role whose ``CONNECTION LIMIT`` is the limit, so
that the database itself refuses any connection past it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.loader import load_config, load_config_text
from config.sources import DATABASE_CONNECTIONS
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger
from sinks.spark import SparkSink
from sources.budget import BATCH_SECONDS, KEY_QUERIES, Budget
from sources.budgets import Budgets
from tests.helpers import (
    FakeClock,
    WatchedSink,
    assert_same_rows,
    seed_orders,
    wait_until,
    write_config,
)


def _sql(name: str, url: str, limits: str = "") -> str:
    return (f"  {name}: {{kind: sql, url: '{url}', table: {name}, key: id, target: lake.{name}"
            f"{', limits: ' + limits if limits else ''}}}\n")  # fmt: skip


def _cfg(sources: str) -> str:
    return f"sources:\n{sources}targets:\n  lake: {{kind: parquet, path: ./lake}}\n"


def test_rows_released_stay_under_the_rate_over_every_ten_seconds() -> None:
    clock = FakeClock(0.0)
    budget = Budget("db", clock=clock)
    budget.configure(20_000, None)
    cap = budget.batch_cap()
    assert cap == int(20_000 * BATCH_SECONDS)
    released: list[tuple[float, int]] = []
    while clock.now < 120:
        # A loop that would feed as fast as it can: a tick every 10 ms.
        if budget.admits(1):
            rows = cap if len(released) % 3 else cap // 3  # batches of several sizes
            budget.take(rows, 1)
            released.append((clock.now, rows))
        clock.now = round(clock.now + 0.01, 2)
    for start in range(0, 110):
        in_window = sum(r for t, r in released if start <= t < start + 10)
        assert in_window <= 20_000 * 10 * 1.1, (start, in_window)
    assert sum(r for _, r in released) >= 20_000 * 120 * 0.95


def test_an_idle_bucket_saves_nothing_for_a_burst() -> None:
    clock = FakeClock(0.0)
    budget = Budget("db", clock=clock)
    budget.configure(1_000, None)
    budget.take(500, 1)
    assert not budget.admits(1)
    assert budget.wait_s() == pytest.approx(0.5)
    clock.now = 60.0  # a minute idle
    assert budget.admits(1)
    budget.take(500, 1)
    assert not budget.admits(1)  # the idle minute bought one batch, not sixty


def test_connections_are_permits_shared_by_key_queries_and_reads() -> None:
    budget = Budget("db")
    budget.configure(None, 2)
    assert budget.read_parts(4) == 1  # one connection stays for the key queries
    assert budget.admits(1)
    budget.take(100, 1)
    with budget.connection():
        assert budget.held == 2
        assert not budget.admits(1)
    assert budget.held == 1
    assert budget.admits(0) and not budget.admits(2)

    # A key query waiting for a permit goes before the next batch.
    budget.take(100, 1)
    entered = threading.Event()

    def query() -> None:
        with budget.connection():
            entered.set()

    waiter = threading.Thread(target=query)
    waiter.start()
    wait_until(lambda: budget._waiters == 1, "the key query to wait")
    assert not entered.is_set()
    budget.give_back(1)
    assert not budget.admits(1)  # the waiting query took the permit first
    waiter.join(5)
    assert entered.is_set() and budget.held == 1


def _key_queries(
    budget: Budget, count: int, release: threading.Event, inside: list[int]
) -> list[threading.Thread]:
    """``count`` key queries that hold their permits until ``release``, started; returns
    once all but those the budget lets in wait (each one let in notes ``budget.held``)."""

    def query() -> None:
        with budget.connection():
            inside.append(budget.held)
            release.wait(10)

    queries = [threading.Thread(target=query) for _ in range(count)]
    for thread in queries:
        thread.start()
    wait_until(lambda: budget._waiters == count - KEY_QUERIES, "the other key queries to wait")
    return queries


def test_key_queries_of_many_tables_leave_the_batches_their_part() -> None:
    # Hundreds of tables of one database: a key query waits at almost every
    # moment. The batches still get their part of the share, and the key
    # queries never hold more than theirs.
    budget = Budget("db")
    budget.configure(None, 10)
    assert budget.read_parts(20) == 10 - KEY_QUERIES
    release = threading.Event()
    inside: list[int] = []
    queries = _key_queries(budget, 50, release, inside)
    assert budget.held == KEY_QUERIES
    assert budget.admits(2)
    for _ in range(4):
        budget.take(100, 2)
    assert not budget.admits(1)  # the batches' part is full
    assert budget.held == 10
    release.set()
    for thread in queries:
        thread.join(10)
    assert len(inside) == 50 and budget.held == 8


def test_key_queries_keep_to_their_part_of_the_default_budget_too() -> None:
    # Left unset, the budget counts no batch (each import reads on its part of
    # the rest), but many tables' key queries still hold no more than theirs:
    # with the imports' reads, they stay within the database's default.
    budget = Budget("db")
    budget.configure(None, DATABASE_CONNECTIONS, connections_set=False, imports=2)
    release = threading.Event()
    queries = _key_queries(budget, 20, release, [])
    assert budget.held == KEY_QUERIES
    assert budget.admits(4)  # the batches are not counted
    assert KEY_QUERIES + 2 * budget.read_parts(20) <= DATABASE_CONNECTIONS
    release.set()
    for thread in queries:
        thread.join(10)
    assert budget.held == 0


def test_a_source_holding_a_key_query_waits_its_turn_for_a_second_one() -> None:
    # A slow table's refill holds one permit (its query takes seconds); its backlog count
    # asks for the other. A fast table's query waiting then goes first: the slow table
    # never holds every permit while another table waits.
    budget = Budget("db")
    budget.configure(None, 8, connections_set=False)  # key queries: two permits
    order: list[str] = []
    releases: list[threading.Event] = []
    threads: list[threading.Thread] = []

    def start(owner: str) -> None:
        release = threading.Event()

        def query() -> None:
            with budget.connection(owner=owner):
                order.append(owner)
                release.wait(10)

        releases.append(release)
        threads.append(threading.Thread(target=query, daemon=True))
        threads[-1].start()

    start("slow")
    wait_until(lambda: order == ["slow"], "the slow table's query")
    start("fast")
    wait_until(lambda: order == ["slow", "fast"], "both permits taken")
    start("slow")  # the slow table's backlog count
    wait_until(lambda: budget._waiters == 1, "the slow table's second query to wait")
    start("fast")  # the fast table's next query
    wait_until(lambda: budget._waiters == 2, "the fast table's next query to wait")
    releases[1].set()  # a fast query ends: its permit goes to the fast table's next one
    wait_until(lambda: len(order) == 3, "a waiting query to take the permit")
    assert order == ["slow", "fast", "fast"] and budget._waiters == 1
    for release in releases:
        release.set()
    for thread in threads:
        thread.join(10)
    assert order.count("slow") == 2 and budget.held == 0


def test_daemons_share_the_budget_and_a_joining_one_waits() -> None:
    clock = FakeClock(0.0)
    budgets = Budgets(load_config_text(_cfg(
        _sql("a", "postgresql://u@db/x", "{max_connections: 3, max_rows_per_s: 9000}")
        + _sql("b", "postgresql://u@db/x", "{max_connections: 5}")
        + _sql("c", "postgresql://u@other/y")
    ), "sluice.yaml"), clock=clock)  # fmt: skip
    a, b, c = (budgets.of(n) for n in "abc")
    assert a is b and a is not None and c is not None
    assert (a.connections, a.rate) == (3, 9000)  # the least of the sources' limits
    assert (c.connections, c.rate) == (DATABASE_CONNECTIONS, None)  # unset: the default
    assert list(budgets.limited()) == ["postgresql://u@db/x"]  # c: the default only

    shares = []
    for me in ("d1", "d2"):
        budgets.share(["d1", "d2"], me)
        shares.append((a.connection_share, a.rate_share))
    assert shares == [(2, 4500), (1, 4500)]
    budgets.share(["d1", "d2", "d3", "d4"], "d4")
    assert (a.connection_share, a.rate_share) == (1, 2250)  # one each at least (and a warning)

    budgets.share(["d2"], "d1", join_wait=10.0)
    assert a.connection_share == 2 and not a.admits(1)
    clock.now = 10.0
    assert a.admits(1)


def test_limits_change_on_reload() -> None:
    budgets = Budgets(load_config_text(_cfg(_sql("a", "postgresql://u@db/x")), "s.yaml"))
    budget = budgets.of("a")
    assert budget is not None and budgets.batch_cap("a") is None
    budgets.reconfigure(load_config_text(
        _cfg(_sql("a", "postgresql://u@db/x", "{max_rows_per_s: 100}")), "s.yaml"
    ))  # fmt: skip
    assert budgets.of("a") is budget and budgets.batch_cap("a") == 50


@pytest.fixture
def limited_role(pg_factory):  # type: ignore[no-untyped-def]
    """A database seeded with orders, read by a role the database lets open two connections."""
    url = pg_factory.create("limited")
    seed_orders(url, 6_000)
    role = f"sluice_lim_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2"))
        conn.execute(sa.text(f"GRANT SELECT ON orders TO {role}"))
    limited = sa.make_url(url).set(username=role).render_as_string(hide_password=False)
    yield url, limited, role
    with admin.connect() as conn:
        conn.execute(sa.text(f"REVOKE ALL ON orders FROM {role}"))
        conn.execute(sa.text(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
        ))  # fmt: skip
        conn.execute(sa.text(f"DROP ROLE {role}"))
    admin.dispose()


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_role_limited_to_two_connections_is_never_refused_one(  # type: ignore[no-untyped-def]
    tmp_path: Path, limited_role, pg_factory, spark, caplog: pytest.LogCaptureFixture
) -> None:
    admin_url, url, role = limited_role
    warehouse = pg_factory.create("warehouse")
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders:
    kind: sql
    url: '{url}'
    table: orders
    key: id
    target: lake.orders
    page_size: 500
    read: {{num_partitions: 4}}
    limits: {{max_connections: 2, max_rows_per_s: 4000}}
targets:
  lake: {{kind: jdbc, url: '{warehouse}'}}
batch: {{max_items: 5000, max_wait: 100ms}}
backpressure: {{max_pending: 20000, resume_below: 5000, max_importing_batches: 4}}
spark: {{master: "local[2]", max_concurrent_imports: 4}}
""")
    seen: list[int] = []
    done = threading.Event()
    # Autocommit: pg_stat_activity is read once per transaction.
    watcher = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")

    def watch() -> None:
        # The database's own count of the role's sessions, as often as it answers.
        with watcher.connect() as conn:
            while not done.is_set():
                seen.append(int(conn.scalar(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = :r"
                ), {"r": role}) or 0))  # fmt: skip
                done.wait(0.002)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    caplog.set_level(logging.WARNING)
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    try:
        summary = daemon.run(until_drained=True)
    finally:
        done.set()
        daemon.close()
        thread.join(5)
        watcher.dispose()
    assert summary.exit_code == 0, summary
    assert daemon.loop is not None and daemon.loop.stats.batches_failed == 0
    assert "too many connections" not in caplog.text
    # The database refused nothing (with max_connections unset, its own limit
    # refuses the batches' reads: six failed attempts in this run),
    # and never saw more than two of the role's sessions at once.
    assert len(seen) > 50 and 1 <= max(seen) <= 2, (len(seen), max(seen))
    progress = {p.source: p for p in Ledger(cfg.ledger).reads.progress()}["orders"]
    assert set(progress.states) == {"done"} and progress.rows == 6_000
    # 4,000 rows/s: no batch holds more than half a second of it.
    with sa.create_engine(cfg.ledger).connect() as conn:
        sizes = conn.scalars(sa.text("SELECT items FROM sluice_batches")).all()
    assert max(sizes) <= 2_000
    assert assert_same_rows(admin_url, "orders", warehouse, "orders") == 6_000


@pytest.mark.timeout(120)
def test_a_reload_changes_the_rate_of_a_running_daemon(tmp_path: Path) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 3000)
    config = tmp_path / "sluice.yaml"
    text = """
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           page_size: 20{limits}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 200, max_wait: 50ms}}
backpressure: {{max_pending: 400, resume_below: 200}}
"""
    config.write_text(text.format(limits=""))
    sink = WatchedSink(auto_complete=False)
    daemon = Daemon(load_config(config), config_path=str(config), sink=sink)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        wait_until(lambda: len(sink.held()) >= 1, "a first batch", event=sink.arrived)
        # No limit set: the default budget, room for the batch's read partitions.
        assert sink.submitted[0].items == 200 and sink.submitted[0].read_parts == 2
        config.write_text(text.format(limits=", limits: {max_rows_per_s: 100, max_connections: 3}"))
        wait_until(lambda: daemon.budgets.batch_cap("orders") == 50, "the reload to take the rate")
        seen = len(sink.submitted)
        for batch_id in sink.held():
            sink.complete(batch_id)
        wait_until(lambda: len(sink.submitted) > seen, "a batch under the new rate",
                   event=sink.arrived)
        later = sink.submitted[seen:]
        assert all(m.items <= 50 and m.read_parts == 2 for m in later), later
    finally:
        assert daemon.loop is not None
        daemon.loop.request_stop()
        for batch_id in sink.held():
            sink.complete(batch_id)
        runner.join(30)
        daemon.close()


def test_slow_key_queries_halve_the_rate_and_fast_ones_win_it_back() -> None:
    clock = FakeClock(0.0)
    budget = Budget("db", clock=clock)
    budget.configure(8_000, None, max_latency=0.5)
    rates = []
    for latency in [0.9, 0.9, 0.1, 0.9] + [0.1] * 12:
        budget.observe_latency(latency)
        budget.observe_latency(latency)  # twice in one second: one step
        rates.append(budget.rate_share)
        clock.now += 1.0
    assert rates[:4] == [4_000, 2_000, 3_000, 1_500]
    assert rates[4:8] == [2_500, 3_500, 4_500, 5_500]
    assert rates[-1] == 8_000 and budget.factor == 1.0

    # No rate set: the rate read lately is the one halved, and none once fast again.
    free = Budget("db", clock=clock)
    free.configure(None, None, max_latency=0.5)
    free.observe_latency(0.9)
    assert free.rate_share is None  # nothing read yet: nothing to halve
    for _ in range(10):
        free.take(1_000, 1)
        clock.now += 1.0
    free.observe_latency(0.9)
    assert free.rate_share == pytest.approx(500)
    for _ in range(8):
        clock.now += 1.0
        free.observe_latency(0.1)
    assert free.rate_share is None


@pytest.mark.postgres
@pytest.mark.timeout(180)
@pytest.mark.slow
def test_a_source_whose_key_queries_slow_down_is_read_slower_until_they_are_fast(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_factory
) -> None:
    url = pg_factory.create("slowing")
    seed_orders(url, 20_000)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        # Every query of the source runs the gate once (an uncorrelated
        # subquery): its delay is the table's one value.
        conn.execute(sa.text("CREATE TABLE knob (delay float NOT NULL)"))
        conn.execute(sa.text("INSERT INTO knob VALUES (0)"))
        conn.execute(sa.text(
            "CREATE FUNCTION gate() RETURNS boolean LANGUAGE sql VOLATILE AS "
            "$$ SELECT pg_sleep((SELECT delay FROM knob)) IS NOT NULL $$"
        ))  # fmt: skip
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders:
    kind: sql
    url: '{url}'
    table: orders
    key: id
    where: "(SELECT gate())"
    page_size: 50
    buffer: {{capacity: 200, replenish_below: 100}}
    limits: {{max_rows_per_s: 400, max_query_latency: 200ms}}
    target: lake.orders
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 200, max_wait: 50ms}}
""")
    sink = WatchedSink()
    daemon = Daemon(cfg, config_path=str(path), sink=sink)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        budget = daemon.budgets.of("orders")
        assert budget is not None
        wait_until(lambda: daemon.loop is not None and daemon.loop.stats.batches_done >= 3,
                   "a few batches at the whole rate")
        assert budget.rate_share == 400
        with admin.connect() as conn:
            conn.execute(sa.text("UPDATE knob SET delay = 0.4"))
        wait_until(lambda: budget.rate_share is not None and budget.rate_share <= 200,
                   "slow key queries to halve the rate")
        # The feeder follows: batches of at most half a second of the lower rate.
        seen = len(sink.submitted)
        wait_until(lambda: len(sink.submitted) > seen + 1, "batches at the lower rate",
                   event=sink.arrived)
        assert all(m.items <= 100 for m in sink.submitted[seen + 1 :])
        with admin.connect() as conn:
            conn.execute(sa.text("UPDATE knob SET delay = 0"))
        wait_until(lambda: budget.rate_share == 400, "fast key queries to win the rate back")
        assert daemon.loop is not None and daemon.loop.stats.items["orders"] < 20_000
    finally:
        if daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()
        admin.dispose()
