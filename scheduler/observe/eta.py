"""When each source, and the whole run, will be done: rows left at the recent rate.

- **Rows left** come from each source's ``backlog()`` (rows past its read
  position, messages visible, rows matching a sweep's ``where:``), counted by
  :class:`BacklogCounter` on a thread of its own every :data:`COUNT_EVERY`
  seconds, less often when a count is slow (:data:`COUNT_SHARE`); a count
  blocks on the source's database, under a connection permit of its
  budget. Added to it: what the daemon already holds (rows buffered and in
  batches not yet done). A sweep's ``where:`` rows stay visible once
  done, so its keys claimed in the ledger are taken off. Between two counts,
  what the run has done since the last count is taken off the count.
- **The rate** is rows done per second over the last :data:`RATE_WINDOW`
  seconds, from samples the status job takes each second: a short window,
  so that a change of speed shows within it. Where a source's database has
  a rate in force (``max_rows_per_s``, this daemon's share of it, the
  latency feedback's factor), the rate used is at most that rate: a limit
  lowered by a reload, or halved by slow key queries, is right at once.
- **Done**: the source is exhausted, nothing of it is buffered or importing,
  and nothing is left. When a source runs dry before the count says so, it
  is counted again at once.
- **Overall**: every source's rows left at their rates together, and never
  sooner than a source held at its rate limit, or than any source's rows
  left at its limit (those cannot go faster once the others are done).
- **A change stream** (``mode: stream``, :mod:`.streams`) has no end: it is
  never done. Caught up (at the source's end, every change read in the
  target), it says so instead of an ETA; lagging, its ETA is the time its
  waiting changes take at the recent apply rate, or, while that is not known
  (the full load, the first reads), its lag. Its rows left are its waiting
  changes. The run is caught up when every other source is done and every
  stream caught up.

Thread model: :meth:`EtaTracker.sample` runs on the status job's thread,
the counts on the counter's; readers (metrics, the page, the progress
display) take :meth:`EtaTracker.latest`, an immutable report.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from scheduler.observe.streams import StreamView, StreamWatch
from sources.queueing import QueueingLimitedSource
from sources.sqldb import untimed

log = logging.getLogger("sluice.eta")

RATE_WINDOW = 15.0
"""Seconds of rows done the ETA's rate is measured over."""
HISTORY = 60.0
"""Seconds of samples kept for the rows/s chart."""
CHART_STEP = 3.0
"""Seconds per point of the rows/s chart."""
COUNT_EVERY = 30.0
"""Seconds between two backlog counts of a source, at least."""
COUNT_SHARE = 0.1
"""At most this part of a source database's time goes to backlog counts: a
count of a big table that took 5 s is not run again for 50 s."""
AT_LIMIT = 0.9
"""A source going at this part of its rate in force or more is held at its limit."""


@dataclass(frozen=True)
class SourceEta:
    """One source: rows left, the rate they go at, when it will be done."""

    source: str
    left: int | None  # rows (keys, messages) still to migrate; None: not counted yet
    rows_per_s: float | None  # over RATE_WINDOW, at most the rate in force; None: not known
    eta_s: float | None  # None: left or rate unknown; 0 when done
    done: bool
    limited: bool = False  # going at (or near) the limit in force
    limit: float | None = None  # rows/s in force for the source's database; None: unbounded
    counted_s_ago: float | None = None  # age of the last backlog count
    count_error: str | None = None  # why the last count failed (the source's own error)
    chart: tuple[float, ...] = ()  # rows/s over the last minute, CHART_STEP apart, oldest first
    stream: bool = False  # a change stream: never done
    caught_up: bool = False  # a stream at the source's end, every change read in the target


