"""What sluice may ask of a source database: rows per second and open connections.

A :class:`Budget` is one database's (sources with the same URL share it,
whatever their tables). It holds this daemon's share of the configured
``limits:``, divided by the number of live daemons on the ledger:

- **rows per second** (``max_rows_per_s``): a token bucket. A batch of that
  database is released to the sink only while the bucket is not in debt, and
  its rows are charged when it is released, so over any span the rows
  released are at most the rate times the span plus one batch; a batch is
  kept to :data:`BATCH_SECONDS` of the rate, so that one batch is a small
  part of any ten seconds. The bucket saves nothing while the database is
  idle: a pause is never made up by a burst.
- **source health** (``max_query_latency``): a key query slower than that
  halves the rate (from the limit, or from the rate of the last
  :data:`RECENT` seconds when none is set), at most once per
  :data:`ADJUST_EVERY`; a query back under it adds an eighth of the limit
  back, as often, until the whole is back (AIMD).
- **connections** (``max_connections``, when set): permits. Each of
  sluice's key queries takes one for as long as its connection is open (the
  source's engine then keeps no idle connection), and each batch takes one
  per Spark read partition from its dispatch to its end. Spark's schema
  look-up runs on the batch's own permits, before its reads open.

:class:`Budgets` maps each source to its database's budget and divides the
limits among live daemons (:meth:`Budgets.share`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

import sqlalchemy as sa

from config.models import SluiceConfig, SqlSourceConfig

log = logging.getLogger(__name__)

N = TypeVar("N", int, float)

RECENT = 10.0
"""Seconds of released rows from which the rate of a database without a limit is known."""
ADJUST_EVERY = 1.0
"""Seconds between two steps of the latency feedback."""
LEAST_FACTOR = 1 / 16
"""The latency feedback never takes the rate below this part of it."""

BATCH_SECONDS = 0.5
"""A rate-limited database's batch holds at most this many seconds of its rate."""


