"""The daemon's periodic jobs: a job that grows slow (a status of 1,000 tables) runs less often."""

from __future__ import annotations

from scheduler.background import at_most
from tests.helpers import FakeClock


def test_a_slow_job_waits_twenty_times_its_length_and_a_quick_one_runs_each_tick() -> None:
    clock = FakeClock(0.0)
    ran: list[float] = []
    length = {"s": 0.001}

    def job() -> None:
        ran.append(clock.now)
        clock.now += length["s"]

    tick = at_most(job, 1.0, 0.05, clock=lambda: clock.now, cost=lambda: clock.now)
    for second in range(5):  # quick: every tick
        clock.now = float(second)
        tick()
    assert ran == [0.0, 1.0, 2.0, 3.0, 4.0]
    length["s"] = 2.0  # now it takes 2 s: next run 40 s after this one began
    ran.clear()
    for second in range(5, 100):
        clock.now = float(second)
        tick()
    assert ran == [5.0, 45.0, 85.0]
    length["s"] = 0.001  # quick again: every tick after its next run
    ran.clear()
    for second in range(125, 129):
        clock.now = float(second)
        tick()
    assert ran == [125.0, 126.0, 127.0, 128.0]


def test_a_job_that_waits_but_costs_little_runs_each_tick() -> None:
    """A busy machine (or a slow ledger) stretches a job's wall time, not its CPU time: it
    still runs each tick."""
    clock = FakeClock(0.0)
    ran: list[float] = []

    def job() -> None:
        ran.append(clock.now)
        clock.now += 3.0  # three seconds waiting for the interpreter or an answer

    tick = at_most(job, 1.0, 0.05, clock=lambda: clock.now)  # cost: the thread's CPU time
    for second in range(0, 20, 4):
        clock.now = float(second)
        tick()
    assert ran == [0.0, 4.0, 8.0, 12.0, 16.0]
