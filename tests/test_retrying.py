"""The retry helper: how long it waits, what it retries, when it gives up."""

from __future__ import annotations

import random

import pytest

from config.retrying import Backoff, retrying


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(0.5, 4.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.delay(10_000) == 4.0  # no overflow however long it lasts


def test_full_jitter_stays_under_the_backoff() -> None:
    backoff = Backoff(1.0, 8.0, jitter=True)
    rng = random.Random(7)
    delays = [backoff.delay(4, rng) for _ in range(500)]
    assert all(0 <= d <= 8.0 for d in delays) and len(set(delays)) > 400


def test_retries_until_success_and_reports_each_wait() -> None:
    time, calls, seen = FakeTime(), [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise ConnectionError(f"refused {len(calls)}")
        return "ok"

    result = retrying(flaky, should_retry=lambda e: isinstance(e, ConnectionError),
                      backoff=Backoff(1.0, 10.0), grace=60, sleep=time.sleep, clock=time.clock,
                      on_retry=lambda n, d, e: seen.append((n, d, str(e))))  # fmt: skip
    assert result == "ok" and len(calls) == 4
    assert time.slept == [1.0, 2.0, 4.0]
    assert seen == [(1, 1.0, "refused 1"), (2, 2.0, "refused 2"), (3, 4.0, "refused 3")]


def test_an_error_not_worth_retrying_is_raised_at_once() -> None:
    time = FakeTime()

    def broken() -> None:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        retrying(broken, should_retry=lambda e: isinstance(e, ConnectionError),
                 backoff=Backoff(1.0, 10.0), grace=60, sleep=time.sleep, clock=time.clock)
    assert time.slept == []


def test_gives_up_with_the_last_error_once_the_grace_period_is_over() -> None:
    time, calls = FakeTime(), []

    def down() -> None:
        calls.append(1)
        raise ConnectionError(f"down {len(calls)}")

    with pytest.raises(ConnectionError, match="down 5"):
        retrying(down, should_retry=lambda e: True, backoff=Backoff(1.0, 4.0), grace=10,
                 sleep=time.sleep, clock=time.clock)
    assert time.slept == [1.0, 2.0, 4.0, 3.0]  # the last wait ends as the 10 s do: one more try
    assert len(calls) == 5 and time.now == 110.0
