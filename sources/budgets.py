"""Every SQL source's :class:`~sources.budget.Budget`: one per database URL, shared by its
sources (the tables of a ``tables:`` source among them), divided among live daemons."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import sqlalchemy as sa

from config.models import SluiceConfig, SqlSourceConfig
from sources.budget import Budget

N = TypeVar("N", int, float)


class Budgets:
    """Every SQL source's budget: one per database URL, shared by its sources."""

    def __init__(self, cfg: SluiceConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._by_url: dict[str, Budget] = {}
        self._of: dict[str, Budget] = {}
        self._parts: dict[str, int] = {}  # each source's read.num_partitions
        self.reconfigure(cfg)

    def reconfigure(self, cfg: SluiceConfig) -> None:
        """Take the limits of ``cfg`` (start and reload); a database keeps its bucket."""
        rates: dict[str, float | None] = {}
        conns: dict[str, int | None] = {}
        latencies: dict[str, float | None] = {}
        chosen: dict[str, bool] = {}  # a source of the database sets max_connections
        of: dict[str, Budget] = {}
        for name, src in cfg.sources.items():
            if not isinstance(src, SqlSourceConfig):
                continue
            url = database_of(src)
            budget = self._by_url.get(url) or Budget(url, clock=self._clock)
            self._by_url[url] = budget
            of[name] = budget
            self._parts[name] = src.read.num_partitions
            # Sources of one database may each set limits: the least holds.
            rates[url] = least(rates.get(url), src.limits.max_rows_per_s)
            conns[url] = least(conns.get(url), src.limits.max_connections)
            chosen[url] = chosen.get(url, False) or "max_connections" in src.limits.model_fields_set
            latencies[url] = least(latencies.get(url), src.limits.max_query_latency)
        for url, budget in self._by_url.items():
            budget.configure(rates.get(url), conns.get(url), latencies.get(url),
                             connections_set=chosen.get(url, False),
                             imports=cfg.spark.max_concurrent_imports)  # fmt: skip
        self._of = of

    def of(self, source: str) -> Budget | None:
        """The budget of ``source``'s database (None: not a SQL source)."""
        return self._of.get(source)

    def admits(self, source: str) -> bool:
        """Whether a batch of ``source`` may be dispatched now."""
        budget = self._of.get(source)
        return budget is None or budget.admits(budget.read_parts(self._parts[source]))

    def batch_cap(self, source: str) -> int | None:
        """Most rows a batch of ``source`` may hold (None: no bound)."""
        budget = self._of.get(source)
        return None if budget is None else budget.batch_cap()

    def take(self, source: str, rows: int) -> int | None:
        """A batch of ``source`` with ``rows`` rows is dispatched: its read partitions.

        None: not a SQL source, nothing to give back.
        """
        budget = self._of.get(source)
        if budget is None:
            return None
        parts = budget.read_parts(self._parts[source])
        budget.take(rows, parts)
        return None if budget.connection_share is None else parts

    def give_back(self, source: str, parts: int) -> None:
        """A batch of ``source`` that read on ``parts`` connections ended."""
        budget = self._of.get(source)
        if budget is not None:
            budget.give_back(parts)

    def share(self, live: list[str], me: str, *, join_wait: float = 0.0) -> None:
        """Divide every budget among the ``live`` daemons (owner names), ``me`` among them."""
        ordered = sorted(set(live) | {me})
        index = ordered.index(me)
        for budget in self.limited().values():
            budget.share(len(ordered), index, join_wait=join_wait)

    def limited(self) -> Mapping[str, Budget]:
        """Budgets whose limits the config sets, by database (passwords hidden).

        Daemons divide these among them (a joining one waiting for the
        others' smaller shares), and a verify takes its share of them. Each
        daemon keeps the whole of a default one (``DATABASE_CONNECTIONS``):
        a few daemons' still leave a stock server most of its connections,
        and half of it would leave a daemon one key query at a time.
        """
        return {
            url: b for url, b in self._by_url.items()
            if b.rate is not None or b.connections_set or b.max_latency is not None
        }  # fmt: skip

    def wait_s(self) -> float | None:
        """Seconds until some rate-limited database may take a batch again (None: none waits)."""
        waits = [w for b in self._by_url.values() if (w := b.wait_s()) > 0]
        return min(waits) if waits else None


def database_of(src: SqlSourceConfig) -> str:
    """The database a source reads, as its budget is known (the URL, password hidden)."""
    return _database(src.url)


@functools.lru_cache(maxsize=256)
def _database(url: str) -> str:
    # 1,000 tables of one database are one URL: parsed once, not on every look.
    return sa.make_url(url).render_as_string(hide_password=True)


def least(a: N | None, b: N | None) -> N | None:
    """The lower of two limits, None being none: what holds where several sources set one."""
    if a is None:
        return b
    return a if b is None else min(a, b)
