"""TickCollector: automatic GC off while the loop runs, collections between ticks."""

from __future__ import annotations

import gc

from scheduler.collector import TickCollector


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


def test_a_program_that_turned_gc_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with TickCollector(full_every=0.0) as collector:
            collector.between_ticks()
        assert collector.collections == [0, 0, 0] and not gc.isenabled()
    finally:
        gc.enable()
