"""TickCollector: automatic GC off while the loop runs, collections between ticks."""

from __future__ import annotations

import gc

from scheduler.collector import FULL_SHARE, TickCollector


class Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_collection_is_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with TickCollector():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_young_collections_follow_the_thresholds_and_full_ones_the_clock() -> None:
    now = [0.0]
    collector = TickCollector(full_every=10.0, clock=lambda: now[0])
    first = gc.get_threshold()[0]
    with collector:
        gc.collect()
        collector.between_ticks()
        assert collector.collections == [0, 0, 0]  # nothing due yet
        garbage = [Cycle() for _ in range(first * 3)]
        del garbage
        collector.between_ticks()
        assert collector.collections[0] + collector.collections[1] == 1
        now[0] = 10.0
        collector.between_ticks()
        assert collector.collections[2] == 1
        assert gc.get_count()[0] < first  # the cycles were collected here, not on their own


def test_a_long_full_collection_puts_the_next_one_off(monkeypatch) -> None:
    """A heap that takes a second to scan is scanned at most every 1 / FULL_SHARE seconds."""
    now = [0.0]
    real_collect = gc.collect

    def collect(generation: int = 2) -> int:
        if generation == 2:
            now[0] += 1.0  # this full collection takes a second
        return real_collect(generation)

    monkeypatch.setattr(gc, "collect", collect)
    collector = TickCollector(full_every=10.0, clock=lambda: now[0])
    with collector:
        now[0] = 10.0
        collector.between_ticks()
        assert collector.collections[2] == 1 and collector.longest == 1.0
        now[0] = 11.0 + 10.0  # full_every has passed since, but not 1 s / FULL_SHARE
        collector.between_ticks()
        assert collector.collections[2] == 1
        now[0] = 11.0 + 1.0 / FULL_SHARE
        collector.between_ticks()
        assert collector.collections[2] == 2


def test_a_program_that_turned_gc_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with TickCollector(full_every=0.0) as collector:
            collector.between_ticks()
        assert collector.collections == [0, 0, 0] and not gc.isenabled()
    finally:
        gc.enable()
