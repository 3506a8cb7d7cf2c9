"""Strategies: shares follow weights, prefer falls back and returns, idle sources don't hoard."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from config.loader import load_config_text
from config.models import ShareConfig
from scheduler.strategy import Fair, Leaf, Prefer, ShareGuard, build_strategy


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


# -- share bounds and aging (ShareGuard) ----------------------------------------------


def test_min_share_holds_under_a_strict_prefer() -> None:
    ready = {"x": 10**9, "y": 10**9}
    # Without a minimum, prefer starves y completely…
    assert feed(Prefer([Leaf("x"), Leaf("y")]), ready, 10_000)["y"] == 0
    # …with one, y gets its minimum (aging off, so the minimum alone does it).
    guard = ShareGuard(
        Prefer([Leaf("x"), Leaf("y")]), {"y": ShareConfig(min=0.2)}, window=10_000, aging=None
    )
    fed = feed(guard, ready, 10_000)
    assert fed["y"] / sum(fed.values()) == pytest.approx(0.2, rel=0.02)


def test_the_most_starved_minimum_goes_first() -> None:
    shares = {"y": ShareConfig(min=0.3), "z": ShareConfig(min=0.1)}
    guard = ShareGuard(Prefer([Leaf("x"), Leaf("y"), Leaf("z")]), shares, window=10_000)
    fed = feed(guard, {"x": 1, "y": 1, "z": 1}, 10_000)
    total = sum(fed.values())
    assert fed["y"] / total == pytest.approx(0.3, rel=0.02)
    assert fed["z"] / total == pytest.approx(0.1, rel=0.02)


def test_max_share_caps_while_others_have_items() -> None:
    guard = ShareGuard(
        Fair([(Leaf("x"), 1), (Leaf("y"), 1)]), {"x": ShareConfig(max=0.3)}, window=10_000
    )
    fed = feed(guard, {"x": 1, "y": 1}, 10_000)
    assert fed["x"] / sum(fed.values()) == pytest.approx(0.3, rel=0.02)
    # Alone, a capped source is still fed: a cap never idles the loop.
    assert feed(guard, {"x": 1, "y": 0}, 100) == Counter({"x": 10_000})


def test_aging_feeds_a_source_a_strict_prefer_would_starve() -> None:
    guard = ShareGuard(Prefer([Leaf("x"), Leaf("y")]), aging=20)
    gaps, since = [], 0
    for _ in range(10_000):
        choice = guard.pick({"x": 1, "y": 1})
        assert choice is not None
        guard.charge(choice, 100)
        if choice == "y":
            gaps.append(since)
            since = 0
        else:
            since += 1
    assert max(gaps) == 20 and len(gaps) == pytest.approx(10_000 / 21, abs=1)


def test_an_empty_source_with_bounds_neither_blocks_nor_hoards() -> None:
    guard = ShareGuard(
        Fair([(Leaf("x"), 1), (Leaf("y"), 1)]),
        {"y": ShareConfig(min=0.4), "x": ShareConfig(max=0.6)},
        window=10_000, aging=10,
    )
    feed(guard, {"x": 1, "y": 1}, 1_000)
    # y runs dry: x is fed alone, despite its cap and y's minimum…
    assert feed(guard, {"x": 1, "y": 0}, 1_000) == Counter({"x": 100_000})
    # …and y comes back to its fair half, without a burst of banked minimum or age.
    picks, fed = [], Counter()
    for _ in range(20):
        choice = guard.pick({"x": 1, "y": 1})
        assert choice is not None
        guard.charge(choice, 100)
        fed[choice] += 1
        picks.append(choice)
    assert fed["y"] == pytest.approx(10, abs=2), picks


def test_shares_from_yaml_and_explain_says_why() -> None:
    text = Path("examples/reference.yaml").read_text()
    fair = "    - fair: {orders: 2, customers: 1}\n"
    text = text.replace(fair, fair + "  shares: {customers: {min: 0.1}, orders: {max: 0.5}}\n")
    strategy = build_strategy(load_config_text(text, "examples/reference.yaml"), aging=None)
    ready = {"events": 1, "orders": 1, "customers": 1}
    fed = feed(strategy, ready, 10_000)
    total = sum(fed.values())
    # prefer would give events everything; the minimum still reaches customers.
    assert fed["customers"] / total == pytest.approx(0.1, rel=0.02)
    assert fed["orders"] == 0

    capped = build_strategy(load_config_text(text, "examples/reference.yaml"))
    feed(capped, {"orders": 1, "customers": 1}, 50)
    why = capped.explain({"orders": 1, "customers": 1})
    assert "orders: share" in why and "max 0.5" in why and "fair[" in why
    starved = build_strategy(load_config_text(text, "examples/reference.yaml"))
    feed(starved, {"events": 1, "orders": 1}, 40)
    assert "feeds customers (share n/a below min 0.1)" in starved.explain(ready)
    aged = build_strategy(load_config_text(text, "examples/reference.yaml"), aging=5)
    feed(aged, {"events": 1, "orders": 1}, 5)
    assert "feeds orders (aged, passed over 5 picks in a row)" in aged.explain(ready)