@dataclass(frozen=True)
class EtaReport:
    """Every source's estimate, and the run's."""

    sources: dict[str, SourceEta] = field(default_factory=dict)
    left: int | None = None
    rows_per_s: float = 0.0
    eta_s: float | None = None
    done: bool = False
    at: float | None = None  # the tracker's clock when it was sampled (the ETAs count from it)
    streams: dict[str, StreamView] = field(default_factory=dict)  # the change streams' health
    caught_up: bool = False  # every stream caught up, every other source done

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class BacklogCount:
    """A source's rows left when it was last counted."""

    left: int | None  # None: the source cannot tell
    done: int  # rows the run had done when it was counted
    at: float
    error: str | None = None
    took: float = 0.0  # seconds the count ran


class BacklogCounter:
    """Counts each source's rows left on a thread of its own; thread-safe.

    ``rows_done()`` gives the rows the run has done per source (read with
    the count, to take off later); ``claimed()`` the keys claimed per source
    in the ledger (for sweep sources, whose rows stay visible once done).
    """

    def __init__(
        self,
        queues: Mapping[str, QueueingLimitedSource],
        rows_done: Callable[[], Mapping[str, int]],
        *,
        sweeps: frozenset[str] = frozenset(),
        claimed: Callable[[], Mapping[str, int]] | None = None,
        every: float = COUNT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queues = queues
        self.rows_done = rows_done
        self.sweeps = sweeps
        self.claimed = claimed
        self.every = every
        self.clock = clock
        self._counts: dict[str, BacklogCount] = {}
        self._asked: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Count every source now, then every :attr:`every` seconds, until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="backlog-counts", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Count no more; a count running now is waited for up to ``timeout``."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def ask(self, source: str) -> None:
        """Count ``source`` again as soon as possible (it ran dry before its count said so)."""
        self._asked.add(source)
        self._wake.set()

    def count(self, source: str) -> BacklogCount | None:
        """The last count of ``source`` (None: not counted yet)."""
        return self._counts.get(source)

    def count_now(self, only: str | None = None) -> None:
        """Count every source (or ``only``) on this thread; errors are kept, not raised."""
        # ``only`` is looked up: counting each of 1,000 sources walked them all.
        for name in list(self.queues) if only is None else [only]:
            queue = self.queues.get(name)
            if queue is not None:
                self._counts[name] = self._count(name, queue)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.clock()
            due = [n for n, q in list(self.queues.items())
                   if n in self._asked or (self._read_once(q) and (
                       (c := self._counts.get(n)) is None
                       or now - c.at >= max(self.every, c.took / COUNT_SHARE)))]  # fmt: skip
            for name in due:
                if self._stop.is_set():
                    return
                self._asked.discard(name)
                self.count_now(name)
            self._wake.wait(1.0)
            self._wake.clear()

    @staticmethod
    def _read_once(queue: QueueingLimitedSource) -> bool:
        """Whether ``queue``'s source was read once: counts of 1,000 sources before held the
        key-query connections their first reads waited for."""
        return queue.read_once  # not health(): a snapshot under a lock, 1,000 a second

    def _count(self, name: str, queue: QueueingLimitedSource) -> BacklogCount:
        started = self.clock()
        if queue.at_end and not queue.refilling and name not in self.sweeps:
            # Its last read reached its end: what is left is in hand, no query (a schema of
            # 1,000 tables, each read in one range, would count them all, two queries each,
            # against its key queries).
            buffered, held, done = self._in_hand(name, queue)
            return BacklogCount(buffered + held, done, self.clock(), took=0.0)
        try:
            # A refill that lands while the source counts would be counted twice
            # (or not at all): count again, a few times at most, until none did.
            for _ in range(3):
                before = self._in_hand(name, queue)
                # A count is no key query of the walk: its time (a whole table's
                # count may take seconds) must not slow the source's rate down.
                with untimed():
                    backlog = queue.wrapped.backlog()
                after = self._in_hand(name, queue)
                if sum(after) == sum(before):  # feeding and imports only move rows along
                    break
            sweep = name in self.sweeps and self.claimed is not None and backlog is not None
            claimed = self.claimed().get(name, 0) if sweep and self.claimed else 0
        except Exception as error:  # the source's (or ledger's) error: shown, counted again later
            log.warning("source %s: cannot count its backlog: %s", name, error)
            last = self._counts.get(name) or BacklogCount(None, 0, 0.0)
            return BacklogCount(last.left, last.done, self.clock(), str(error),
                                self.clock() - started)
        buffered, held, done = after
        now = self.clock()
        if backlog is None:
            left = None
        elif name in self.sweeps:  # its keys claimed are still in its backlog, buffered ones too
            left = max(0, backlog - claimed) + held
        else:
            left = backlog + buffered + held
        return BacklogCount(left, done, now, took=now - started)

    def _in_hand(self, name: str, queue: QueueingLimitedSource) -> tuple[int, int, int]:
        """Rows buffered, held, and done by the run."""
        health = queue.health()
        return health.buffered, health.held, int(self.rows_done().get(name, 0))


class EtaTracker:
    """Rows done per source sampled each second, and the estimate they give.

    ``rows_done()``: the run's rows done per source (the loop's stats);
    ``limit(source)``: the rows/s in force for its database (None: unbounded);
    ``moving()``: whether batches may run yet (samples from before the first
    batch could import would make the rate look low); ``streams``: the change
    streams' health (by default, a watch of the stream sources among ``queues``,
    polled by whoever owns it).
    """

    def __init__(
        self,
        queues: Mapping[str, QueueingLimitedSource],
        rows_done: Callable[[], Mapping[str, int]],
        *,
        limit: Callable[[str], float | None] = lambda _source: None,
        moving: Callable[[], bool] = lambda: True,
        counter: BacklogCounter | None = None,
        streams: StreamWatch | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queues = queues
        self.rows_done = rows_done
        self.limit = limit
        self.moving = moving
        self.clock = clock
        self.counter = counter or BacklogCounter(queues, rows_done, clock=clock)
        self.streams = StreamWatch.of(queues) if streams is None else streams
        self._samples: deque[tuple[float, dict[str, int]]] = deque()
        self._report = EtaReport()
        self._lock = threading.Lock()  # one sample at a time (the job, a final report)

    def latest(self) -> EtaReport:
        """The estimate of the last sample (thread-safe, never waits)."""
        return self._report

    def sample(self) -> EtaReport:
        """Take a sample of rows done and publish a new estimate (the status job, each second)."""
        with self._lock:
            now = self.clock()
            done = {name: int(rows) for name, rows in self.rows_done().items()}
            if self.moving():
                self._samples.append((now, done))
                while self._samples and self._samples[0][0] < now - HISTORY - CHART_STEP:
                    self._samples.popleft()
            streams = self.streams.latest()
            sources = {name: self._source(name, queue, now, done, streams.get(name))
                       for name, queue in self.queues.items()}  # fmt: skip
            self._report = _overall(sources, now, streams)
            return self._report

    def _source(
        self, name: str, queue: QueueingLimitedSource, now: float, done: Mapping[str, int],
        stream: StreamView | None,
    ) -> SourceEta:  # fmt: skip
        health = queue.health()
        idle = health.exhausted and not health.refilling and health.buffered == 0 \
            and health.held == 0  # fmt: skip
        count = self.counter.count(name)
        if count is None or count.left is None:
            left = 0 if idle and count is not None else None  # it cannot tell: dry is done
        else:
            left = max(0, count.left - (done.get(name, 0) - count.done))
            if idle and left > 0 and count.at < now - 1.0:
                self.counter.ask(name)  # dry before the count said so: count again
        rate = self._rate(name, now)
        cap = self.limit(name)
        # At (or near) its limit, a source goes no faster than the limit in force.
        limited = rate is not None and cap is not None and rate >= AT_LIMIT * cap
        if rate is not None and cap is not None:
            rate = min(rate, cap)
        is_done = idle and left == 0
        if is_done:
            eta: float | None = 0.0
        elif left is None or not rate:
            eta = None
        else:
            eta = left / rate
        estimate = SourceEta(
            name, left, rate, eta, is_done, limited, cap,
            None if count is None else round(now - count.at, 1),
            None if count is None else count.error, self._chart(name, now),
        )  # fmt: skip
        if name not in self.streams.sources:
            return estimate
        if stream is None:  # its health not read yet: a stream is never done
            return replace(estimate, left=None, eta_s=None, done=False, stream=True)
        return replace(estimate, left=stream.waiting, eta_s=drain_s(stream), done=False,
                       stream=True, caught_up=stream.caught_up)  # fmt: skip

    def _rate(self, name: str, now: float) -> float | None:
        """Rows per second over the last RATE_WINDOW (None: under 2 s of samples)."""
        inside = [(t, d.get(name, 0)) for t, d in self._samples if t >= now - RATE_WINDOW]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 2.0:
            return None
        (t0, d0), (t1, d1) = inside[0], inside[-1]
        return max(0.0, (d1 - d0) / (t1 - t0))

    def _chart(self, name: str, now: float) -> tuple[float, ...]:
        """Rows per second in each CHART_STEP of the last HISTORY seconds, oldest first."""
        steps = int(HISTORY / CHART_STEP)
        done = [0.0] * steps
        previous: tuple[float, int] | None = None
        for t, rows in self._samples:
            d = rows.get(name, 0)
            if previous is not None:
                step = int((now - t) // CHART_STEP)
                if 0 <= step < steps:
                    done[steps - 1 - step] += max(0, d - previous[1])
            previous = (t, d)
        return tuple(round(rows / CHART_STEP, 1) for rows in done)


def drain_s(stream: StreamView) -> float | None:
    """A stream's ETA: 0 caught up; its waiting changes at the recent apply rate; else its
    lag (None: not known)."""
    if stream.caught_up:
        return 0.0
    if stream.waiting and stream.applied_per_s:
        return stream.waiting / stream.applied_per_s
    return stream.lag_s


def _overall(
    sources: Mapping[str, SourceEta], at: float, streams: Mapping[str, StreamView]
) -> EtaReport:
    going = [s for s in sources.values() if not s.done and not s.caught_up]
    rate = sum(s.rows_per_s or 0.0 for s in going)
    if not going:  # a stream has no end: caught up, not done
        streaming = any(s.stream for s in sources.values())
        return EtaReport(dict(sources), 0, rate, 0.0, not streaming, at, dict(streams), streaming)
    if any(s.left is None for s in going) or any(s.stream and s.eta_s is None for s in going):
        return EtaReport(dict(sources), None, rate, None, False, at, dict(streams))
    left = sum(s.left or 0 for s in going)
    batches = [s for s in going if not s.stream]
    batch_rate = sum(s.rows_per_s or 0.0 for s in batches)
    eta: float | None = 0.0
    if batches:
        eta = sum(s.left or 0 for s in batches) / batch_rate if batch_rate > 0 else None
    # A source held at its limit goes no faster once the others are done, and
    # none goes faster than its limit; a stream drains at its own apply rate.
    floors = [s.eta_s for s in batches if s.limited and s.eta_s is not None]
    floors += [(s.left or 0) / s.limit for s in batches if s.limit]
    floors += [s.eta_s or 0.0 for s in going if s.stream]
    if eta is not None and floors:
        eta = max(eta, *floors)
    return EtaReport(dict(sources), left, rate, eta, False, at, dict(streams))


def format_eta(seconds: float | None, done: bool = False, caught_up: bool = False) -> str:
    """``done``, ``caught up`` (a change stream), ``-:--:--`` (unknown) or ``h:mm:ss``."""
    if done:
        return "done"
    if caught_up:
        return "caught up"
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"
