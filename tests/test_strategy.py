"""Strategies: shares follow weights, prefer falls back and returns, idle sources don't hoard."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from config.loader import load_config_text
from scheduler.strategy import Fair, Leaf, Prefer, build_strategy


def feed(strategy, ready, ticks: int, batch: int = 100) -> Counter:  # type: ignore[no-untyped-def]
    """Run ``ticks`` picks against fixed buffers; count items fed per source."""
    fed: Counter = Counter()
    for _ in range(ticks):
        choice = strategy.pick(ready)
        if choice is None:
            break
        strategy.charge(choice, batch)
        fed[choice] += batch
    return fed


def test_fair_shares_match_weights_within_two_percent() -> None:
    strategy = Fair([(Leaf("x"), 2), (Leaf("y"), 1), (Leaf("z"), 0.5)])
    fed = feed(strategy, {"x": 10**9, "y": 10**9, "z": 10**9}, 10_000)
    total = sum(fed.values())
    for name, weight in (("x", 2), ("y", 1), ("z", 0.5)):
        assert fed[name] / total == pytest.approx(weight / 3.5, rel=0.02)


def test_fair_shares_hold_with_uneven_batch_sizes() -> None:
    strategy = Fair([(Leaf("x"), 1), (Leaf("y"), 1)])
    fed: Counter = Counter()
    for tick in range(10_000):
        choice = strategy.pick({"x": 1, "y": 1})
        assert choice is not None
        size = 1000 if choice == "x" else 10 + tick % 7
        strategy.charge(choice, size)
        fed[choice] += size
    assert fed["x"] / fed["y"] == pytest.approx(1.0, rel=0.02)


def test_empty_source_neither_blocks_nor_hoards() -> None:
    strategy = Fair([(Leaf("x"), 1), (Leaf("y"), 1)])
    # y has nothing for a long while: x is fed alone, never blocked.
    alone = feed(strategy, {"x": 5, "y": 0}, 1_000)
    assert alone == Counter({"x": 100_000})
    # When y comes back it gets its fair half, not a burst of banked credit.
    after = feed(strategy, {"x": 5, "y": 5}, 100)
    assert after["x"] == pytest.approx(after["y"], abs=100)


def test_prefer_falls_back_and_returns() -> None:
    strategy = Prefer([Leaf("z"), Fair([(Leaf("x"), 2), (Leaf("y"), 1)])])
    assert strategy.pick({"z": 3, "x": 3, "y": 3}) == "z"
    assert strategy.pick({"z": 0, "x": 3, "y": 3}) in {"x", "y"}
    fallback = feed(strategy, {"z": 0, "x": 3, "y": 3}, 3_000)
    assert fallback["x"] / fallback["y"] == pytest.approx(2.0, rel=0.02)
    assert strategy.pick({"z": 1, "x": 3, "y": 3}) == "z"
    assert strategy.pick({}) is None


def test_strategy_from_the_reference_yaml_and_a_default() -> None:
    text = Path("examples/reference.yaml").read_text()
    cfg = load_config_text(text, "examples/reference.yaml")
    strategy = build_strategy(cfg)
    assert strategy.pick({"events": 1, "orders": 1, "customers": 1}) == "events"
    fed = feed(strategy, {"events": 0, "orders": 1, "customers": 1}, 3_000)
    assert fed["orders"] / fed["customers"] == pytest.approx(2.0, rel=0.02)
    assert "prefer[" in strategy.explain({"orders": 1})

    without = text.split("strategy:")[0] + "batch: {max_items: 10}\n"
    no_strategy = load_config_text(without, "x.yaml")
    default = build_strategy(no_strategy)
    assert sorted(default.sources()) == ["customers", "events", "orders"]
