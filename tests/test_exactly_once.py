"""Exactly once, end to end: crashes, two daemons at once, outages, a dead batch.

Every test migrates the same three real sources (PostgreSQL keyset, MariaDB
sweep, SQS with duplicates and poison) into a fresh PostgreSQL target with a
fresh PostgreSQL ledger, by running ``sluice run CONFIG --until-drained`` as
real processes, and then checks the target against the sources
(:meth:`tests.chaos.harness.Scenario.verify`). Two scenarios differ: the
ledger going away under two daemons (``-k ledger_outage``), and hot rows of
an incremental source changing during the run (``-k hot_rows``, its own
table: :mod:`tests.chaos.hot_rows`).

``make test`` runs the short form (20,000 / 5,000 / 300 rows, one random
kill); ``make chaos`` runs the long form (``CHAOS=long``: 200,000 / 50,000 /
1,000, ten random kills, each crash point on its own) and prints the table.
Select them with ``pytest tests/test_exactly_once.py`` (``-k crash``,
``-k hot_hot``…). ``CHAOS_SEED`` replays the random kills of a run.
The outages, dead-retry, ledger-outage and hot-rows scenarios run only when
``CHAOS`` is set: long under ``CHAOS=long``, short under ``CHAOS=short``
(even short, each runs daemons for half a minute and more, which ``make
test`` cannot afford).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import ClaimConflict
from config.loader import load_config_text
from config.models import SluiceConfig
from scheduler.ledger import Ledger, fingerprint
from tests.chaos import scenarios
from tests.chaos.harness import Scenario
from tests.chaos.hot_rows import HotRows, churn
from tests.chaos.ledger_cuts import ledger_cuts
from tests.chaos.world import World, build_world, sizes
from tests.conftest import DatabaseFactory, need, spark_missing_reason
from tests.tcp_proxy import TcpProxy

SIZES = sizes()
LONG = SIZES.label == "long"
SEED = int(os.environ.get("CHAOS_SEED", "6"))

pytestmark = [
    pytest.mark.spark, pytest.mark.postgres, pytest.mark.mariadb, pytest.mark.sqs,
    pytest.mark.timeout(3600 if LONG else 420),
]
# Runs daemons for half a minute even short: only under CHAOS=long (make chaos)
# or CHAOS=short; tests/conftest.py deselects it otherwise.
chaos_only = pytest.mark.chaos_only


@pytest.fixture(scope="module")
def world(pg_factory: DatabaseFactory, mariadb_factory: DatabaseFactory) -> World:
    """The SQL sources, seeded once for every scenario of the module (sluice only reads them)."""
    need(spark_missing_reason() is None, spark_missing_reason() or "")
    return build_world(pg_factory.create("shop"), mariadb_factory.create("legacy"), SIZES)


ScenarioMaker = Callable[..., Scenario]


@pytest.fixture
def scenario(
    world: World, pg_factory: DatabaseFactory, moto_server: str, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[ScenarioMaker]:
    """``make(name, **options)``: a :class:`Scenario` in this test's folder, closed at the end."""
    made: list[Scenario] = []

    def make(name: str, **options: object) -> Scenario:
        sc = Scenario(name, world, tmp_path / name, pg_factory.create, moto_server,
                      **options)  # type: ignore[arg-type]
        made.append(sc)
        return sc

    yield make
    for sc in made:
        sc.close()


def rng_for(name: str) -> random.Random:
    """A random source of its own per scenario, seeded by CHAOS_SEED."""
    return random.Random(f"{SEED}:{name}")


def verified(sc: Scenario | HotRows, injected: scenarios.Injected) -> None:
    """Check the target, add the line to the chaos table, and fail on any finding."""
    check = sc.verify()
    sc.record(injected.total, check, injected.notes)
    assert check.ok(), f"{sc.name} (CHAOS_SEED={SEED}):\n{check.describe()}"


# -- kill -9, at random and at the named crash points ------------------------------------

POINTS = ["after_claim", "before_ledger_done", "after_target_commit", "mid_sqs_delete"]
if LONG:
    # Each crash point on its own, at its n-th pass (seeded: somewhere in the
    # run, not only at the first batch), and ten random kills in a row.
    _nth = random.Random(f"{SEED}:points")
    PLANS = {"kills": ["kill"] * SIZES.kills} | {
        point: [f"{point}:{_nth.randint(*passes)}"]
        for point, passes in zip(POINTS, ((5, 60), (3, 40), (3, 40), (2, 4)), strict=True)
    }
    # A third of the kills during start-up, the rest after 1-6 more batches.
    KILL_EARLY, KILL_AFTER = 0.3, (1, 6)
