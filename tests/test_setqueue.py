"""SetQueue: FIFO with set semantics, held keys per batch, bounded, thread-safe."""

from __future__ import annotations

import random
import threading
from operator import attrgetter
from typing import Any

import pytest

from sources.abc import Item
from sources.setqueue import SetQueue


def test_fifo_order_and_queued_key_keeps_its_place() -> None:
    q: SetQueue[int] = SetQueue(10)
    assert q.offer_many([1, 2, 3]) == 3
    assert q.offer(1) is False
    assert q.offer_many([4, 2, 5]) == 2
    assert q.poll_many(10, "b1") == [1, 2, 3, 4, 5]


def test_repeats_within_one_offer_are_taken_once_with_the_first_value() -> None:
    q: SetQueue[Item] = SetQueue(10, key=attrgetter("key"))
    first, again = Item("s", (1,), payload="first"), Item("s", (1,), payload="again")
    assert q.offer_many([first, Item("s", (2,)), again]) == 2
    assert [i.payload for i in q.poll_many(1, "b")] == ["first"]


def test_held_keys_are_not_requeued_until_released() -> None:
    q: SetQueue[int] = SetQueue(10)
    q.offer_many([1, 2, 3, 4])
    assert q.poll_many(2, "b1") == [1, 2]
    assert 1 in q and q.held_count() == 2 and len(q) == 2
    assert q.offer_many([1, 2, 5]) == 1  # a refill returning in-flight keys
    assert q.release("b1") == 2
    assert q.held_count() == 0
    assert q.poll_many(10, "b2") == [1, 2, 3, 4, 5]  # given back at the front, in order


def test_ack_forgets_the_batch_so_its_keys_can_come_again() -> None:
    q: SetQueue[int] = SetQueue(10)
    q.offer_many([1, 2])
    q.poll_many(1, "b1")
    q.poll_many(1, "b1")  # same batch id: adds to the batch
    assert q.ack("b1") == [1, 2]
    assert q.ack("b1") == [] and q.release("unknown") == 0
    assert 1 not in q
    assert q.offer(1) is True


def _versioned() -> SetQueue[Item]:
    return SetQueue(10, key=attrgetter("key"), park=lambda item: bool(item.version))


def test_a_newer_version_of_a_held_key_is_parked_and_queued_once_its_batch_is_done() -> None:
    q = _versioned()
    q.offer_many([Item("s", (1,), version="v1"), Item("s", (2,), version="v1")])
    assert [i.version for i in q.poll_many(1, "b1")] == ["v1"]
    # Key 1 changed twice while its batch imports: the latest read waits, none is lost.
    assert q.offer_many([Item("s", (1,), version="v2")]) == 0
    assert q.offer_many([Item("s", (1,), version="v3"), Item("s", (3,), version="v1")]) == 1
    assert q.parked_count() == 1 and q.held_count() == 1
    assert [i.version for i in q.ack("b1")] == ["v1"]
    assert q.parked_count() == 0
    assert [(i.key, i.version) for i in q.poll_many(10, "b2")] == [
        ((2,), "v1"), ((3,), "v1"), ((1,), "v3")  # behind what was queued
    ]


def test_a_newer_version_of_a_queued_key_goes_out_in_its_place() -> None:
    q = _versioned()
    q.offer_many([Item("s", (1,), version="v1"), Item("s", (2,), version="v1")])
    assert q.offer(Item("s", (2,), version="v2")) is False
    assert [(i.key, i.version) for i in q.poll_many(10, "b")] == [((1,), "v1"), ((2,), "v2")]
    assert q.parked_count() == 0
    q.ack("b")
    assert len(q) == 0  # nothing parked is left to come back


def test_a_released_batch_leaves_the_newer_version_parked_for_the_next_poll() -> None:
    q = _versioned()
    q.offer(Item("s", (1,), version="v1"))
    q.poll_many(1, "b1")
    q.offer(Item("s", (1,), version="v2"))
    assert q.release("b1") == 1  # a lost claim: the key is queued again at the front
    assert [i.version for i in q.poll_many(1, "b2")] == ["v2"]
    assert [i.version for i in q.drain()] == []


def test_unversioned_repeats_are_dropped_not_parked() -> None:
    q: SetQueue[Item] = SetQueue(10, key=attrgetter("key"), park=lambda item: bool(item.version))
    q.offer(Item("s", (1,)))
    q.poll_many(1, "b")
    assert q.offer(Item("s", (1,))) is False
    assert q.parked_count() == 0


def test_held_keys_count_against_capacity_and_nothing_is_evicted() -> None:
    q: SetQueue[int] = SetQueue(4)
    assert q.offer_many(range(10)) == 4
    assert q.poll_many(3, "b1") == [0, 1, 2]
    assert q.free() == 0
    assert q.offer(99) is False
    assert q.offer_many([7, 8]) == 0
    q.ack("b1")
    assert q.free() == 3
    assert q.offer_many([7, 8, 9, 10]) == 3
    assert q.drain() == [3, 7, 8, 9]
    assert len(q) == 0 and q.free() == 4


