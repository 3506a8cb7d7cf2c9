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
- **connections** (``max_connections``): permits. Each of sluice's key
  queries takes one for as long as its connection is open (the source's
  engine keeps no idle connection), and each batch takes one per Spark read
  partition from its dispatch to its end (a load's task reads its small
  batches on one connection, closed when the task ends). Spark's schema look-up runs on
  the batch's own permits, before its reads open. Key queries and batches
  draw on two parts of the share (:data:`KEY_QUERIES` for the key queries,
  the rest for the batches), so that neither starves the other: a database
  of hundreds of tables has a key query waiting at almost every moment.
  Unset, the default (:data:`config.sources.DATABASE_CONNECTIONS`) counts
  the key queries alone, and keeps each batch's reads to its import's part
  of the rest (``spark.max_concurrent_imports`` run at once): bounded as
  well, without holding back batches that wait in the sink for a thread.

:class:`~sources.budgets.Budgets` maps each source to its database's budget and
divides the limits among live daemons.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

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

KEY_QUERIES = 2
"""The most connections of a database's share its key queries hold at once (a share of
eight or more; one of a smaller share): the rest of the share is the batches' alone."""


class LatencyFeedback:
    """The AIMD factor of ``max_query_latency`` (see the module), under its budget's lock."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.factor = 1.0  # the part of the rate in force
        self.base: float | None = None  # no rate set: the one observed when queries slowed
        self._adjusted_at = float("-inf")
        self._released: deque[tuple[float, int]] = deque()  # (when, rows) over RECENT s

    def reset(self) -> None:
        """No feedback configured: the whole rate."""
        self.factor, self.base = 1.0, None

    def released(self, now: float, rows: int) -> None:
        """``rows`` were released at ``now`` (the rate read lately, for a database without one)."""
        self._released.append((now, rows))

    def observe(self, seconds: float, now: float, max_latency: float, rate: float | None) -> None:
        """A key query took ``seconds``: halve the factor, or win an eighth back."""
        if now - self._adjusted_at < ADJUST_EVERY:
            return
        if seconds > max_latency:
            if rate is None and self.base is None:
                self.base = self._recent_rate(now)
                if self.base is None:
                    return  # nothing read lately: no rate to halve
            self.factor = max(LEAST_FACTOR, self.factor / 2)
            log.warning("source database %s: a key query took %.2f s (over %.2f s): "
                        "rate down to %.0f%%", self.label, seconds, max_latency,
                        100 * self.factor)  # fmt: skip
        elif self.factor < 1.0:
            self.factor = min(1.0, self.factor + 1 / 8)
            if self.factor == 1.0:
                self.base = None if rate is None else self.base
                log.info("source database %s: key queries are fast again: whole rate",
                         self.label)  # fmt: skip
        else:
            return
        self._adjusted_at = now

    def _recent_rate(self, now: float) -> float | None:
        while self._released and self._released[0][0] < now - RECENT:
            self._released.popleft()
        if not self._released:
            return None
        span = max(1.0, now - self._released[0][0])
        return sum(rows for _, rows in self._released) / span


class Turns:
    """Key queries per owner (a source) waiting and holding a permit: whose turn it is."""

    def __init__(self) -> None:
        self.waiting: defaultdict[str, int] = defaultdict(int)
        self.holding: defaultdict[str, int] = defaultdict(int)

    def wait(
        self, cond: threading.Condition, owner: str, free: Callable[[], bool],
        pause: Callable[[], float], *, bounded: bool,
    ) -> None:  # fmt: skip
        """Under ``cond``: wait until a permit is ``free()`` and it is ``owner``'s turn (each
        wait at most ``pause()`` s); then count it as ``owner``'s."""
        self.waiting[owner] += 1
        try:
            while not (ready := free()) or not self.fair_for(owner, bounded=bounded):
                if ready:
                    cond.notify()  # not this one's turn: pass the wake-up on
                cond.wait(pause())
            self.holding[owner] += 1
        finally:
            self.waiting[owner] -= 1

    def fair_for(self, owner: str, *, bounded: bool) -> bool:
        """Whether ``owner`` may take a free permit: no other owner waits that holds fewer
        (among the waiters one always may: one of those holding the fewest). A source
        whose slow queries (its refill's and its backlog count's) hold a permit takes no
        second one while another source waits. Unbounded: any may."""
        mine = self.holding[owner]
        if not mine or not bounded:
            return True
        return not any(waits and self.holding[other] < mine
                       for other, waits in self.waiting.items() if other != owner)  # fmt: skip


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
        self.connections_set = False  # the config's own max_connections, not its default
        self.imports = 1  # imports a daemon runs at once (spark.max_concurrent_imports)
        self.max_latency: float | None = None
        self.feedback = LatencyFeedback(label)
        self._daemons, self._index = 1, 0
        self._tokens = 0.0
        self._filled_at = clock()
        self._held = 0
        self._keys_held = 0  # of _held: the key queries'
        self._waiters = 0
        self._turns = Turns()  # key queries per source, waiting and holding
        self._not_before = 0.0
        self._cond = threading.Condition()

    # -- the limits in force -------------------------------------------------------------

    def configure(
        self, rate: float | None, connections: int | None, max_latency: float | None = None,
        *, connections_set: bool = True, imports: int = 1,
    ) -> None:  # fmt: skip
        """Take new totals (a reload); what is held stays held.

        ``connections_set`` False: ``connections`` is the default's (see the
        module), and ``imports`` the imports that run at once.
        """
        with self._cond:
            self._fill()
            self.rate, self.connections, self.max_latency = rate, connections, max_latency
            self.connections_set = connections is not None and connections_set
            self.imports = max(1, imports)
            if max_latency is None:
                self.feedback.reset()
            self._cond.notify_all()

    def share(self, daemons: int, index: int, *, join_wait: float = 0.0) -> None:
        """This daemon is ``index`` of ``daemons`` live ones: take its part of the limits.
        ``join_wait``: open no new connection for that many seconds (this daemon just joined:
        the others shrink their share at their next heartbeat, and must have done so first)."""
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
        base = self.rate if self.rate is not None else self.feedback.base
        return None if base is None else base * self.feedback.factor / self._daemons

    def observe_latency(self, seconds: float) -> None:
        """A key query took ``seconds``: step the rate down or back up (see the module)."""
        if self.max_latency is None:
            return
        with self._cond:
            self._fill()
            self.feedback.observe(seconds, self.clock(), self.max_latency, self.rate)

    @property
    def factor(self) -> float:
        """The latency feedback's part of the rate (1: the whole)."""
        return self.feedback.factor

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

        With two connections or more, the key queries' part stays free. The
        default connections (none set) are not counted batch by batch: each
        of the ``imports`` a daemon runs at once reads on its part of the rest.
        """
        share = self.connection_share
        if share is None:
            return wanted
        room = share - self._keys_part(share)
        if not self.connections_set:
            room //= self.imports
        return max(1, min(wanted, room))

    def batch_cap(self) -> int | None:
        """Most rows one batch may hold (None: no bound)."""
        rate = self.rate_share
        return None if rate is None else max(1, int(rate * BATCH_SECONDS))

    # -- batches -------------------------------------------------------------------------

    @property
    def bounds(self) -> bool:
        """Whether this budget bounds anything now (unset limits cost the loop no lock)."""
        return self.rate_share is not None or self.connections_set or self._not_before > 0

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
            if self.connections_set:
                self._held += parts
            if self.max_latency is not None:
                self.feedback.released(self.clock(), rows)

    def give_back(self, parts: int) -> None:
        """A batch that took ``parts`` connections ended."""
        if self._held == self._keys_held:
            return  # none counted (the default connections count key queries only)
        with self._cond:
            self._held = max(self._keys_held, self._held - parts)
            self._cond.notify(parts)  # only key queries wait here: one each permit

    # -- key queries ---------------------------------------------------------------------

    @contextmanager
    def connection(self, *, timed: bool = True, owner: str = "") -> Iterator[None]:
        """Hold one connection's permit while the body runs (it waits for one).

        The body's time, from the permit to its end, is a key query's latency
        (``timed`` False: a query whose time says nothing of the database's
        health, such as a whole backlog's count). Fair between ``owner``
        sources (:class:`Turns`).
        """
        with self._cond:
            self._waiters += 1
            try:
                self._turns.wait(self._cond, owner, self._key_connection_free, self._pause,
                                 bounded=self.connection_share is not None)  # fmt: skip
                counted = self.connections is not None
                self._held += 1 if counted else 0
                self._keys_held += 1 if counted else 0
            finally:
                self._waiters -= 1
        started = self.clock()
        try:
            yield
        finally:
            with self._cond:
                self._turns.holding[owner] -= 1
                if counted:
                    self._keys_held -= 1
                    self._held -= 1
                    self._cond.notify()  # one waiter: all of 1,000 tables' was 40k switches/s
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

    @staticmethod
    def _keys_part(share: int) -> int:
        """Connections of ``share`` kept for the key queries (0: one share for both)."""
        return 0 if share < 2 else max(1, min(KEY_QUERIES, share // 4))

    def _connections_free(self, parts: int) -> bool:
        """Whether a batch reading on ``parts`` connections fits the batches' part."""
        if self.clock() < self._not_before:
            return False
        share = self.connection_share
        if share is None or not self.connections_set:
            return True
        keys = self._keys_part(share)
        if not keys and self._waiters:
            return False  # a single connection: a waiting key query goes first
        batches_held = self._held - self._keys_held
        return batches_held + min(parts, share - keys) <= share - keys

    def _key_connection_free(self) -> bool:
        """Whether a key query may open a connection: within the keys' part (and a set share)."""
        if self.clock() < self._not_before:
            return False
        share = self.connection_share
        if share is None:
            return True
        keys = self._keys_part(share) or 1
        return self._keys_held < keys and (not self.connections_set or self._held < share)

    def _pause(self) -> float:
        # A permit given back wakes the waiters; the joining wait ends on time.
        left = self._not_before - self.clock()
        return max(0.01, min(1.0, left)) if left > 0 else 1.0