else:
    # One scenario: every crash point in turn (each dies within its first
    # batches), with one kill at a random moment before the last, then a
    # clean run. The kill comes before mid_sqs_delete, whose run may import
    # most of what is left before its first SQS batch is done: last, the
    # kill found the migration drained on a fast run.
    _points = [f"{point}:{n}" for point, n in zip(POINTS, (2, 1, 1, 1), strict=True)]
    PLANS = {"points+kill": [*_points[:3], "kill", _points[3]]}
    KILL_EARLY, KILL_AFTER = 0.0, (1, 2)  # the one kill lands mid-stream


@pytest.mark.parametrize("plan", list(PLANS))
def test_crash_and_restart_gives_the_same_target(scenario: ScenarioMaker, plan: str) -> None:
    sc = scenario(f"crash-{plan}")
    rng = rng_for(sc.name)
    injected = scenarios.Injected()
    for step in PLANS[plan]:
        if step == "kill":
            if not scenarios.kill_at_random(sc, rng, injected, early_share=KILL_EARLY,
                                            batches=KILL_AFTER):
                break  # drained: nothing left to crash
        else:
            scenarios.crash_at(sc, step, injected)
    sc.run_to_end()
    verified(sc, injected)
    assert injected.kills == PLANS[plan].count("kill"), (
        f"only {injected.kills} kills landed before the migration drained: {injected.notes}"
    )


# -- two daemons at once --------------------------------------------------------------


def test_hot_hot_two_daemons_give_the_same_target_as_one(scenario: ScenarioMaker) -> None:
    sc = scenario("hot-hot")
    injected = scenarios.Injected()
    scenarios.hot_hot(sc, rng_for(sc.name), injected, after_done=(10, 40) if LONG else (1, 3))
    if injected.conflict_exits:
        injected.notes.append(f"{len(injected.conflict_exits)} daemon exits on a lost race")
    verified(sc, injected)
    assert injected.kills == 1
    # The race happened: a was killed holding batches it had begun and could
    # no longer finish, and another daemon finished each under a newer token
    # (hot_hot asserts it batch by batch).
    assert injected.taken_over >= 1, injected.notes
    # A daemon that lost a race to the other (creating the ledger, a claim, the
    # end of a batch the other took over) must go on, not exit 1: each race is
    # also shown deterministically by a test below.
    assert not injected.conflict_exits, (
        f"{len(injected.conflict_exits)} daemon(s) exited 1 on a race lost to the other "
        f"daemon: {injected.conflict_exits}"
    )


# -- kill -9 during a repair ------------------------------------------------------------


@chaos_only
def test_a_daemon_killed_during_a_repair_leaves_the_target_equal(scenario: ScenarioMaker) -> None:
    """Rows deleted and changed in the target behind sluice's back, found by ``sluice verify
    --repair``, whose repair batches a daemon is killed in the middle of importing."""
    sc = scenario("repair-kill")
    sc.run_to_end("migrate")
    with sc.target() as conn:
        for statement in (
            "DELETE FROM orders WHERE id % 7 = 0",
            "UPDATE orders SET amount = amount + 1, customer = 'tampered ✗' WHERE id % 11 = 0",
            "DELETE FROM customers WHERE id % 53 = 0",
            "UPDATE customers SET note = NULL, balance = -1 WHERE id % 59 = 0",
        ):
            conn.execute(sa.text(statement))
        conn.commit()
    found = sc.sluice("verify", "--repair", "--json")
    assert found.returncode == 1, found.stdout + found.stderr
    queued = {t["source"]: t["repair_batches"] for t in json.loads(found.stdout)["tables"]}
    assert queued["orders"] >= 2 and queued["customers"] >= 1, queued
    injected = scenarios.Injected()
    # kill -9 right after a repair batch's target commit, before the ledger knows.
    scenarios.crash_at(sc, "after_target_commit:1", injected)
    scenarios.kill_at_random(sc, rng_for(sc.name), injected, early_share=0.0, batches=(1, 1))
    sc.run_to_end()
    verified(sc, injected)
    again = sc.sluice("verify")
    assert again.returncode == 0, again.stdout + again.stderr


# -- outages and failing imports ------------------------------------------------------


