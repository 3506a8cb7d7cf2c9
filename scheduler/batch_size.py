"""Adaptive batch size: a source's batches sized so that an import takes ``batch.target_latency``.

A source's size moves between ``batch.min_items`` and ``batch.max_items``,
on its own, as its batches end (:meth:`BatchSizer.observe`, on the sink's
threads):

- a batch slower than the target (by more than :data:`SLACK`): a
  multiplicative decrease, to the size that would have taken the target at
  that batch's pace, but not below half of that batch, so that one stall (a
  lock, a vacuum) costs a halving, however many batches it caught in flight,
  and only a lasting slowdown the whole way;
- a batch that failed with an error a retry may help (a timeout, a lost
  connection: perhaps the target's load): half of that batch;
- a batch faster than the target: an additive increase (a sixteenth of
  ``max_items``, at least ``min_items``), never past the size that would
  have taken the target at its pace, so that the size settles there instead
  of overshooting and falling back;
- within the slack: unchanged, so that the size rests once it is right.

The pace is measured on the batch that ended (its rows and seconds), not on
the current size: batches planned before a change end after it, and a slow
report of an old big batch must not cut a size already cut for it. Each
step sets the size to what the last batch says would fit, so the size settles
where an import takes the target, also when part of an import's time does not
grow with its rows.

Which seconds: the batch's own import, never its wait in the sink's queue
(a backlog says nothing about the target). A batch loaded straight in by a
Spark task of its own is timed by that task, also when several batches of
a source share one Spark job (``config.sizes.JOB_GROUP``): the job's time
would be several batches' work on the executors' cores, and would grow as
batches shrink (more of them wait, so more share a job); any other import
by its run on the driver (``ImportResult.seconds``).

Without ``batch.target_latency`` every size is ``max_items`` and
observations change nothing: batches are as they always were.

A keyset source plans its ranges of at most its size (:func:`plan_ranges`);
ranges it buffered before the size fell keep theirs, and are fed one to a
batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from queue import Empty, SimpleQueue

import sqlalchemy as sa

from config.errors import ConfigError, SourceError
from config.models import BatchConfig, SluiceConfig, SqlSourceConfig
from config.settings import BATCH_BYTES, KEY_BATCH, KEY_RANGE
from config.sources import walks_ranges
from sources.budget import BATCH_SECONDS
from sources.budgets import database_of
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from spark_jobs.engines import engine_of

# The loop's logger: a source's batch size is the loop's business.
log = logging.getLogger("sluice.loop")

SLACK = 1.2
"""An import within this factor of the target (either way) leaves the size as it is."""

NOTEWORTHY = 1.5
"""A size logged once it moved by this factor from the size last logged."""


class BatchSizer:
    """The batch size of each source; thread-safe.

    :meth:`size` never blocks (the loop's thread reads it every tick; status
    and metrics from theirs). ``on_change(source, size)`` is called after a
    source's size changed, outside the lock, on the thread that changed it.
    ``largest``: each source's largest batch where it is not ``batch.max_items``
    (a config that leaves it out: see :func:`largest_batches`).
    """

    def __init__(
        self, batch: BatchConfig, *, on_change: Callable[[str, int], None] | None = None,
        largest: Mapping[str, int] | None = None,
    ) -> None:  # fmt: skip
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}  # sources whose size differs from their largest
        self._largest: dict[str, int] = {}
        self._logged: dict[str, int] = {}
        self.on_change = on_change
        self.target: float | None = None
        self.least = self.most = batch.max_items
        self.configure(batch, largest)

    @property
    def adaptive(self) -> bool:
        """Whether sizes adapt (``batch.target_latency`` is set)."""
        return self.target is not None

    def configure(self, batch: BatchConfig, largest: Mapping[str, int] | None = None) -> None:
        """Take a new ``batch`` config (a reload): sizes kept, within the new bounds."""
        with self._lock:
            before = {s: self.size(s) for s in self._sizes.keys() | self._largest.keys()}
            self.target = batch.target_latency
            self.least, self.most = batch.min_items, batch.max_items
            self._largest = {s: max(1, min(n, self.most)) for s, n in (largest or {}).items()}
            if self.target is None:
                self._sizes.clear()
            else:
                self._sizes = {s: self._within(s, size) for s, size in self._sizes.items()}
            changed = {s: self.size(s) for s in before if self.size(s) != before[s]}
        for source, size in changed.items():
            self._changed(source, size)

    def largest(self, source: str) -> int:
        """The most rows a batch of ``source`` may ever hold: ``batch.max_items``, or its own."""
        return self._largest.get(source, self.most)

    def size(self, source: str) -> int:
        """The most rows ``source``'s next batch may hold (:meth:`largest` until it adapts)."""
        return self._sizes.get(source, self.largest(source))

    def observe(self, source: str, items: int, seconds: float | None, *, ok: bool = True) -> None:
        """A batch of ``items`` rows of ``source`` ended: its import took ``seconds``, or failed.

        ``ok=False``: it failed with an error a retry may help (``seconds``
        is not read). Nothing happens without a target or for an empty batch.
        """
        if self.target is None or items <= 0 or (ok and seconds is None):
            return
        with self._lock:
            target = self.target
            if target is None:  # a reload took it away meanwhile
                return
            current, largest = self.size(source), self.largest(source)
            step = max(min(self.least, largest), largest // 16)
            new = self._within(source, _next(current, items, seconds, ok, target, step))
            if new == current:
                return
            if new == largest:
                self._sizes.pop(source, None)
            else:
                self._sizes[source] = new
            last = self._logged.get(source, largest)
            noteworthy = new >= last * NOTEWORTHY or new * NOTEWORTHY <= last
            if noteworthy:
                self._logged[source] = new
        if noteworthy:
            how = "failed" if not ok else f"took {seconds:.2f} s"
            log.info("source %s: batches of %d rows, from %d (a batch of %d %s; target %g s)",
                     source, new, current, items, how, target)  # fmt: skip
        self._changed(source, new)

    def _within(self, source: str, size: int) -> int:
        largest = self.largest(source)
        return max(min(self.least, largest), min(largest, size))

    def _changed(self, source: str, size: int) -> None:
        if self.on_change is not None:
            self.on_change(source, size)


def _next(
    current: int, items: int, seconds: float | None, ok: bool, target: float, step: int
) -> int:
    """The size after a batch of ``items`` rows ended in ``seconds`` (or failed); unclamped."""
    # A cut is at most half of the batch that reports, not of the current
    # size: the batches in flight (or in one job) when the target stalled
    # all report slow or failed, and together they cost one halving, not one each.
    if not ok or seconds is None:
        return min(current, items // 2)
    # The rows that would have taken the target at this batch's pace.
    fits = int(items * target / seconds) if seconds > 0 else current + step
    if seconds > target * SLACK:
        return min(current, max(fits, items // 2))
    if seconds * SLACK < target:
        return max(current, min(current + step, fits))
    return current


def largest_batches(
    cfg: SluiceConfig, queues: Mapping[str, QueueingLimitedSource], *, first: bool = False
) -> dict[str, int]:
    """Each source's largest batch, where the config leaves ``batch.max_items`` to sluice.

    Empty when the config sets it (every source's is then ``max_items``).
    A keyset source's batches hold :data:`~config.settings.BATCH_BYTES` of
    its rows (their width sampled once, off the loop: :func:`sample_widths`), at
    least :data:`~config.settings.KEY_BATCH` rows and at most ``max_items``;
    its rows are streamed, never held, and a bigger batch spreads a batch's
    fixed cost over more rows. Other sources hold their items (keys,
    messages) in their buffers: :data:`~config.settings.KEY_BATCH` items.
    A table whose width is not known (not sampled yet, empty, or its database
    away) gets ``max_items``; so does a table taken whole (:func:`_small_tables`,
    asked ``first``: once, as the loop starts), whose source then plans its
    range in one query (:attr:`SqlSource.few_rows`). No table is read here.
    """
    if not cfg.batch.chosen:
        return {}
    most = cfg.batch.max_items
    largest: dict[str, int] = {}
    small = _small_tables(cfg, queues) if first else None
    for name, src_cfg in cfg.sources.items():
        queue = queues.get(name)
        wrapped = None if queue is None else queue.wrapped
        if not walks_ranges(src_cfg):
            largest[name] = cfg.batch.key_items
            continue
        width = None
        if isinstance(wrapped, SqlSource):
            wrapped.few_rows = wrapped.few_rows if small is None else name in small
            width = None if wrapped.few_rows else wrapped.row_bytes(ask=False)
        fits = most if not width else max(KEY_BATCH, int(BATCH_BYTES / width))
        largest[name] = min(most, fits)
    return largest


WIDTH_SAMPLERS = 4
"""Threads sampling the row widths of a run's tables: a slow table holds up one of them."""


def sample_widths(
    config: Callable[[], SluiceConfig], queues: Mapping[str, QueueingLimitedSource],
    sizes: BatchSizer,
) -> list[threading.Thread]:  # fmt: skip
    """Sample the row width of each keyset SQL source :func:`largest_batches` sizes by it,
    on threads of their own (never the loop's: a slow or hung database would hold every
    source back), and give ``sizes`` the largest batches of the ``config()`` in force after
    each width found. Returns the threads."""
    cfg = config()
    if not cfg.batch.chosen:
        return []
    todo: SimpleQueue[SqlSource] = SimpleQueue()
    for name, src_cfg in cfg.sources.items():
        wrapped = queues[name].wrapped if name in queues else None
        if (walks_ranges(src_cfg) and isinstance(wrapped, SqlSource) and not wrapped.few_rows
                and wrapped.answered):  # fmt: skip
            todo.put(wrapped)

    def work() -> None:
        while True:
            try:
                source = todo.get_nowait()
            except Empty:
                return
            try:
                source.row_bytes()
            except SourceError as error:
                log.info("source %s: row width not sampled (%s); batches of %d rows",
                         source.name, error, cfg.batch.max_items)  # fmt: skip
                continue
            now = config()
            sizes.configure(now.batch, largest_batches(now, queues))

    threads = [threading.Thread(target=work, name=f"widths-{n}", daemon=True)
               for n in range(min(WIDTH_SAMPLERS, todo.qsize()))]  # fmt: skip
    for thread in threads:
        thread.start()
    return threads


def _small_tables(cfg: SluiceConfig, queues: Mapping[str, QueueingLimitedSource]) -> set[str]:
    """The keyset sources whose tables the database's statistics count at under half a
    batch's fewest rows (:data:`~config.settings.KEY_BATCH`): whatever their width, a batch
    takes the whole table, and 1,000 small tables' samples took ~1.4 s of the loop's start.
    One query per database; a table without statistics is not among them."""
    by_url: dict[str, tuple[sa.Engine, dict[str, str]]] = {}
    for name, queue in queues.items():
        wrapped = queue.wrapped
        if (isinstance(wrapped, SqlSource) and walks_ranges(wrapped.cfg) and wrapped.cfg.table
                and wrapped.answered):  # fmt: skip
            by_url.setdefault(wrapped.cfg.url, (wrapped.engine, {}))[1][name] = wrapped.cfg.table
    small: set[str] = set()
    for url, (engine, tables) in by_url.items():
        try:
            with engine.connect() as conn:
                counted = engine_of(url).row_estimates(conn, list(set(tables.values())))
        except (sa.exc.SQLAlchemyError, ConfigError) as error:
            log.debug("row estimates of %s not read: %s", url, error)
            continue
        small |= {n for n, t in tables.items() if counted.get(t, KEY_BATCH) < KEY_BATCH / 2}
    return small


def range_rows(src_cfg: SqlSourceConfig, cfg: SluiceConfig) -> int:
    """Rows per range a keyset source plans: its ``page_size`` where set, else
    :data:`~config.settings.KEY_RANGE`; never more than a batch or the gate's room.

    A range is the smallest piece a batch is made of, so a larger one could
    never be fed whole. Under ``max_rows_per_s`` a batch holds at most
    :data:`~sources.budget.BATCH_SECONDS` of the rate; ranges hold half of
    that, so that two daemons sharing the rate still fill their smaller
    batches with whole ranges. A source whose batch size adapts plans ranges
    of at most that size besides (:func:`plan_ranges`).
    """
    page = src_cfg.page_size if "page_size" in src_cfg.model_fields_set else KEY_RANGE
    rows = min(page, cfg.batch.max_items, cfg.backpressure.max_pending)
    rate = _database_rates(cfg).get(database_of(src_cfg))
    if rate is not None:  # the database's rate: the least any of its sources sets
        rows = min(rows, int(rate * BATCH_SECONDS / 2))
    return max(1, rows)


def range_bytes(src_cfg: SqlSourceConfig, cfg: SluiceConfig) -> int | None:
    """The most bytes a keyset range holds where sluice sizes both ranges and batches
    (neither ``page_size`` nor ``batch.max_items`` set): a batch's
    :data:`~config.settings.BATCH_BYTES`. None: ranges of rows only."""
    if "page_size" in src_cfg.model_fields_set or not cfg.batch.chosen:
        return None
    return BATCH_BYTES


_rates: tuple[SluiceConfig, dict[str, float]] | None = None  # the last config's, with it


def _database_rates(cfg: SluiceConfig) -> dict[str, float]:
    """The least ``max_rows_per_s`` any keyset source of each database sets, by database.

    Found once per config: a range is planned per source, and 1,000 tables asking
    each of the 1,000 made it a million looks at start.
    """
    global _rates
    known = _rates
    if known is not None and known[0] is cfg:
        return known[1]
    rates: dict[str, float] = {}
    for source in cfg.sources.values():
        if not isinstance(source, SqlSourceConfig):
            continue
        rate = source.limits.max_rows_per_s
        if rate is not None:
            database = database_of(source)
            rates[database] = min(rate, rates.get(database, rate))
    _rates = (cfg, rates)
    return rates


def plan_ranges(
    queues: Mapping[str, QueueingLimitedSource], cfg: SluiceConfig, source: str, size: int
) -> None:
    """A keyset source of ``queues`` plans its next ranges of at most ``size`` rows.

    Called where a size or the config changed (a sink thread, a reload).
    Ranges already buffered keep their size: the feeder gives one bigger
    than the batch size a batch of its own.
    """
    queue, src_cfg = queues.get(source), cfg.sources.get(source)
    wrapped = None if queue is None else queue.wrapped
    if isinstance(wrapped, SqlSource) and isinstance(src_cfg, SqlSourceConfig):
        wrapped.range_rows = min(range_rows(src_cfg, cfg), size)


def plan_every_range(
    queues: Mapping[str, QueueingLimitedSource], cfg: SluiceConfig, sizes: BatchSizer
) -> None:
    """Every keyset source of ``queues`` plans its next ranges of at most its batch size."""
    for name in queues:
        plan_ranges(queues, cfg, name, sizes.size(name))
