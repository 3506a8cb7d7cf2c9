"""The ``strategy:`` section: a tree of ``prefer`` and ``fair`` nodes over source names."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from config.base import Model


class ShareConfig(Model):
    """Bounds on a source's share of the items fed."""

    min: float = Field(default=0.0, ge=0, le=1)
    """The least share (0 to 1) of the items fed, over a recent window, that the source gets
    while others compete with it."""
    max: float = Field(default=1.0, gt=0, le=1)
    """The most share (0 to 1) of the items fed that the source may take."""

    @model_validator(mode="after")
    def _min_below_max(self) -> ShareConfig:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class FairEntry(Model):
    """A weighted child of ``fair`` that is itself a strategy."""

    weight: float = Field(default=1.0, gt=0)
    """The child's weight in the fair share."""
    node: StrategyNode
    """The child: a source name, or a ``prefer`` or ``fair`` node."""


class PreferNode(Model):
    """Ordered fallback: the first child with items buffered wins."""

    prefer: list[StrategyNode] = Field(min_length=1)
    """Children in order of preference: a source name, or a ``prefer`` or ``fair`` node."""


class FairNode(Model):
    """Weighted fair share between children (deficit round robin on items).

    Written ``fair: {orders: 2, customers: 1}`` for sources, or as a list of
    ``{node: <strategy>, weight: w}`` entries to nest strategies.
    """

    fair: dict[str, Annotated[float, Field(gt=0)]] | list[FairEntry] = Field(min_length=1)
    """Source name → weight, or a list of ``{node: …, weight: w}`` entries."""


StrategyNode = str | PreferNode | FairNode
"""A source name, or a ``prefer`` or ``fair`` node over further nodes."""
FairEntry.model_rebuild()
PreferNode.model_rebuild()


class StrategyConfig(Model):
    """The top of the strategy tree, with optional per-source share bounds."""

    prefer: list[StrategyNode] | None = Field(default=None, min_length=1)
    """Ordered fallback at the top: the first child with items buffered wins (one of
    ``prefer`` and ``fair``)."""
    fair: dict[str, Annotated[float, Field(gt=0)]] | list[FairEntry] | None = Field(
        default=None, min_length=1
    )
    """Weighted fair share at the top: ``{orders: 2, customers: 1}``, or a list of
    ``{node: …, weight: w}`` entries (one of ``prefer`` and ``fair``)."""
    shares: dict[str, ShareConfig] = {}
    """Per source, bounds on its share of the items fed."""

    @model_validator(mode="after")
    def _one_root(self) -> StrategyConfig:
        if (self.prefer is None) == (self.fair is None):
            raise ValueError("strategy needs exactly one of prefer: or fair:")
        return self

    @property
    def root(self) -> PreferNode | FairNode:
        """The root node of the tree."""
        if self.prefer is not None:
            return PreferNode(prefer=self.prefer)
        assert self.fair is not None
        return FairNode(fair=self.fair)


def strategy_sources(node: StrategyNode) -> list[str]:
    """Every source name a strategy (sub)tree mentions, in order."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, PreferNode):
        return [name for child in node.prefer for name in strategy_sources(child)]
    if isinstance(node.fair, dict):
        return list(node.fair)
    return [name for entry in node.fair for name in strategy_sources(entry.node)]


def strategy_refs(
    node: StrategyConfig | StrategyNode, loc: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every source name a strategy (sub)tree mentions, with its key path in the YAML."""
    if isinstance(node, str):
        return [(loc, node)]
    if isinstance(node, StrategyConfig | PreferNode) and node.prefer is not None:
        return [
            ref
            for i, child in enumerate(node.prefer)
            for ref in strategy_refs(child, (*loc, "prefer", i))
        ]
    fair = node.fair if isinstance(node, StrategyConfig | FairNode) else None
    if isinstance(fair, dict):
        return [((*loc, "fair", name), name) for name in fair]
    return [
        ref
        for i, entry in enumerate(fair or [])
        for ref in strategy_refs(entry.node, (*loc, "fair", i, "node"))
    ]