# The outage and dead-batch scenarios run daemons for 40-50 s even short:
# make chaos runs them (long). make test keeps their parts: tests/test_source_faults.py,
# test_ledger_outage.py, test_loop.py's retried-then-dead, test_status.py's retry.
@chaos_only
def test_outages_and_failing_imports_recover(
    scenario: ScenarioMaker, world: World, moto_server: str
) -> None:
    legacy = sa.make_url(world.legacy_url)
    moto_port = int(moto_server.rsplit(":", 1)[1])
    with TcpProxy((legacy.host or "127.0.0.1", legacy.port or 3306)) as mariadb, \
            TcpProxy(("127.0.0.1", moto_port)) as sqs:
        sc = scenario(
            "outages",
            legacy_url=mariadb.url_for(world.legacy_url),
            sqs_endpoint=f"http://127.0.0.1:{sqs.port}",
            retry="{max_attempts: 12, backoff: 1s, max_backoff: 4s}",
        )
        injected = scenarios.Injected()
        proc = scenarios.outages(sc, mariadb, sqs, injected, outage=15.0 if LONG else 8.0)
        code = proc.wait(1800)
        assert code == 0, f"exit {code}\n{proc.tail()}"
    assert scenarios.failed_attempts(sc, "events") >= 3
    injected.notes.append(
        f"failed import attempts retried: customers {scenarios.failed_attempts(sc, 'customers')}"
        f", events {scenarios.failed_attempts(sc, 'events')}"
    )
    verified(sc, injected)


