"""Strategies: which source feeds the next batch.

A strategy is a tree built from the YAML ``strategy:`` section. Leaves are
sources; ``prefer`` picks its first child that has items; ``fair`` shares
items between its children in proportion to their weights. A strategy only
looks at how many items each buffer holds: it never does I/O, so it costs the
main loop nothing.

``fair`` is weighted fair queueing on items (start-time fair queueing): each
child carries a virtual time that grows by ``items / weight`` whenever it is
fed, and the child with items and the smallest virtual time goes next. A
child that had nothing is lifted to the current virtual time when it comes
back, so an idle source neither holds the others back nor banks credit.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from config.models import PreferNode, SluiceConfig, StrategyNode


class Node(abc.ABC):
    """One node of a strategy tree."""

    @abc.abstractmethod
    def sources(self) -> list[str]:
        """Every source below this node."""

    def has_items(self, ready: Mapping[str, int]) -> bool:
        """Whether any source below this node has items ready."""
        return any(ready.get(name, 0) > 0 for name in self.sources())

    @abc.abstractmethod
    def pick(self, ready: Mapping[str, int]) -> str | None:
        """The source to feed next among those with items ready, or None."""

    @abc.abstractmethod
    def charge(self, source: str, items: int) -> None:
        """Account ``items`` fed from ``source`` (a source below this node)."""

    @abc.abstractmethod
    def explain(self, ready: Mapping[str, int]) -> str:
        """Why this node would pick what it picks now, for logs and ``sluice plan``."""


class Leaf(Node):
    """A single source."""

    def __init__(self, name: str) -> None:
        self.name = name

    def sources(self) -> list[str]:
        return [self.name]

    def pick(self, ready: Mapping[str, int]) -> str | None:
        return self.name if ready.get(self.name, 0) > 0 else None

    def charge(self, source: str, items: int) -> None:
        pass

    def explain(self, ready: Mapping[str, int]) -> str:
        return f"{self.name}({ready.get(self.name, 0)} ready)"


class Prefer(Node):
    """Ordered fallback: the first child with items wins."""

    def __init__(self, children: Sequence[Node]) -> None:
        self.children = list(children)
        self._owner = {name: child for child in self.children for name in child.sources()}

    def sources(self) -> list[str]:
        return list(self._owner)

    def pick(self, ready: Mapping[str, int]) -> str | None:
        for child in self.children:
            choice = child.pick(ready)
            if choice is not None:
                return choice
        return None

    def charge(self, source: str, items: int) -> None:
        self._owner[source].charge(source, items)

    def explain(self, ready: Mapping[str, int]) -> str:
        parts = ", ".join(child.explain(ready) for child in self.children)
        return f"prefer[{parts}] -> {self.pick(ready)}"


class Fair(Node):
    """Weighted fair share of items between children."""

    def __init__(self, children: Sequence[tuple[Node, float]]) -> None:
        if not children:
            raise ValueError("fair needs at least one child")
        self.children = [child for child, _ in children]
        self.weights = [float(weight) for _, weight in children]
        self.vtimes = [0.0] * len(self.children)
        self.vtime = 0.0  # virtual time of the last child fed
        self._index = {
            name: i for i, child in enumerate(self.children) for name in child.sources()
        }

    def sources(self) -> list[str]:
        return list(self._index)

    def pick(self, ready: Mapping[str, int]) -> str | None:
        best: int | None = None
        for i, child in enumerate(self.children):
            if not child.has_items(ready):
                continue
            # An idle child comes back at the current virtual time, never behind it.
            self.vtimes[i] = max(self.vtimes[i], self.vtime)
            if best is None or self.vtimes[i] < self.vtimes[best]:
                best = i
        if best is None:
            return None
        return self.children[best].pick(ready)

    def charge(self, source: str, items: int) -> None:
        i = self._index[source]
        self.vtime = max(self.vtime, self.vtimes[i])
        self.vtimes[i] += items / self.weights[i]
        self.children[i].charge(source, items)

    def explain(self, ready: Mapping[str, int]) -> str:
        parts = ", ".join(
            f"{child.explain(ready)} w={w:g} vt={vt:.1f}"
            for child, w, vt in zip(self.children, self.weights, self.vtimes, strict=True)
        )
        return f"fair[{parts}] -> {self.pick(ready)}"


def build_node(node: StrategyNode) -> Node:
    """Turn a validated config node into a strategy node."""
    if isinstance(node, str):
        return Leaf(node)
    if isinstance(node, PreferNode):
        return Prefer([build_node(child) for child in node.prefer])
    if isinstance(node.fair, dict):
        return Fair([(Leaf(name), weight) for name, weight in node.fair.items()])
    return Fair([(build_node(entry.node), entry.weight) for entry in node.fair])


def build_strategy(cfg: SluiceConfig) -> Node:
    """The configured strategy, or a fair share with equal weights over every source."""
    if cfg.strategy is None:
        return Fair([(Leaf(name), 1.0) for name in cfg.sources])
    root = build_node(cfg.strategy.root)
    unmentioned = [name for name in cfg.sources if name not in root.sources()]
    if unmentioned:
        # A source left out of the strategy is still migrated, after the others.
        root = Prefer([root, Fair([(Leaf(name), 1.0) for name in unmentioned])])
    return root