class Budget:
    """One source database's limits for this daemon; thread-safe.

    ``rate`` and ``connections`` are the configured totals; this daemon uses
    its share of them (:meth:`share`). None: no bound.
    """

    def __init__(self, label: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.clock = clock
        self.rate: float | None = None
        self.connections: int | None = None
        self.max_latency: float | None = None
        self.factor = 1.0  # the latency feedback's part of the rate
        self._base: float | None = None  # no rate set: the one observed when queries slowed
        self._adjusted_at = float("-inf")
        self._released: deque[tuple[float, int]] = deque()  # (when, rows) over RECENT s
        self._daemons, self._index = 1, 0
        self._tokens = 0.0
        self._filled_at = clock()
        self._held = 0
        self._waiters = 0
        self._not_before = 0.0
        self._cond = threading.Condition()

    # -- the limits in force -------------------------------------------------------------

    def configure(
        self, rate: float | None, connections: int | None, max_latency: float | None = None
    ) -> None:
        """Take new totals (a reload); what is held stays held."""
        with self._cond:
            self._fill()
            self.rate, self.connections, self.max_latency = rate, connections, max_latency
            if max_latency is None:
                self.factor, self._base = 1.0, None
            self._cond.notify_all()

    def share(self, daemons: int, index: int, *, join_wait: float = 0.0) -> None:
        """This daemon is ``index`` of ``daemons`` live ones: take its part of the limits.

        ``join_wait``: open no new connection for that many seconds (this
        daemon just joined: the others shrink their share at their next
        heartbeat, and must have done so before it takes its part).
        """
        with self._cond:
            self._fill()
            if self.connections is not None and daemons > self.connections >= self._daemons:
                log.warning("source database %s: %d daemons share max_connections %d: each "
                            "opens one, %d in all (run fewer daemons or raise the limit)",
                            self.label, daemons, self.connections, daemons)  # fmt: skip
            self._daemons, self._index = max(1, daemons), index
            if join_wait > 0:
                self._not_before = self.clock() + join_wait
            self._cond.notify_all()

    @property
    def rate_share(self) -> float | None:
        """Rows per second this daemon may read (None: no bound), latency feedback included."""
        base = self.rate if self.rate is not None else self._base
        return None if base is None else base * self.factor / self._daemons

    def observe_latency(self, seconds: float) -> None:
        """A key query took ``seconds``: step the rate down or back up (see the module)."""
        if self.max_latency is None:
            return
        with self._cond:
            now = self.clock()
            if now - self._adjusted_at < ADJUST_EVERY:
                return
            self._fill()
            if seconds > self.max_latency:
                if self.rate is None and self._base is None:
                    self._base = self._recent_rate(now)
                    if self._base is None:
                        return  # nothing read lately: no rate to halve
                self.factor = max(LEAST_FACTOR, self.factor / 2)
                log.warning("source database %s: a key query took %.2f s (over %.2f s): "
                            "rate down to %.0f%%", self.label, seconds, self.max_latency,
                            100 * self.factor)  # fmt: skip
            elif self.factor < 1.0:
                self.factor = min(1.0, self.factor + 1 / 8)
                if self.factor == 1.0:
                    self._base = None if self.rate is None else self._base
                    log.info("source database %s: key queries are fast again: whole rate",
                             self.label)  # fmt: skip
            else:
                return
            self._adjusted_at = now

    @property
    def connection_share(self) -> int | None:
        """Connections this daemon may open (None: no bound).

        The configured number split as evenly as whole connections allow,
        the first daemons (by owner name) taking one more. Every daemon
        takes one at least: with more daemons than connections the bound
        cannot hold, which :meth:`share` says.
        """
        if self.connections is None:
            return None
        whole, extra = divmod(self.connections, self._daemons)
        return max(1, whole + (1 if self._index < extra else 0))

    def read_parts(self, wanted: int) -> int:
        """Spark read partitions for one batch: ``wanted``, less to fit the connections.

        With two connections or more, one stays free for the key queries.
        """
        share = self.connection_share
        return wanted if share is None else max(1, min(wanted, share - 1))

    def batch_cap(self) -> int | None:
        """Most rows one batch may hold (None: no bound)."""
        rate = self.rate_share
        return None if rate is None else max(1, int(rate * BATCH_SECONDS))

    # -- batches -------------------------------------------------------------------------

    @property
    def bounds(self) -> bool:
        """Whether this budget bounds anything now (unset limits cost the loop no lock)."""
        return self.rate_share is not None or self.connections is not None or self._not_before > 0

    def admits(self, parts: int) -> bool:
        """Whether a batch reading with ``parts`` connections may be dispatched now."""
        if not self.bounds:
            return True
        with self._cond:
            self._fill()
            return self._rows_ready() and self._connections_free(parts)

    def wait_s(self) -> float:
        """Seconds until the bucket is out of debt (0: now)."""
        if self.rate_share is None:
            return 0.0
        with self._cond:
            self._fill()
            rate = self.rate_share
            if rate is None or self._tokens >= 0:
                return 0.0
            return -self._tokens / rate

    def take(self, rows: int, parts: int) -> None:
        """A batch of ``rows`` reading on ``parts`` connections is dispatched.

        Taken even past the limits: a batch that must run (a retry, a batch
        taken over) goes when it is its turn, and the debt it leaves holds the
        next ones back.
        """
        with self._cond:
            self._fill()
            if self.rate_share is not None:
                self._tokens -= rows
            if self.connections is not None:
                self._held += parts
            if self.max_latency is not None:
                self._released.append((self.clock(), rows))

    def give_back(self, parts: int) -> None:
        """A batch that took ``parts`` connections ended."""
        if self.connections is None and self._held == 0:
            return
        with self._cond:
            self._held = max(0, self._held - parts)
            self._cond.notify_all()

    # -- key queries ---------------------------------------------------------------------

    @contextmanager
    def connection(self, *, timed: bool = True) -> Iterator[None]:
        """Hold one connection's permit while the body runs (it waits for one).

        The body's time, from the permit to its end, is a key query's latency
        (``timed`` False: a query whose time says nothing of the database's
        health, such as a whole backlog's count).
        """
        with self._cond:
            self._waiters += 1
            try:
                while not self._connections_free(1, waiting=True):
                    self._cond.wait(self._pause())
                counted = self.connections is not None
                self._held += 1 if counted else 0
            finally:
                self._waiters -= 1
        started = self.clock()
        try:
            yield
        finally:
            if counted:
                self.give_back(1)
        if timed:
            self.observe_latency(self.clock() - started)

    @property
    def held(self) -> int:
        """Connections this daemon has open, or is about to, to the database."""
        return self._held

    # -- inside the lock -----------------------------------------------------------------

    def _fill(self) -> None:
        now = self.clock()
        rate = self.rate_share
        if rate is not None:
            # Nothing is saved while idle: the bucket fills up to zero.
            self._tokens = min(0.0, self._tokens + rate * (now - self._filled_at))
        else:
            self._tokens = 0.0
        self._filled_at = now

    def _rows_ready(self) -> bool:
        return self.rate_share is None or self._tokens >= 0

    def _recent_rate(self, now: float) -> float | None:
        while self._released and self._released[0][0] < now - RECENT:
            self._released.popleft()
        if not self._released:
            return None
        span = max(1.0, now - self._released[0][0])
        return sum(rows for _, rows in self._released) / span

    def _connections_free(self, parts: int, *, waiting: bool = False) -> bool:
        if self.clock() < self._not_before:
            return False
        share = self.connection_share
        if share is None:
            return True
        if not waiting and self._waiters:
            return False  # a key query waits: it goes first
        return self._held + min(parts, max(share, 1)) <= share

    def _pause(self) -> float:
        # A permit given back wakes the waiters; the joining wait ends on time.
        left = self._not_before - self.clock()
        return max(0.01, min(1.0, left)) if left > 0 else 1.0


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
            rates[url] = _least(rates.get(url), src.limits.max_rows_per_s)
            conns[url] = _least(conns.get(url), bounded_connections(src))
            latencies[url] = _least(latencies.get(url), src.limits.max_query_latency)
        for url, budget in self._by_url.items():
            budget.configure(rates.get(url), conns.get(url), latencies.get(url))
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

        None: its reads are not bounded (SQS, or no ``max_connections`` set),
        and nothing is to be given back.
        """
        budget = self._of.get(source)
        if budget is None:
            return None
        parts = budget.read_parts(self._parts[source])
        budget.take(rows, parts)
        # Connections unbounded: the batch reads as it always did.
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
        for budget in self._by_url.values():
            budget.share(len(ordered), index, join_wait=join_wait)

    def limited(self) -> Mapping[str, Budget]:
        """Budgets that bound something, by database (passwords hidden)."""
        return {
            url: b for url, b in self._by_url.items()
            if b.rate is not None or b.connections is not None or b.max_latency is not None
        }  # fmt: skip

    def wait_s(self) -> float | None:
        """Seconds until some rate-limited database may take a batch again (None: none waits)."""
        waits = [w for b in self._by_url.values() if (w := b.wait_s()) > 0]
        return min(waits) if waits else None


def database_of(src: SqlSourceConfig) -> str:
    """The database a source reads, as its budget is known (the URL, password hidden)."""
    return sa.make_url(src.url).render_as_string(hide_password=True)


def bounded_connections(src: SqlSourceConfig) -> int | None:
    """``max_connections`` when the config sets it: it then bounds Spark's reads too.

    Unset, the default bounds sluice's own key-query pool only (as before
    limits held for the whole database).
    """
    return src.limits.max_connections if "max_connections" in src.limits.model_fields_set else None


def _least(a: N | None, b: N | None) -> N | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
