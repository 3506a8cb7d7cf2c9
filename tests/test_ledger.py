"""The ledger on SQLite and PostgreSQL: claims, compare-and-set, retries, identity."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from config.errors import ClaimConflict, FingerprintMismatch
from config.models import RetryConfig
from scheduler.ledger import Checkpoint, Ledger
from scheduler.ledger.store import _insert_batch


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]) -> str:
    if request.param == "sqlite":
        return sqlite_url("ledger")
    factory = request.getfixturevalue("pg_factory")
    return factory.create("ledger")


def test_source_identity_is_checked(ledger_url: str) -> None:
    ledger = Ledger(ledger_url)
    assert ledger.sources.register("orders", "a" * 64) == Checkpoint(None, 0)
    assert ledger.sources.register("orders", "a" * 64) == Checkpoint(None, 0)
    with pytest.raises(FingerprintMismatch, match="sluice reset shop.yaml --source orders"):
        ledger.sources.register("orders", "b" * 64, config_path="shop.yaml")
    ledger.sources.reset("orders")
    assert ledger.sources.register("orders", "b" * 64) == Checkpoint(None, 0)


def test_many_sources_are_registered_together_as_one_by_one(ledger_url: str) -> None:
    ledger = Ledger(ledger_url)
    digests = {f"t{i:03d}": f"{i % 10}" * 64 for i in range(300)}
    assert ledger.sources.register_all(digests) == dict.fromkeys(digests, Checkpoint(None, 0))
    first, after_first = ledger.claim_range("b1", "t007", "w.t007", Checkpoint(None, 0), [5], 5)
    again = ledger.sources.register_all(digests)
    assert again["t007"] == after_first and again["t008"] == Checkpoint(None, 0)
    with pytest.raises(FingerprintMismatch, match="sluice reset s.yaml --source t299"):
        ledger.sources.register_all({**digests, "t299": "x" * 64}, config_path="s.yaml")


def test_range_claims_chain_and_a_stale_checkpoint_loses(ledger_url: str) -> None:
    ledger = Ledger(ledger_url)
    start = ledger.sources.register("orders", "f" * 64)
    first, after_first = ledger.claim_range("b1", "orders", "w.orders", start, [100], 100)
    assert (first.lo, first.hi, first.kind) == (None, [100], "range")
    second, _ = ledger.claim_range("b2", "orders", "w.orders", after_first, [250], 150)
    assert (second.lo, second.hi) == ([100], [250])
    with pytest.raises(ClaimConflict):
        ledger.claim_range("b3", "orders", "w.orders", after_first, [400], 150)
    assert ledger.sources.checkpoint("orders") == Checkpoint([250], 2)
    assert ledger.reads.state_of("b3") is None


def test_batch_lifecycle_retries_then_dies(ledger_url: str) -> None:
    now = [1000.0]
    ledger = Ledger(ledger_url, clock=lambda: now[0])
    start = ledger.sources.register("orders", "f" * 64)
    ledger.claim_range("b1", "orders", "w.orders", start, [10], 10)
    retry = RetryConfig(max_attempts=2, backoff=5, max_backoff=60)

    assert ledger.begin("b1").token == 1
    assert ledger.fail("b1", "boom: connection reset", retry) == "failed"
    assert ledger.reads.due_retries(["orders"], ledger.clock()) == []  # backing off
    now[0] += 6
    [due] = ledger.reads.due_retries(["orders"], ledger.clock())
    assert ledger.begin(due.batch_id).token == 2  # a new fencing token per attempt
    assert ledger.fail("b1", "boom again", retry) == "dead"
    [progress] = ledger.reads.progress()
    assert progress.states == {"dead": 1} and progress.last_error == "boom again"

    ledger.requeue("b1")
    assert ledger.begin("b1").token == 3
    ledger.finish("b1", rows=10)
    with pytest.raises(ClaimConflict):
        ledger.finish("b1", rows=10)  # a done batch cannot be finished twice
    [progress] = ledger.reads.progress()
    assert progress.states == {"done": 1} and progress.rows == 10


def test_key_claims_skip_keys_already_held(ledger_url: str) -> None:
    ledger = Ledger(ledger_url)
    first = ledger.claim_keys("k1", "cust", "w.c", [[1], [2], [3]])
    assert first is not None and first.keys == [[1], [2], [3]] and first.kind == "keys"
    second = ledger.claim_keys("k2", "cust", "w.c", [[3], [4], [4]])
    assert second is not None and second.keys == [[4]]
    assert ledger.claim_keys("k3", "cust", "w.c", [[1], [2]]) is None
    # A new version of a key (incremental mode) is a new claim.
    again = ledger.claim_keys("k4", "cust", "w.c", [[1]], versions=["2024-05-01"])
    assert again is not None and again.keys == [[1]]
    payloads = ledger.claim_keys("k5", "ev", "w.e", [["a"], ["a"]], payloads=['{"id":"a"}'] * 2)
    assert payloads is not None and payloads.payloads == ['{"id":"a"}']


def test_key_states_give_the_state_of_the_batch_holding_each_key(ledger_url: str) -> None:
    from scheduler.ledger import encode_key

    ledger = Ledger(ledger_url)
    once = RetryConfig(max_attempts=1)
    ledger.claim_keys("claimed", "ev", "w.e", [[1]])
    ledger.claim_keys("importing", "ev", "w.e", [[2]], begin=True)
    ledger.claim_keys("done", "ev", "w.e", [[3]], begin=True)
    ledger.finish("done", rows=1)
    ledger.claim_keys("failed", "ev", "w.e", [[4]], begin=True)
    ledger.fail("failed", "boom", RetryConfig())
    ledger.claim_keys("dead", "ev", "w.e", [[5]], begin=True)
    ledger.fail("dead", "boom", once)
    ledger.claim_keys("other", "other", "w.e", [[6]])  # another source's key 6
    ledger.claim_keys("newer", "ev", "w.e", [[7]], versions=["v2"])  # key 7 at version v2
    many = [[f"k{i}"] for i in range(1200)]  # more than one query's worth of keys
    ledger.claim_keys("many", "ev", "w.e", many, begin=True)
    ledger.finish("many", rows=1200)

    asked = [encode_key([k]) for k in range(1, 9)]
    assert ledger.reads.key_states("ev", asked) == {
        encode_key([1]): "claimed", encode_key([2]): "importing", encode_key([3]): "done",
        encode_key([4]): "failed", encode_key([5]): "dead",
    }
    at_v2 = ledger.reads.key_states("ev", [encode_key([7])], version="v2")
    assert at_v2 == {encode_key([7]): "claimed"}
    states = ledger.reads.key_states("ev", [encode_key(k) for k in many] + [encode_key([99])])
    assert len(states) == 1200 and set(states.values()) == {"done"}
    assert ledger.reads.key_states("ev", []) == {}
    # The sweep-mode look-up is unchanged: a key held by any batch, whatever its state.
    assert ledger.reads.claimed_keys("ev", asked) == set(asked[:5])
    ledger.close()


def _race(url: str, barrier: multiprocessing.synchronize.Barrier, name: str, out) -> None:  # type: ignore[name-defined, no-untyped-def]
    ledger = Ledger(url)
    checkpoint = ledger.sources.checkpoint("orders")
    barrier.wait(timeout=30)
    try:
        ledger.claim_range(name, "orders", "w.orders", checkpoint, [500], 500)
        out.put((name, "won"))
    except ClaimConflict:
        out.put((name, "lost"))


@pytest.mark.timeout(60)
def test_two_processes_racing_on_one_range_one_wins(ledger_url: str) -> None:
    Ledger(ledger_url).sources.register("orders", "f" * 64)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(ledger_url, barrier, f"p{i}", out)) for i in (1, 2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=50)
        assert proc.exitcode == 0
    results = sorted(out.get(timeout=5)[1] for _ in procs)
    assert results == ["lost", "won"]
    assert Ledger(ledger_url).sources.checkpoint("orders") == Checkpoint([500], 1)


def test_an_expired_lease_is_reaped_and_taken_over(ledger_url: str) -> None:
    now = [1000.0]
    first = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=60, owner="first")
    first.owners.register()
    start = first.sources.register("orders", "f" * 64)
    first.claim_range("b1", "orders", "w.orders", start, [10], 10)
    assert first.begin("b1").token == 1

    second = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=60, owner="second")
    second.owners.register()
    assert second.orphans(["orders"]) == []  # first is alive and its lease holds
    now[0] += 30
    first.owners.heartbeat()  # renews the lease to 1090
    now[0] += 45
    assert second.orphans(["orders"], dead_after=1_000) == []
    now[0] += 20  # lease expired (1095 > 1090): first stopped renewing
    [orphan] = second.orphans(["orders"], dead_after=1_000)
    taken = second.begin(orphan.batch_id)
    assert taken.token == 2  # the fencing token moves on
    second.finish("b1", rows=10)
    assert second.reads.state_of("b1") == "done"
    with pytest.raises(ClaimConflict):
        first.finish("b1", rows=10)  # the old owner can no longer record it


def test_a_dead_owner_loses_its_batches_at_once(ledger_url: str) -> None:
    now = [1000.0]
    gone = Ledger(ledger_url, clock=lambda: now[0], owner="gone")
    gone.owners.register()
    start = gone.sources.register("orders", "f" * 64)
    gone.claim_range("b1", "orders", "w.orders", start, [10], 10)
    live = Ledger(ledger_url, clock=lambda: now[0], owner="live")
    assert live.orphans(["orders"]) == []
    gone.owners.unregister()  # a clean stop hands its batches over at once
    assert [m.batch_id for m in live.orphans(["orders"])] == ["b1"]


def _importing(url: str, clock: Callable[[], float], owner: str) -> Ledger:
    """A registered owner holding batch ``b1`` (keys ..10) in ``importing`` with token 1."""
    ledger = Ledger(url, clock=clock, lease_ttl=60, owner=owner)
    ledger.owners.register()
    start = ledger.sources.register("orders", "f" * 64)
    ledger.claim_range("b1", "orders", "w.orders", start, [10], 10, begin=True)
    return ledger


def _holder(ledger: Ledger) -> tuple[str, str, int]:
    """State, owner and token of batch ``b1``, as the ledger holds them."""
    from scheduler.ledger.schema import batches_table as t

    with ledger.engine.connect() as conn:
        row = conn.execute(sa.select(t.c.state, t.c.owner, t.c.token).where(t.c.id == "b1")).one()
    return row.state, row.owner, row.token


def test_begin_is_refused_on_a_live_owner_s_batch(ledger_url: str) -> None:
    now = [1000.0]
    first = _importing(ledger_url, lambda: now[0], "first")
    second = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=60, owner="second")
    second.owners.register()
    with pytest.raises(ClaimConflict, match="under owner 'first'"):
        second.begin("b1")
    assert _holder(first) == ("importing", "first", 1)  # nothing changed
    first.finish("b1", rows=10, token=1)  # its owner still ends it


def test_begin_takes_a_batch_over_once_its_lease_expired_or_its_owner_died(
    ledger_url: str,
) -> None:
    now = [1000.0]
    first = _importing(ledger_url, lambda: now[0], "first")
    second = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=60, owner="second")
    second.owners.register()
    now[0] += 59  # lease until 1060; owner alive (a heartbeat within dead_after)
    with pytest.raises(ClaimConflict):
        second.begin("b1", dead_after=1_000)
    now[0] += 2  # 1061: the lease expired, though the owner still counts as alive
    assert second.begin("b1", dead_after=1_000).token == 2
    assert _holder(first) == ("importing", "second", 2)

    # A fresh lease does not protect a batch whose owner stopped its heartbeat.
    third = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=600, owner="third")
    third.owners.register()
    third.claim_range("b2", "orders", "w.orders", third.sources.checkpoint("orders"), [20], 10,
                      begin=True)
    with pytest.raises(ClaimConflict):
        second.begin("b2", dead_after=30)
    now[0] += 31  # third's last heartbeat is 31 s old, its lease good for 569 s more
    assert second.begin("b2", dead_after=30).token == 2


def test_a_stale_owner_cannot_finish_or_fail_a_batch_taken_over(ledger_url: str) -> None:
    now = [1000.0]
    retry = RetryConfig(max_attempts=5, backoff=5, max_backoff=60)
    first = _importing(ledger_url, lambda: now[0], "first")
    second = Ledger(ledger_url, clock=lambda: now[0], lease_ttl=60, owner="second")
    second.owners.register()
    now[0] += 61
    assert second.begin("b1").token == 2  # first's lease ran out: second takes over

    with pytest.raises(ClaimConflict, match="under owner 'second'"):
        first.finish("b1", rows=10, token=1)
    with pytest.raises(ClaimConflict):
        first.fail("b1", "fenced off: a newer token committed", retry, token=1)
    with pytest.raises(ClaimConflict):
        first.finish("b1", rows=10)  # without a token the owner alone decides
    with pytest.raises(ClaimConflict):
        second.finish("b1", rows=10, token=1)  # the owner, but an older attempt's token
    assert _holder(first) == ("importing", "second", 2)  # nothing changed

    assert second.fail("b1", "connection reset", retry, token=2) == "failed"
    assert _holder(first) == ("failed", "second", 2)


@pytest.mark.timeout(60)
def test_two_daemons_racing_to_take_over_one_orphan_one_wins(ledger_url: str) -> None:
    killed = Ledger(ledger_url, owner="killed")  # never registered: its batch is an orphan
    start = killed.sources.register("orders", "f" * 64)
    killed.claim_range("b1", "orders", "w.orders", start, [10], 10, begin=True)
    racers = [Ledger(ledger_url, owner=name) for name in ("a", "b")]
    for racer in racers:
        racer.owners.register()
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def take(racer: Ledger) -> None:
        barrier.wait(timeout=30)
        try:
            racer.begin("b1")
            results[racer.owner] = "won"
        except ClaimConflict:
            results[racer.owner] = "lost"

    threads = [threading.Thread(target=take, args=(racer,)) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=50)
    assert sorted(results.values()) == ["lost", "won"]
    [winner] = [name for name, result in results.items() if result == "won"]
    assert _holder(killed) == ("importing", winner, 2)
    for ledger in (killed, *racers):
        ledger.close()


def test_the_writer_commits_in_groups_and_a_failed_request_fails_alone(
    ledger_url: str,
) -> None:
    ledger = Ledger(ledger_url)
    start = ledger.sources.register("orders", "f" * 64)
    ledger.claim_range("b1", "orders", "w.orders", start, [10], 10)
    def burst(requests):  # type: ignore[no-untyped-def]
        """Queue requests behind a blocked writer, so they arrive as one group."""
        gate = threading.Event()
        blocker = ledger.writer.submit(lambda conn: gate.wait(30))
        futures = [ledger.writer.submit(request) for request in requests]
        gate.set()
        assert blocker.result(timeout=30)
        return futures

    def insert(batch_id: str, key: int):  # type: ignore[no-untyped-def]
        manifest = _keys_manifest(batch_id, [[key]])
        return lambda conn: _insert_batch(conn, manifest, ledger.owner, 0.0, 60.0)

    groups_before = ledger.writer.groups
    for future in burst([insert(f"k{i}", i) for i in range(200)]):
        future.result(timeout=30)
    assert ledger.writer.groups - groups_before <= 3  # 200 requests, a handful of commits

    mixed = burst([insert("m1", 1), insert("k0", 0), insert("m2", 2)])  # k0 exists already
    mixed[0].result(timeout=30)
    mixed[2].result(timeout=30)
    with pytest.raises(Exception, match="(?i)unique|duplicate|constraint"):
        mixed[1].result(timeout=30)
    assert len(ledger.reads.batches(["claimed", "importing"])) == 203


def _keys_manifest(batch_id: str, keys: list[list[int]]):  # type: ignore[no-untyped-def]
    from spark_jobs.common.manifest import Manifest

    return Manifest(batch_id=batch_id, source="c", target="w.c", kind="keys", items=1, keys=keys)