@chaos_only
def test_a_batch_that_always_fails_ends_dead_and_retry_completes_it(
    scenario: ScenarioMaker,
) -> None:
    sc = scenario("dead-retry", retry="{max_attempts: 2, backoff: 500ms, max_backoff: 1s}")
    injected = scenarios.Injected()
    key = 3 * (SIZES.orders // 2)  # orders keys are 3, 6, 9, …
    scenarios.dead_then_retry(sc, key, injected)
    sc.run_to_end("after-retry")
    verified(sc, injected)


# -- the ledger goes away under two daemons -----------------------------------------------

# Long: away 20 s, 20 s, then 60 s. With lease.ttl 30s a daemon renews its
# leases, and its reaper looks for dead owners, every min(5 s, ttl / 3) = 5 s;
# the reaper calls an owner dead after 6 heartbeats = 30 s without one
# (begin()'s own bound, scheduler.ledger.DEAD_AFTER, is 30 s too). So the
# 60 s cut outlasts both the lease and the liveness bound, and each daemon
# may take the other's batches over once the ledger is back; the 20 s cuts
# are shorter than both. Short (CHAOS=short): 2 s, 2 s and 7 s with lease.ttl 3s
# (renewals every 1 s, an owner dead after 6 s; DEAD_AFTER stays 30 s).
# Each cut once 8 more batches are done and both daemons hold batches; short,
# once 1 more is done and either does (its 12 batches are soon all with one).
CUTS, CUT_LEASE, CUT_MORE = ([20.0, 20.0, 60.0], "30s", 8) if LONG else ([2.0, 2.0, 7.0], "3s", 1)


@chaos_only
def test_two_daemons_ride_out_ledger_outages_longer_than_a_lease(
    scenario: ScenarioMaker, pg_factory: DatabaseFactory
) -> None:
    """A ledger (PostgreSQL, behind a TCP proxy) cut three times under two daemons.

    Each cut lands mid-run, with batches in flight (long: held by both
    daemons). Both must exit 0, and the ledger end with every batch done.
    One daemon on a ledger cut for 5 s is tests/test_ledger_outage.py's.
    """
    admin = pg_factory.admin_url
    with TcpProxy((admin.host or "127.0.0.1", admin.port or 5432)) as proxy:
        sc = scenario("ledger-outage", ledger_via=proxy.url_for, lease_ttl=CUT_LEASE)
        injected = scenarios.Injected()
        ledger_cuts(sc, proxy, injected, CUTS, more=CUT_MORE, both=LONG)
    verified(sc, injected)


# -- hot rows: an incremental source changing under the migration ---------------------------

# Rows seeded, rows the writer keeps changing, seconds it writes, kill -9s meanwhile.
HOT = (50_000, 200, 90.0, 2) if LONG else (2_000, 40, 6.0, 0)


@chaos_only
def test_hot_rows_changed_during_an_incremental_run_end_at_their_last_version(
    pg_factory: DatabaseFactory, tmp_path: Path
) -> None:
    """A writer keeps changing hot rows and adding rows while the daemon migrates them
    (long: killed twice meanwhile); once it stops, every target row equals its source row."""
    need(spark_missing_reason() is None, spark_missing_reason() or "")
    rows, hot, seconds, kills = HOT
    rng = rng_for("hot-rows")
    sc = HotRows("hot-rows", tmp_path / "hot-rows", pg_factory.create, rows=rows, hot=hot,
                 rng=rng, size_label=SIZES.label)
    try:
        injected = scenarios.Injected()
        churn(sc, rng, injected, seconds=seconds, kills=kills)
        verified(sc, injected)
    finally:
        sc.close()
    assert injected.kills == kills


# -- SQS messages a killed daemon had received --------------------------------------------


@pytest.mark.timeout(180)
def test_messages_a_killed_daemon_had_received_are_not_left_behind(
    moto_server: str, sqs_queue: Callable[..., str], tmp_path: Path
) -> None:
    """A daemon killed between receive and claim leaves its messages invisible for
    their visibility timeout; a restart with --until-drained must still migrate them.

    The killed daemon is played by a plain receive (the state it leaves is the
    same); the restart must not call the queue drained while they are out.
    """
    import json

    import boto3

    queue = sqs_queue("killed", VisibilityTimeout="5")
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    for i in range(1, 6):
        client.send_message(QueueUrl=queue, MessageBody=json.dumps({"id": i}))
    taken = client.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=5)
    assert len(taken.get("Messages", [])) == 5  # received, then the receiver died
    config = tmp_path / "sluice.yaml"
    config.write_text(f"""
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{moto_server}",
           access_key_id: testing, secret_access_key: testing, wait_time: 1s,
           visibility_timeout: 5s, target: lake.events}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 100, max_wait: 100ms}}
spark: {{conf: {{spark.driver.extraJavaOptions: "-XX:TieredStopAtLevel=1"}}}}
""")
    from tests.chaos.harness import sluice

    done = sluice("run", str(config), "--until-drained", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "5 rows in" in done.stdout, (
        "the run called the queue drained while 5 messages a killed daemon had received "
        f"were still invisible:\n{done.stdout}"
    )
    attrs = client.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs[
        "ApproximateNumberOfMessagesNotVisible"] == "0"


# -- two daemons, one batch: the races of hot-hot, made deterministic ----------------------

HOT_CONFIG = """
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///o.db", table: orders, key: id, target: lake.orders,
           buffer: {capacity: 400, replenish_below: 100}}
targets:
  lake: {kind: parquet, path: ./lake}
batch: {max_items: 50, max_wait: 50ms}
lease: {ttl: 30s}
"""


def _crashed_batch(tmp_path: Path) -> SluiceConfig:
    """A ledger holding batch ``b1`` (keys ..40) left ``importing`` by a killed daemon."""
    cfg = load_config_text(HOT_CONFIG, str(tmp_path / "sluice.yaml"))
    killed = Ledger(cfg.ledger, owner="killed")
    checkpoint = killed.sources.register("orders", fingerprint(cfg.sources["orders"]))
    killed.claim_range("b1", "orders", "lake.orders", checkpoint, [40], 40, begin=True)
    killed.close()
    return cfg


@pytest.mark.timeout(30)
def test_a_dead_daemon_s_batch_is_taken_over_once(tmp_path: Path) -> None:
    cfg = _crashed_batch(tmp_path)
    a, b = Ledger(cfg.ledger, owner="a"), Ledger(cfg.ledger, owner="b")
    try:
        a.owners.register()
        b.owners.register()
        # The restarted daemon and the other one's reaper both see the orphan…
        assert [m.batch_id for m in a.orphans(["orders"])] == ["b1"]
        assert [m.batch_id for m in b.orphans(["orders"])] == ["b1"]
        a.begin("b1")  # … a takes it first …
        with pytest.raises(ClaimConflict):
            b.begin("b1")  # … so b must not: a is alive and its lease fresh.
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ending", ["import returns", "import fenced off"])
def test_a_daemon_whose_batch_another_finished_keeps_running(tmp_path: Path, ending: str) -> None:
    from scheduler.loop import MainLoop
    from scheduler.strategy import build_strategy
    from sinks.abc import MemorySink
    from sources.abc import MemorySource
    from sources.queueing import QueueingLimitedSource
    from spark_jobs.load.target import StaleToken

    arrived = threading.Event()

    class Watched(MemorySink):
        def submit(self, manifest: Any) -> Any:
            future = super().submit(manifest)
            arrived.set()
            return future

    cfg = _crashed_batch(tmp_path)
    a = Ledger(cfg.ledger, owner="a")
    a.owners.register()
    sink = Watched(auto_complete=False)
    queue = QueueingLimitedSource(MemorySource("orders", []), 400, 100)
    loop = MainLoop(cfg, {"orders": queue}, build_strategy(cfg), a, sink,
                    {"orders": a.sources.checkpoint("orders")})
    queue.start()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["stats"] = loop.run(until_drained=True, drain_timeout=10)
        except BaseException as error:  # the assertion below says whether it may
            outcome["error"] = error

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    assert arrived.wait(10), "the killed daemon's batch was never resumed"
    assert sink.held() == ["b1"]  # a resumed it, and nothing else
    # b's reaper finds a's lease expired (its clock is an hour ahead), takes
    # the batch over, imports it with a newer token and finishes it first.
    b = Ledger(cfg.ledger, owner="b", clock=lambda: time.time() + 3600)
    assert [m.batch_id for m in b.orphans(["orders"])] == ["b1"]
    b.begin("b1")
    b.finish("b1", 40)
    b.close()
    if ending == "import returns":
        sink.complete("b1")  # a's import skipped the committed batch
    else:
        sink.fail("b1", StaleToken("lake.orders: batch b1 was committed with token 3 > 2"))
    runner.join(20)
    queue.stop(1.0)
    a.close()
    assert not runner.is_alive()
    assert "error" not in outcome, f"the daemon stopped: {outcome['error']!r}"


@pytest.mark.timeout(30)
def test_an_importer_that_lost_its_batch_cannot_end_it(tmp_path: Path) -> None:
    from config.models import RetryConfig

    cfg = _crashed_batch(tmp_path)
    a = Ledger(cfg.ledger, owner="a")
    b = Ledger(cfg.ledger, owner="b")
    try:
        a.begin("b1")
        b.begin("b1")  # a's lease ran out: b takes the batch over with a newer token
        with pytest.raises(ClaimConflict):
            a.fail("b1", "fenced off: a newer token committed", RetryConfig())
        assert b.reads.state_of("b1") == "importing"
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(30)
def test_a_lost_key_claim_race_does_not_stop_the_daemon(tmp_path: Path) -> None:
    from scheduler.loop import MainLoop
    from scheduler.strategy import build_strategy
    from sinks.abc import MemorySink
    from sources.abc import MemorySource
    from sources.queueing import QueueingLimitedSource

    text = HOT_CONFIG.replace("key: id,", "key: id, mode: sweep,")
    cfg = load_config_text(text, str(tmp_path / "sluice.yaml"))
    other = Ledger(cfg.ledger, owner="other")  # a live daemon, importing keys 1..10
    other.owners.register()
    other.sources.register("orders", fingerprint(cfg.sources["orders"]))
    other.claim_keys("theirs", "orders", "lake.orders", [[k] for k in range(1, 11)], begin=True)
    a = Ledger(cfg.ledger, owner="a")
    looked_up = a.reads.taken
    calls = {"n": 0}

    def late_look_up(source: str, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
        # The first look-up ran just before the other daemon's insert landed.
        calls["n"] += 1
        return set() if calls["n"] == 1 else looked_up(source, pairs)

    a.reads.taken = late_look_up  # type: ignore[method-assign]
    claim = a.claim_keys
    lost: list[ClaimConflict] = []
    lost_race = threading.Event()

    def watched_claim(*args: Any, **kwargs: Any) -> Any:
        try:
            return claim(*args, **kwargs)
        except ClaimConflict as conflict:
            lost.append(conflict)
            lost_race.set()
            raise

    a.claim_keys = watched_claim  # type: ignore[method-assign]

    def their_batch_ends() -> None:
        # Once ours lost the race to it (or after 10 s: a failing run must
        # still drain and reach the assertions), so that ours can drain.
        lost_race.wait(10)
        other.finish("theirs", 10)

    sink = MemorySink()
    queue = QueueingLimitedSource(MemorySource("orders", [(k,) for k in range(1, 21)]), 400, 100)
    loop = MainLoop(cfg, {"orders": queue}, build_strategy(cfg), a, sink,
                    {"orders": a.sources.checkpoint("orders")})
    queue.start()
    finisher = threading.Thread(target=their_batch_ends, daemon=True)
    finisher.start()
    try:
        loop.run(until_drained=True, drain_timeout=10)
    finally:
        lost_race.set()
        finisher.join(10)
        queue.stop(1.0)
        a.close()
        other.close()
    # The race happened: the insert after the stale look-up lost to the other
    # daemon's claim, once; the next look-up saw its keys.
    assert len(lost) == 1 and "claimed by another daemon first" in str(lost[0]), lost
    assert calls["n"] >= 2
    mine = sorted(k[0] for m in sink.submitted for k in m.keys)
    assert mine == list(range(11, 21))  # the other daemon's keys were not claimed again


# -- SQS: an outage in the middle of a refill ----------------------------------------------


def test_an_sqs_outage_in_the_middle_of_a_refill_strands_no_message(
    moto_server: str, sqs_queue: Callable[..., str]
) -> None:
    """Found by the outages scenario: a refill whose second receive failed raised
    and dropped the items of its first receive, whose handles the source kept
    (and kept invisible): those records were never migrated, and the queue
    looked drained. Now the refill hands out what it got; the next one fails.
    """
    import json

    import boto3
    from botocore.exceptions import EndpointConnectionError

    from config.errors import SourceError
    from config.models import SqsSourceConfig
    from sources.sqs import SqsSource

    queue = sqs_queue("mid-refill")
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": str(i), "MessageBody": json.dumps({"id": i})} for i in range(10)])
    client.send_message_batch(QueueUrl=queue, Entries=[
        {"Id": str(i), "MessageBody": json.dumps({"id": i})} for i in range(10, 15)])

    class GoesAway:
        """The SQS client, whose endpoint is unreachable from the second receive on."""

        def __init__(self) -> None:
            self.receives = 0
            self.down = False

        def __getattr__(self, name: str) -> object:
            return getattr(client, name)

        def receive_message(self, **params: object) -> object:
            self.receives += 1
            if self.down or self.receives == 2:
                raise EndpointConnectionError(endpoint_url=moto_server)
            return client.receive_message(**params)

    flaky = GoesAway()
    cfg = SqsSourceConfig.model_validate({
        "kind": "sqs", "queue_url": queue, "endpoint_url": moto_server, "wait_time": 0,
        "visibility_timeout": 30, "target": "lake.events",
    })
    source = SqsSource("events", cfg, client=flaky)
    first = source.next_batch(15)  # ten received, then the endpoint goes away
    assert len(first) == 10 and source.in_flight() == 10
    flaky.down = True
    with pytest.raises(SourceError):
        source.next_batch(5)  # the next refill meets the outage, with nothing to lose
    flaky.down = False
    rest = source.next_batch(15)
    assert sorted(i.key for i in first + rest) == [(i,) for i in range(15)]  # type: ignore[type-var]


@pytest.mark.timeout(60)
def test_two_daemons_starting_at_once_on_a_new_postgresql_ledger(
    pg_factory: DatabaseFactory,
) -> None:
    from scheduler.ledger import migrate

    url = pg_factory.create("ledger_race")
    engine = sa.create_engine(url)
    outcome: dict[str, object] = {}

    def second_daemon() -> None:
        try:
            Ledger(url).close()
        except Exception as error:  # the assertion below reports it
            outcome["error"] = error

    try:
        with migrate._upgrade_lock(engine) as first:
            migrate._run_migrations(first)  # the first daemon is creating the tables…
            runner = threading.Thread(target=second_daemon, daemon=True)
            runner.start()
            # … while the second one finds none and waits for the upgrade lock.
            waiting = _waits_for_advisory_lock(engine, migrate._LOCK_NUMBER, runner, timeout=10)
            assert waiting, f"the second daemon did not wait for the upgrade lock: {outcome}"
        runner.join(30)
        with engine.connect() as conn:
            assert migrate.revision(conn) == migrate.HEAD
    finally:
        engine.dispose()
    assert not runner.is_alive()
    assert "error" not in outcome, f"the second daemon failed to start: {outcome['error']}"


def _waits_for_advisory_lock(engine: sa.Engine, key: int, runner: threading.Thread,
                             timeout: float) -> bool:
    """Whether a session of ``engine``'s database comes to wait for advisory lock ``key``
    within ``timeout`` s (False at once if ``runner`` ends first)."""
    deadline = time.monotonic() + timeout
    query = sa.text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid::bigint = :hi AND objid::bigint = :lo AND objsubid = 1 "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            if conn.scalar(query, {"hi": key >> 32, "lo": key & 0xFFFF_FFFF}):
                return True
            runner.join(0.05)  # another session's progress: nothing to wait on but time
            if not runner.is_alive():
                return False
    return False
