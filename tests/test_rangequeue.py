"""RangeQueue: key ranges in order, every limit counted in rows."""

from __future__ import annotations

import pytest

from sources.abc import Item
from sources.rangequeue import RangeQueue


def ranges(*spans: tuple[int, int]) -> list[Item]:
    """Items for ranges given as (last key, rows)."""
    return [Item("s", (last,), rows=rows) for last, rows in spans]


def spans(items: list[Item]) -> list[tuple[int, int]]:
    return [(item.key[0], item.rows) for item in items]


def test_capacity_counts_rows_and_an_offer_takes_what_fits_in_order() -> None:
    q = RangeQueue(1000)
    assert q.offer_many(ranges((100, 400), (200, 400), (300, 400))) == 2
    assert q.rows() == 800 and len(q) == 2 and q.free() == 200
    assert q.offer_many(ranges((300, 201))) == 0  # one row too many: the caller keeps it


def test_a_batch_takes_adjacent_ranges_up_to_its_rows_and_holds_them() -> None:
    q = RangeQueue(10_000)
    q.offer_many(ranges((10, 300), (20, 300), (30, 300), (40, 300)))
    assert spans(q.poll_many(700, "b1")) == [(10, 300), (20, 300)]
    assert q.held_count() == 600 and q.rows() == 600 and q.free() == 8800
    assert q.poll_many(299, "b2") == []  # never more rows than asked
    assert spans(q.poll_many(299, "b2", at_least_one=True)) == [(30, 300)]
    assert spans(q.ack("b1")) == [(10, 300), (20, 300)]
    assert q.held_count() == 300 and q.free() == 9400
    assert q.ack("b1") == [] and q.release("unknown") == 0


def test_released_ranges_go_back_to_the_head_in_order() -> None:
    q = RangeQueue(10_000)
    q.offer_many(ranges((10, 5), (20, 5), (30, 5)))
    q.poll_many(10, "b1")
    assert q.release("b1") == 2
    assert q.held_count() == 0 and q.rows() == 15
    assert spans(q.drain()) == [(10, 5), (20, 5), (30, 5)]
    assert q.rows() == 0 and len(q) == 0


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RangeQueue(0)


def test_a_range_that_holds_no_rows_in_memory_weighs_what_it_holds_and_goes_alone() -> None:
    # A stream's load range: its importer reads its 200,000 rows; the buffer holds its ends.
    q = RangeQueue(10)
    loads = [Item("s", (n,), rows=200_000, held=1) for n in (1, 2, 3)]
    assert q.offer_many(loads) == 3 and q.free() == 7 and q.rows() == 3
    taken = q.poll_many(5, "b1", at_least_one=True)  # more rows than the batch: alone
    assert taken == loads[:1] and q.held_count() == 1 and q.free() == 7
    assert q.release("b1") == 1 and q.rows() == 3 and q.held_count() == 0
    assert q.ack("b1") == [] and q.poll_many(5, "b2") == []  # none fits without at_least_one
