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

The root is always wrapped in a :class:`ShareGuard`, which enforces the
per-source ``strategy.shares`` bounds and ages starved sources over whatever
the tree below would pick; see its docstring.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Mapping, Sequence

from config.models import PreferNode, ShareConfig, SluiceConfig, StrategyNode


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
        # Children that are single sources, by name: a pick then looks at the sources
        # ready (often few of 1,000 tables) instead of asking every child.
        self._leaves = (
            {c.name: i for i, c in enumerate(self.children) if isinstance(c, Leaf)}
            if all(isinstance(c, Leaf) for c in self.children) else None
        )  # fmt: skip

    def sources(self) -> list[str]:
        return list(self._index)

    def pick(self, ready: Mapping[str, int]) -> str | None:
        best: int | None = None
        for i in self._with_items(ready):
            # An idle child comes back at the current virtual time, never behind it.
            self.vtimes[i] = max(self.vtimes[i], self.vtime)
            if best is None or self.vtimes[i] < self.vtimes[best]:
                best = i
        if best is None:
            return None
        return self.children[best].pick(ready)

    def _with_items(self, ready: Mapping[str, int]) -> list[int]:
        """The children with items ready, in their order (the first of equals is picked)."""
        if self._leaves is None:
            return [i for i, child in enumerate(self.children) if child.has_items(ready)]
        leaves = self._leaves
        return sorted(leaves[name] for name, n in ready.items() if n > 0 and name in leaves)

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


DEFAULT_AGING = 50
"""Picks in a row a source with items may be passed over before it is fed regardless."""

DEFAULT_WINDOW_BATCHES = 100
"""How many full batches' worth of items a share is measured over."""


class _Window:
    """A source's items against all items fed, over recent picks it competed in.

    Only picks at which it and another source had items count: an idle spell
    does not lower its share (no catch-up burst when it returns), and being
    fed alone does not raise it (no cap holding it back afterwards).
    """

    __slots__ = ("entries", "mine", "size", "total")

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: deque[tuple[int, int]] = deque()
        self.mine = 0
        self.total = 0

    def add(self, mine: int, total: int) -> None:
        self.entries.append((mine, total))
        self.mine += mine
        self.total += total
        # Drop the oldest picks while the rest still cover the window.
        while self.total - self.entries[0][1] >= self.size:
            old_mine, old_total = self.entries.popleft()
            self.mine -= old_mine
            self.total -= old_total

    @property
    def share(self) -> float | None:
        return self.mine / self.total if self.total else None


