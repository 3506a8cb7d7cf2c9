"""QueueingLimitedSource: memory-only reads, one refill at a time, errors backed off."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

import pytest

from config.errors import SourceError
from sources.abc import Item, LimitedSource, MemorySource
from sources.buffer import Stocked
from sources.queueing import QueueingLimitedSource

pytestmark = pytest.mark.timeout(10)


class Refilled:
    """An on_refill callback that tests can wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0

    def __call__(self) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 5) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.count >= count, timeout), (
                f"only {self.count} refills, expected {count}"
            )


class GatedSource(LimitedSource):
    """Each call blocks until the test opens the gate; records max concurrency."""

    def __init__(self, keys: Sequence[int]) -> None:
        self.name = "gated"
        self.inner = MemorySource("gated", keys)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0
        self.asked: list[int] = []
        self.released: list[Item] = []

    def next_batch(self, limit: int) -> list[Item]:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.asked.append(limit)
        self.entered.set()
        try:
            assert self.gate.wait(5), "test never opened the gate"
            return self.inner.next_batch(limit)
        finally:
            with self.lock:
                self.running -= 1

    @property
    def exhausted(self) -> bool:
        return self.inner.exhausted

    def release(self, items: Sequence[Item]) -> None:
        self.released.extend(items)


def keys(items: list[Item]) -> list[object]:
    return [i.key for i in items]


def test_capacity_must_exceed_replenish_below() -> None:
    with pytest.raises(ValueError, match=r"replenish_below \(10\).*capacity \(10\)"):
        QueueingLimitedSource(MemorySource("m"), capacity=10, replenish_below=10)
    with pytest.raises(ValueError, match=r"replenish_below \(-1\)"):
        QueueingLimitedSource(MemorySource("m"), capacity=10, replenish_below=-1)


def test_refills_ask_for_the_free_room_and_serve_in_order() -> None:
    done = Refilled()
    source = MemorySource("m", range(100))
    q = QueueingLimitedSource(source, capacity=10, replenish_below=3, on_refill=done)
    q.start()
    done.wait_for(1)
    assert q.health().buffered == 10
    assert keys(q.next_batch(6, "b1")) == [0, 1, 2, 3, 4, 5]
    assert done.count == 1  # 4 left: above the threshold, no refill
    assert keys(q.next_batch(1, "b2")) == [6]
    health = q.health()  # 3 left, at the threshold, but held keys fill the room
    assert (health.buffered, health.held, health.refilling) == (3, 7, False)
    q.ack("b1")
    done.wait_for(2)  # acking freed room while at the threshold: refill 6
    assert q.health().buffered == 9
    assert keys(q.next_batch(100, "b3")) == list(range(7, 16))
    q.stop(5)


def test_refill_never_runs_twice_at_once_and_next_batch_does_not_wait_for_it() -> None:
    source = GatedSource(range(1000))
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=100, replenish_below=50, on_refill=done)
    q.start()
    assert source.entered.wait(5)
    for i in range(20):  # the refill is blocked: next_batch answers from memory at once
        assert q.next_batch(10, i) == []
        assert q.poke() is False
    assert q.health().refilling
    source.gate.set()
    done.wait_for(1)
    assert keys(q.next_batch(60, "b")) == list(range(60))
    q.ack("b")
    done.wait_for(2)
    q.stop(5)
    assert source.max_running == 1
    assert source.asked[:2] == [100, 60]


def test_failing_source_is_retried_with_backoff_and_counted() -> None:
    source = MemorySource("m", range(5))
    source.fail_next = SourceError("database unreachable")
    done = Refilled()
    q = QueueingLimitedSource(
        source,
        capacity=10,
        replenish_below=2,
        on_refill=done,
        backoff_base=0.001,
        backoff_max=0.01,
        rng=random.Random(1),
    )
    q.start()
    done.wait_for(2)  # the failure, then the retry
    health = q.health()
    assert health.errors == 1 and health.consecutive_errors == 0
    assert health.last_error == "SourceError: database unreachable"
    assert health.last_refill_at is not None
    assert keys(q.next_batch(10, "b")) == [0, 1, 2, 3, 4]
    assert q.exhausted  # source drained and nothing buffered
    q.stop(5)


