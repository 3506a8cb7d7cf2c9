"""Keys of a SQL table, read in key order with SQLAlchemy Core.

Only the key columns are read: the Spark import job re-reads the rows through
JDBC. An item's ``key`` is always a tuple of the key column values (a 1-tuple
for a simple key). The queries are :class:`~sources.keyqueries.KeyQueries`';
the engine and its errors, :class:`~sources.sqldb.SourceDatabase`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import cast

import sqlalchemy as sa
from cachetools import LRUCache

from config.errors import SourceError
from config.models import SqlSourceConfig
from sources.abc import Item, LimitedSource
from sources.budget import Budget
from sources.keyqueries import KeyQueries, KeyTuple
from sources.resume import ReadMark
from sources.sqldb import SourceDatabase

log = logging.getLogger("sluice.daemon")

ESTIMATE_ABOVE = 100_000
"""Backlogs of more rows than this are the database's estimate, where it has one
(:meth:`SqlSource.backlog`); fewer are counted."""


PLAN_SECONDS = 0.5
"""A keyset plan hands over the ranges it has after this long (:meth:`SqlSource._plan`)."""

_UNKNOWN = object()


def _nothing_done(keys: Sequence[KeyTuple]) -> set[KeyTuple]:
    return set()


class SqlSource(LimitedSource):
    """A table's keys in key order: ``keyset``, ``sweep`` or ``incremental``.

    - *keyset*: ranges of keys, not keys: each call plans ranges of at most
      ``range_rows`` rows past ``position`` (the database finds the range's
      last key and counts its rows; no key travels), ``limit`` rows in all.
      An item is a range (``key`` its last key, ``rows`` its size); it never
      returns a range twice. ``position`` advances to the last range's end;
      ``exhausted`` when a range came out shorter than asked.
    - *sweep*: re-reads the ``where:`` rows page by page, from the start again
      after the end, handing out keys neither handed out (not yet acked or
      released) nor done (``is_done``, behind an LRU cache of done keys).
      ``exhausted`` after a full pass found nothing new.
    - *incremental*: ``(cursor, key) > position``; an item's ``version`` is its
      cursor value, so a row whose cursor moves forward comes back (rows with
      a NULL cursor are never read).

    ``next_batch`` blocks on the database and raises :class:`SourceError`:
    transient when the database could not be reached or gave up on the query
    (timeout, deadlock), not transient when it refused the query itself (see
    :func:`is_transient`). ``ack``/``release`` may be called from another
    thread than ``next_batch``.
    """

    def __init__(
        self,
        name: str,
        cfg: SqlSourceConfig,
        *,
        after: KeyTuple | None = None,
        engine: sa.Engine | None = None,
        is_done: Callable[[Sequence[KeyTuple]], set[KeyTuple]] = _nothing_done,
        done_cache_size: int = 100_000,
        range_rows: int | None = None, range_bytes: int | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.weighs_rows = cfg.mode == "keyset"
        # Rows per planned range (keyset): the page size, unless the daemon
        # needs smaller ranges (a batch, or the gate's room, is smaller).
        self.range_rows = max(1, range_rows or cfg.page_size)
        self.range_bytes = range_bytes  # see _widest_range
        # Keyset: the database's statistics count fewer rows than a range holds (a schema's
        # small tables): a range's end is found by counting what is left, one query.
        self.few_rows = False
        self._db = SourceDatabase(name, cfg, engine, budget)
        self._queries = KeyQueries(cfg, self._db)
        self._position = after
        self._exhausted = False
        self._lock = threading.Lock()  # sweep state: ack/release come from other threads
        self._handed: set[KeyTuple] = set()
        self._done: LRUCache[KeyTuple, bool] = LRUCache(maxsize=done_cache_size)
        self._is_done = is_done
        self._found_in_pass = False
        self._reads = 0  # incremental: rows read, the read marks' sequence
        self._row_bytes: object = _UNKNOWN
        self.answered = True  # False: its database did not answer at start (checked first)

    @property
    def position(self) -> KeyTuple | None:
        """The last key read (``(cursor, *key)`` in incremental mode); None at the start."""
        return self._position

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    @property
    def engine(self) -> sa.Engine:
        """The source database's engine: the one given, or one this source made."""
        return self._db.engine

    def reset(self, after: KeyTuple | None) -> None:
        """Continue after ``after`` (None: from the start), e.g. after a lost claim race."""
        self._position = after
        self._exhausted = False

    def check(self) -> None:
        """Run the query with ``LIMIT 0``: raise if it cannot run.

        :class:`SourceError` (transient) when the database cannot be reached;
        :class:`ConfigError` when it answers but refuses the query (missing
        table or column, a failing ``where:``), naming source, table and cause.
        """
        self._db.check(self._queries.select(None, 0))

    def backlog(self) -> int:
        """Rows still to read, counted without reading them or writing anything.

        Keyset and incremental: rows past :attr:`position` (that match
        ``where:``). Sweep: every row that matches ``where:`` (a sweep reads
        them all again; which are done only the ledger knows). Past
        :data:`ESTIMATE_ABOVE` rows, the database's estimate where it has one
        (PostgreSQL, no ``where:``): a count of a big table would read it
        all, each time, past every limit set on the database. Blocks on the
        database; raises :class:`SourceError` like :meth:`next_batch`.
        """
        after = None if self.cfg.mode == "sweep" else self._position
        if self.cfg.where is None:
            guess = self._queries.estimate(after)
            if guess is not None and guess >= ESTIMATE_ABOVE:
                return guess
        return self._queries.count(after)

    def row_bytes(self, ask: bool = True) -> float | None:
        """The table's average row width as text (:meth:`KeyQueries.row_bytes`), asked once.

        None for an empty table, and (``ask`` False) until it was asked. Blocks on the
        database; raises :class:`SourceError` like :meth:`next_batch`."""
        if self._row_bytes is _UNKNOWN and ask:
            self._row_bytes = self._queries.row_bytes()
        return None if self._row_bytes is _UNKNOWN else cast("float | None", self._row_bytes)

    def rows_between(self, after: KeyTuple | None, last: KeyTuple) -> int:
        """Rows past ``after`` (None: from the start) up to ``last``, in the database's key order.

        The database compares the keys, in the key's own collation (Python
        orders text otherwise: 'B' < 'a'); 0 when ``last`` is not past
        ``after``. Keyset mode. One count over the key's index; blocks on the
        database and raises :class:`SourceError` like :meth:`next_batch`.
        """
        return self._queries.count(after, last)

    def next_batch(self, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        if not self.answered:
            self.check()
            self.answered = True
        if self.cfg.mode == "sweep":
            return self._sweep(limit)
        if self.cfg.mode == "keyset":
            return self._plan(limit)
        return self._next_changes(limit)

    def ack(self, items: Sequence[Item]) -> None:
        if self.cfg.mode == "sweep":
            with self._lock:
                keys = [cast(KeyTuple, item.key) for item in items]
                self._handed.difference_update(keys)
                self._done.update(dict.fromkeys(keys, True))

    def release(self, items: Sequence[Item]) -> None:
        if self.cfg.mode == "sweep":
            with self._lock:
                self._handed.difference_update(item.key for item in items)

    def close(self) -> None:
        """Dispose of the engine's connections (only an engine this source created)."""
        self._db.close()

    # -- keyset ---------------------------------------------------------------

    def _plan(self, limit: int) -> list[Item]:
        """Adjacent ranges past :attr:`position`, at most ``limit`` rows in all.

        Whole ranges only, but for a first one that does not fit: a range cut
        to the room left would be fed as a small batch of its own. After
        :data:`PLAN_SECONDS`, the ranges planned so far: a buffer's first
        refill asks for millions of rows (each range's end is found by walking
        the key's index: 8 M rows of InnoDB took 4.8 s), and the loop feeds
        nothing until the refill hands its ranges over; the buffer asks again
        at once for the rest.
        """
        items: list[Item] = []
        left = limit
        until = time.monotonic() + PLAN_SECONDS
        most = _widest_range(self)
        while left > 0 and not (items and left < most):
            if items and time.monotonic() > until:
                self._exhausted = False  # full ranges so far: the buffer asks again at once
                return items
            size = min(most, left)
            end = self._queries.range_end(self._position, size, few=self.few_rows)
            if end is None:
                self._exhausted = True
                return items
            last, rows = end
            items.append(Item(self.name, last, rows=rows))
            self._position = last
            left -= rows
            if rows < size:
                self._exhausted = True
                return items
        # Every range came out full: whether a row is left past the last is
        # one index probe, and knowing it now lets the loop share the last
        # rows among parallel imports (not only on the next, empty, refill).
        self._exhausted = not self._queries.read(self._position, 1)
        return items

    # -- incremental ---------------------------------------------------------

    def _next_changes(self, limit: int) -> list[Item]:
        """Rows past :attr:`position`, each with its cursor as version and a read mark."""
        rows = self._queries.read(self._position, limit)
        self._exhausted = len(rows) < limit
        items: list[Item] = []
        before, seq = self._position, self._reads
        for row in rows:
            mark = ReadMark(seq, before, row)
            items.append(Item(self.name, row[1:], version=str(row[0]), handle=mark))
            before, seq = row, seq + 1
        self._position, self._reads = before, seq
        return items

    # -- sweep ---------------------------------------------------------------

    def _sweep(self, limit: int) -> list[Item]:
        out: list[KeyTuple] = []
        wrapped = False
        page_size = self.cfg.page_size
        while len(out) < limit:
            page = self._queries.read(self._position, page_size)
            new = self._not_taken(page)
            want = limit - len(out)
            if len(new) > want:
                # Stop right after the last key taken: the rest come next call.
                new = new[:want]
                self._position = new[-1]
            elif page:
                self._position = page[-1]
            out.extend(new)
            if new:
                self._found_in_pass = True
            if len(page) < page_size and len(out) < limit:
                # End of a pass. A pass that found nothing new means drained;
                # either way the next read starts from the beginning again.
                self._exhausted = not self._found_in_pass
                self._position = None
                self._found_in_pass = False
                if self._exhausted or wrapped or out:
                    break
                wrapped = True  # one more pass in this call, at most
        if out:
            self._exhausted = False
            with self._lock:
                self._handed.update(out)
        return [Item(self.name, key) for key in out]

    def _not_taken(self, page: list[KeyTuple]) -> list[KeyTuple]:
        with self._lock:
            candidates = [k for k in page if k not in self._handed and k not in self._done]
        if not candidates:
            return []
        done = self._db.guard(lambda: self._is_done(candidates), connects=False)
        if done:
            with self._lock:
                self._done.update(dict.fromkeys(done, True))
        return [k for k in candidates if k not in done]


def _widest_range(source: SqlSource) -> int:
    """The most rows of a keyset range ``source`` plans: its ``range_rows``, or, where it
    has ``range_bytes`` (ranges of sluice's size), that many bytes (as text) of rows of the
    table's width, asked at its first plan, never fewer than a page: the ranges planned
    before the loop sizes batches by the rows' width are then no bigger than those
    batches."""
    if source.range_bytes is None or source.few_rows:
        return source.range_rows
    width = source.row_bytes()
    if not width:
        return source.range_rows
    return min(source.range_rows, max(source.cfg.page_size, int(source.range_bytes / width)))


def check_together(sources: Sequence[SqlSource]) -> None:
    """:meth:`SqlSource.check` ``sources``, together where their database allows.

    Their ``LIMIT 0`` queries go to each database as one script (1,000 tables
    ~0.1 s, where one ``UNION ALL`` of them took the server ~0.7 s to plan and
    one by one ~1.4 s, each a connection's turn and four round trips); where the
    driver takes one statement at a time, as one ``UNION ALL``. Where that
    fails, each source is checked on its own, and the first that fails raises
    its own error.
    """
    by_url: dict[str, list[SqlSource]] = {}
    for source in sources:
        by_url.setdefault(source.cfg.url, []).append(source)
    for group in by_url.values():
        if len(group) > 1:
            queries = [s._queries.select(None, 0) for s in group]
            if group[0]._db.passes(queries):
                continue
        for source in group:
            try:
                source.check()
            except SourceError as error:
                if not error.transient:
                    raise
                source.answered = False  # asked again before its first read
                log.warning("%s: it starts empty and is asked again in the background", error)