class ShareGuard(Node):
    """Per-source share bounds and aging on top of a strategy tree.

    Among the sources with items ready, in this order:

    1. a source at or over its ``max`` share is skipped while a source under
       its own max has items (alone, it is fed: a cap never idles the loop;
       to slow a source down use ``limits.max_rows_per_s``);
    2. aging: a source passed over ``aging`` picks in a row is fed, the
       longest-waiting first, so no source with a backlog starves;
    3. a source under its ``min`` share is fed, the furthest below first;
    4. otherwise the tree below picks among the sources not skipped.

    A share is measured by items over a sliding window of ``window`` items
    (see :class:`_Window`), never by wall-clock time, so decisions are
    deterministic. A forced pick is charged to the tree below too, so ``fair``
    weights the rest accordingly.
    """

    def __init__(
        self,
        inner: Node,
        shares: Mapping[str, ShareConfig] | None = None,
        *,
        window: int = DEFAULT_WINDOW_BATCHES * 1000,
        aging: int | None = DEFAULT_AGING,
    ) -> None:
        if window <= 0 or (aging is not None and aging <= 0):
            raise ValueError(f"window ({window}) and aging ({aging}) must be positive")
        self.inner = inner
        self.shares = dict(shares or {})
        self.aging = aging
        self._order = inner.sources()
        self._rank = {name: i for i, name in enumerate(self._order)}
        # Only bounds that can bind are checked on each pick: the hot path stays short.
        self._maxes = {name: b.max for name, b in self.shares.items() if b.max < 1}
        self._mins = {name: b.min for name, b in self.shares.items() if b.min > 0}
        self._windows = {name: _Window(window) for name in self._order if name in self.shares}
        self._waiting: dict[str, int] = {}  # picks passed over in a row, per ready source
        self._last_ready: dict[str, int] = {}

    def sources(self) -> list[str]:
        return list(self._order)

    def share(self, source: str) -> float | None:
        """``source``'s share of the items fed in its window; None before it competed.

        Measured only for sources with bounds in ``shares``.
        """
        window = self._windows.get(source)
        return None if window is None else window.share

    def pick(self, ready: Mapping[str, int]) -> str | None:
        choice, _, _ = self._decide(ready)
        self._last_ready = {name: n for name, n in ready.items() if n > 0}
        return choice

    def charge(self, source: str, items: int) -> None:
        # Windows and waits move for the sources that were ready at the pick.
        ready = self._last_ready if source in self._last_ready else {source: items}
        if len(ready) > 1 and self._windows:
            for name in ready:
                window = self._windows.get(name)
                if window is not None:
                    window.add(items if name == source else 0, items)
        self._waiting = {
            name: self._waiting.get(name, 0) + 1 for name in ready if name != source
        }
        self._last_ready = {}
        self.inner.charge(source, items)

    def explain(self, ready: Mapping[str, int]) -> str:
        choice, reason, allowed = self._decide(ready)
        notes = [self._note(name, ready, allowed) for name in self._order]
        inner = self.inner.explain({name: ready[name] for name in allowed})
        shown = "; ".join(note for note in notes if note)
        return f"guard[{shown}] {inner}; feeds {choice} ({reason})"

    # -- decisions ---------------------------------------------------------------

    def _decide(self, ready: Mapping[str, int]) -> tuple[str | None, str, list[str]]:
        """The choice, why, and the sources the tree below may choose from."""
        rank = self._rank
        candidates = sorted((name for name, n in ready.items() if n > 0 and name in rank),
                            key=rank.__getitem__)  # fmt: skip
        if not candidates:
            return None, "nothing ready", []
        capped = [name for name in candidates if self._over_max(name)] if self._maxes else []
        allowed = [name for name in candidates if name not in capped] or candidates
        if self.aging is not None and self._waiting:
            aged = [name for name in allowed if self._waiting.get(name, 0) >= self.aging]
            if aged:
                oldest = max(aged, key=lambda name: self._waiting[name])
                return oldest, f"aged, passed over {self._waiting[oldest]} picks in a row", allowed
        starved = [name for name in allowed if self._under_min(name)] if self._mins else []
        if starved:
            worst = min(starved, key=lambda name: (self.share(name) or 0.0) / self._mins[name])
            return worst, f"share {self._shown(worst)} below min {self._mins[worst]:g}", allowed
        if not capped:
            return self.inner.pick(ready), "strategy", allowed
        if allowed is candidates:
            return self.inner.pick(ready), "strategy, only capped sources have items", allowed
        choice = self.inner.pick({name: ready[name] for name in allowed})
        return choice, "strategy, capped sources skipped", allowed

    def _over_max(self, name: str) -> bool:
        bound = self._maxes.get(name)
        if bound is None:
            return False
        share = self._windows[name].share
        return share is not None and share >= bound

    def _under_min(self, name: str) -> bool:
        bound = self._mins.get(name)
        if bound is None:
            return False
        share = self._windows[name].share
        return share is None or share < bound

    def _shown(self, name: str) -> str:
        share = self.share(name)
        return "n/a" if share is None else f"{share:.3f}"

    def _note(self, name: str, ready: Mapping[str, int], allowed: list[str]) -> str:
        bound = self.shares.get(name)
        waiting = self._waiting.get(name, 0)
        if bound is None and not waiting:
            return ""
        parts = []
        if bound is not None:
            parts.append(f"share {self._shown(name)}, min {bound.min:g} max {bound.max:g}")
        if waiting:
            parts.append(f"passed over {waiting}")
        if ready.get(name, 0) > 0 and name not in allowed:
            parts.append("capped")
        elif ready.get(name, 0) <= 0:
            parts.append("nothing ready")
        return f"{name}: {', '.join(parts)}"


def build_node(node: StrategyNode) -> Node:
    """Turn a validated config node into a strategy node."""
    if isinstance(node, str):
        return Leaf(node)
    if isinstance(node, PreferNode):
        return Prefer([build_node(child) for child in node.prefer])
    if isinstance(node.fair, dict):
        return Fair([(Leaf(name), weight) for name, weight in node.fair.items()])
    return Fair([(build_node(entry.node), entry.weight) for entry in node.fair])


def build_strategy(cfg: SluiceConfig, *, aging: int | None = DEFAULT_AGING) -> ShareGuard:
    """The configured strategy (by default a fair share with equal weights), guarded.

    Every source is below the guard, so aging reaches all of them; shares are
    measured over :data:`DEFAULT_WINDOW_BATCHES` full batches.
    """
    window = DEFAULT_WINDOW_BATCHES * cfg.batch.max_items
    if cfg.strategy is None:
        return ShareGuard(Fair([(Leaf(name), 1.0) for name in cfg.sources]),
                          window=window, aging=aging)
    root = build_node(cfg.strategy.root)
    unmentioned = [name for name in cfg.sources if name not in root.sources()]
    if unmentioned:
        # A source left out of the strategy is still migrated, after the others.
        root = Prefer([root, Fair([(Leaf(name), 1.0) for name in unmentioned])])
    return ShareGuard(root, cfg.strategy.shares, window=window, aging=aging)