class LongestJitter(random.Random):
    """Full jitter that always picks the longest wait."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_stop_ends_a_pending_backoff_at_once() -> None:
    source = MemorySource("m", range(5))
    source.fail_next = SourceError("down")
    done = Refilled()
    q = QueueingLimitedSource(
        source,
        capacity=10,
        replenish_below=2,
        on_refill=done,
        backoff_base=3600,
        backoff_max=3600,
        rng=LongestJitter(),
    )
    q.start()
    done.wait_for(1)
    assert q.health().refilling  # waiting for its retry
    timer = q._worker._timer
    assert timer is not None
    assert q.stop(timeout=1) is True
    timer.join(timeout=1)
    assert not timer.is_alive()
    assert source.calls == 1 and not q.health().refilling


def test_stop_does_not_wait_for_a_stuck_refill_and_its_items_go_back() -> None:
    source = GatedSource(range(5))
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=2, on_refill=done)
    q.start()
    assert source.entered.wait(5)
    assert q.stop(timeout=0.05) is False
    source.gate.set()
    done.wait_for(1)
    assert keys(source.released) == [0, 1, 2, 3, 4]
    assert q.health().buffered == 0


def test_release_gives_items_back_to_the_front_and_blocks_requeue_until_then() -> None:
    source = MemorySource("m", [1, 2, 3])
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=5, on_refill=done)
    q.start()
    done.wait_for(1)
    assert keys(q.next_batch(2, "b1")) == [1, 2]
    source.add([1, 2, 4])  # a source handing out in-flight keys again
    assert q.poke()
    done.wait_for(2)
    assert q.release("b1") == 2
    assert keys(q.next_batch(10, "b2")) == [1, 2, 3, 4]


def test_a_watched_buffer_notes_whether_it_holds_items_at_every_change() -> None:
    # The loop looks only at the buffers noted here: a change not noted would leave a
    # source's batch unfed for good.
    stocked = Stocked()
    source = MemorySource("m", [1, 2, 3])
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=0, on_refill=done)
    q.watch(stocked)
    assert stocked.names() == set()
    q.start()
    done.wait_for(1)
    assert stocked.names() == {"m"}  # filled
    q.next_batch(10, "b1")
    assert stocked.names() == set()  # all taken
    assert q.release("b1") == 3
    assert stocked.names() == {"m"}  # given back to the front
    q.next_batch(10, "b2")
    source.add([4])
    assert q.poke()
    done.wait_for(2)
    assert stocked.names() == {"m"}
    q.next_batch(10, "b3")
    q.ack("b2")
    q.ack("b3")
    assert stocked.names() == set()
    assert q.stop(5)
    other = Stocked()
    source.add([5])
    q2 = QueueingLimitedSource(source, capacity=10, replenish_below=0, on_refill=done)
    q2.start()
    done.wait_for(3)
    q2.watch(other)  # watched once it holds items: noted at once
    assert other.names() == {"m"}
    assert q2.stop(5)
    assert q2.give_back() == 1
    assert other.names() == set()


def test_release_to_source_and_give_back() -> None:
    source = GatedSource(range(6))
    source.gate.set()
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=2, on_refill=done)
    q.start()
    done.wait_for(1)
    q.next_batch(2, "b1")
    assert q.release("b1", to_source=True) == 2
    assert q.stop(5)
    assert q.give_back() == 4
    assert keys(source.released) == [0, 1, 2, 3, 4, 5]
    assert q.health().held == 0


def test_exhausted_source_is_asked_again_only_when_poked() -> None:
    source = MemorySource("m", [1])
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=5, on_refill=done)
    q.start()
    done.wait_for(1)
    q.next_batch(10, "b")
    assert q.exhausted
    assert q.next_batch(10, "c") == [] and source.calls == 1  # no automatic refill
    source.add([2])
    assert q.poke()
    done.wait_for(2)
    assert not q.exhausted
    assert keys(q.next_batch(10, "d")) == [2]
    q.stop(5)


def test_oldest_age_follows_the_head_chunk() -> None:
    now = [100.0]
    source = MemorySource("m", range(3))
    done = Refilled()
    q = QueueingLimitedSource(
        source, capacity=10, replenish_below=5, on_refill=done, clock=lambda: now[0]
    )
    assert q.oldest_age() is None
    q.start()
    done.wait_for(1)  # 3 items enqueued at t=100
    now[0] = 101.0
    source.add([3, 4])
    q.poke()
    done.wait_for(2)  # 2 more at t=101
    now[0] = 102.5
    assert q.oldest_age() == 2.5
    q.next_batch(3, "b")
    assert q.oldest_age() == 1.5
    q.release("b")  # back at the front with their own age
    assert q.oldest_age() == 2.5
    q.next_batch(5, "c")
    assert q.oldest_age() is None
    q.stop(5)


class ThreadRecordingSource(MemorySource):
    """Remembers which threads ran its ``next_batch``."""

    def __init__(self, name: str, keys: Sequence[int]) -> None:
        super().__init__(name, keys)
        self.threads: set[int] = set()

    def next_batch(self, limit: int) -> list[Item]:
        self.threads.add(threading.get_ident())
        return super().next_batch(limit)


def test_refills_run_on_one_thread_started_by_start_and_ended_by_stop() -> None:
    # Starting a thread waits until it runs: on the loop's path that costs
    # milliseconds whenever the GIL is busy, so next_batch must never do it.
    source = ThreadRecordingSource("m", range(1000))
    done = Refilled()
    q = QueueingLimitedSource(source, capacity=10, replenish_below=3, on_refill=done)
    before = set(threading.enumerate())
    q.start()
    [worker] = [t for t in set(threading.enumerate()) - before if t.name == "refill-m"]
    for n in range(1, 30):
        done.wait_for(n)
        taken = q.next_batch(10, n)  # leaves the buffer empty: one refill
        assert len(taken) == 10
        q.ack(n)
        assert set(threading.enumerate()) - before == {worker}  # no thread per refill
    assert source.threads == {worker.ident}
    assert q.stop(5)
    worker.join(5)
    assert not worker.is_alive()


def refused(message: str = "division by zero") -> SourceError:
    """An error the source marks as permanent: the database refuses the query itself."""
    error = SourceError(message)
    error.transient = False
    return error


class FailingSource(MemorySource):
    """Raises the next error of ``errors`` on each call while there are any."""

    def __init__(self, name: str, keys: Sequence[int], errors: Sequence[Exception]) -> None:
        super().__init__(name, keys)
        self.errors = list(errors)

    def next_batch(self, limit: int) -> list[Item]:
        if self.errors:
            self.calls += 1
            raise self.errors.pop(0)
        return super().next_batch(limit)


class Failed:
    """An on_failed callback that tests can wait on."""

    def __init__(self) -> None:
        self.errors: list[SourceError] = []
        self.called = threading.Event()

    def __call__(self, error: SourceError) -> None:
        self.errors.append(error)
        self.called.set()


def quick(source: LimitedSource, failed: Failed, done: Refilled) -> QueueingLimitedSource:
    """A buffer whose retries come after milliseconds."""
    return QueueingLimitedSource(
        source, capacity=10, replenish_below=2, on_refill=done, on_failed=failed,
        backoff_base=0.001, backoff_max=0.01, rng=random.Random(1),
    )


def test_a_refused_read_is_given_up_after_three_tries_and_reported_once() -> None:
    source = FailingSource("m", range(5), [refused()] * 5)
    failed, done = Failed(), Refilled()
    q = quick(source, failed, done)
    q.start()
    assert failed.called.wait(5)
    done.wait_for(3)
    assert source.calls == 3  # backed off between, then no fourth try
    [error] = failed.errors
    assert str(error) == "source m: refill failed 3 times: division by zero"
    assert not error.transient and q.failed is error
    health = q.health()
    assert health.failed == str(error) and not health.refilling and health.errors == 3
    assert not q.poke() and q.next_batch(5, "b") == [] and not q.exhausted
    assert source.calls == 3
    q.stop(5)


def test_transient_errors_are_retried_for_as_long_as_they_last() -> None:
    # Unknown exceptions count as transient: only the source can say a read is refused.
    errors: list[Exception] = [SourceError("connection lost"), RuntimeError("?")] * 3
    source = FailingSource("m", range(5), errors)
    failed, done = Failed(), Refilled()
    q = quick(source, failed, done)
    q.start()
    done.wait_for(7)
    assert keys(q.next_batch(10, "b")) == [0, 1, 2, 3, 4]
    assert q.failed is None and not failed.errors and q.health().errors == 6
    q.stop(5)


def test_refused_reads_count_until_a_refill_succeeds() -> None:
    # Two refusals, a success, two refusals, a connection error, a refusal: never three
    # refusals since a success, so it goes on; the next refusal is the third.
    errors = [refused(), refused()]
    source = FailingSource("m", [1], errors)
    failed, done = Failed(), Refilled()
    q = quick(source, failed, done)
    q.start()
    done.wait_for(3)
    assert keys(q.next_batch(10, "b")) == [1] and q.health().consecutive_errors == 0
    source.add([2])
    source.errors = [refused(), refused(), SourceError("connection lost"), refused("again")]
    assert q.poke()
    assert failed.called.wait(5)
    assert str(failed.errors[0]) == "source m: refill failed 3 times: again"
    assert source.calls == 7 and q.health().errors == 6
    q.stop(5)


def test_max_permanent_failures_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_permanent_failures"):
        QueueingLimitedSource(MemorySource("m"), 10, 2, max_permanent_failures=0)