def test_release_after_many_polls_keeps_order() -> None:
    # Enough keys to exercise the compaction of the order list.
    q: SetQueue[int] = SetQueue(50_000)
    q.offer_many(range(20_000))
    for i in range(15):
        q.poll_many(1000, i)
    q.release(14)
    q.release(3)
    assert q.poll_many(3, "x") == [3000, 3001, 3002]
    rest = q.poll_many(50_000, "y")
    assert rest[997:1000] == [14_000, 14_001, 14_002] and rest[-1] == 19_999
    assert len(rest) == 1997 + 5000


def test_invalid_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SetQueue(0)


@pytest.mark.timeout(10)
def test_duplicates_offered_concurrently_are_queued_once() -> None:
    q: SetQueue[int] = SetQueue(100_000)
    go = threading.Event()
    accepted: list[int] = []

    def offer() -> None:
        go.wait()
        accepted.append(
            sum(q.offer_many(range(start, start + 1000)) for start in range(0, 20_000, 1000))
        )

    threads = [threading.Thread(target=offer) for _ in range(4)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(timeout=5)
    assert sum(accepted) == 20_000
    assert q.poll_many(100_000, "all") == list(range(20_000))


@pytest.mark.timeout(10)
def test_concurrent_polls_hand_each_key_out_once() -> None:
    q: SetQueue[int] = SetQueue(100_000)
    q.offer_many(range(50_000))
    go = threading.Event()
    got: list[list[int]] = [[] for _ in range(4)]

    def poll(slot: int) -> None:
        go.wait()
        while batch := q.poll_many(97, (slot, len(got[slot]))):
            got[slot].extend(batch)

    threads = [threading.Thread(target=poll, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(timeout=5)
    every = sorted(k for part in got for k in part)
    assert every == list(range(50_000))
    assert all(part == sorted(part) for part in got)  # each thread saw FIFO order


def test_offers_mixing_known_repeated_and_new_keys_with_little_room() -> None:
    q: SetQueue[Item] = SetQueue(6, key=attrgetter("key"))
    assert q.offer_many([Item("s", k, payload="a") for k in (1, 2, 3)]) == 3
    assert [i.key for i in q.poll_many(1, "b")] == [1]  # 1 is held, 2 and 3 queued
    offered = [Item("s", k, payload="b") for k in (3, 4, 1, 4, 5, 6, 7)]
    assert q.offer_many(offered) == 3  # room for 3: the first new keys, 4, 5 and 6
    assert [(i.key, i.payload) for i in q.drain()] == [
        (2, "a"), (3, "a"), (4, "b"), (5, "b"), (6, "b")
    ]
    assert q.release("b") == 1 and [i.key for i in q.poll_many(5, "c")] == [1]


def test_a_polled_list_is_the_callers_own() -> None:
    for key in (None, attrgetter("real")):
        q: SetQueue[int] = SetQueue(10, key=key)
        q.offer_many([1, 2, 3, 4])
        first = q.poll_many(2, "b")
        first.append(99)
        assert q.poll_many(1, "b") == [3]  # same batch: held grows, ``first`` does not
        assert q.ack("b") == [1, 2, 3] and first == [1, 2, 99]


@pytest.mark.parametrize("keyed", [False, True])
def test_random_operations_match_a_simple_model(keyed: bool) -> None:
    """Offers, polls, acks and releases in random order behave like a plain model."""
    rng = random.Random(7)
    q: SetQueue[Any] = SetQueue(50, key=attrgetter("key") if keyed else None)
    queued: list[Any] = []  # the model: FIFO of queued keys…
    held: dict[int, list[Any]] = {}  # …and held keys per batch
    for step in range(3000):
        op = rng.random()
        if op < 0.4:
            keys = [rng.randrange(120) for _ in range(rng.randrange(1, 30))]
            room = 50 - len(queued) - sum(map(len, held.values()))
            taken: list[Any] = []
            for k in keys:
                known = k in queued or k in taken or any(k in h for h in held.values())
                if not known and len(taken) < room:
                    taken.append(k)
            offered = [Item("s", k, payload=step) for k in keys] if keyed else keys
            assert q.offer_many(offered) == len(taken)
            queued += taken
        elif op < 0.7:
            batch = rng.randrange(8)
            n = rng.randrange(0, 12)
            got = q.poll_many(n, batch)
            keys = [i.key for i in got] if keyed else got
            assert keys == queued[: len(keys)] and len(keys) == min(n, len(queued))
            del queued[: len(keys)]
            if keys:
                held.setdefault(batch, []).extend(keys)
        elif op < 0.85:
            batch = rng.randrange(8)
            acked = q.ack(batch)
            assert ([i.key for i in acked] if keyed else acked) == held.pop(batch, [])
        else:
            batch = rng.randrange(8)
            back = held.pop(batch, [])
            assert q.release(batch) == len(back)
            queued = back + queued
        assert len(q) == len(queued) and q.held_count() == sum(map(len, held.values()))
        assert q.free() == 50 - len(q) - q.held_count()
    rest = q.drain()
    assert ([i.key for i in rest] if keyed else rest) == queued
