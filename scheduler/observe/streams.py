"""The change streams' health (``mode: stream`` sources): lag, changes/s, waiting, retained WAL.

A stream source's :meth:`~sources.stream.StreamSource.health` reads the WAL its
slot keeps on the source server (one small query, under a connection permit
of the database's budget), so it is asked neither on the loop's thread nor
at each snapshot: :meth:`StreamWatch.poll`, a job of the daemon's scheduler
every :data:`STREAMS_EVERY` seconds (at most the status board's share of the
daemon's time), reads each stream once and publishes an immutable
:class:`StreamView` per source. The ETA's sample takes the latest views into
its report (:attr:`~scheduler.observe.eta.EtaReport.streams`), from where the
status page, ``/status.json``, the metrics and the progress show them.

A slot that keeps more WAL than the source's ``stream.max_retained_wal`` is
warned about in the log once when it crosses the limit (and said once when
it is back under), and shown on the page for as long as it stays over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from config.secrets import redact_text
from sources.queueing import QueueingLimitedSource
from sources.sqldb import untimed
from spark_jobs.engines import url_traits

if TYPE_CHECKING:  # not imported to run: sources.stream brings the engines' (and pyspark's)
    from sources.pg_changes import StreamNames
    from sources.stream import StreamHealth

log = logging.getLogger("sluice.streams")

STREAMS_EVERY = 5.0
"""Seconds between two reads of each stream's health (each one a query on its source)."""
RATE_WINDOW = 30.0
"""Seconds of health reads the changes/s and the apply rate are measured over."""


@runtime_checkable
class Followed(Protocol):
    """What the watch reads of a stream source (:class:`~sources.stream.StreamSource`):
    a source that has both is one."""

    @property
    def names(self) -> StreamNames: ...

    def health(self, now: float | None = None) -> StreamHealth:
        """The stream's state; may block on its database, raises its ``SourceError``."""
        ...


@dataclass(frozen=True)
class StreamView:
    """One stream source as the page, ``/status.json``, the metrics and the progress show it.

    ``caught_up``: the walk is at the source's end and every change it read is
    in the target (lag 0). ``applied_per_s``: changes that reached the target per
    second (read less the rise in waiting), measured once the full load is done
    (its rows are waiting events but not changes read); None until known. ``slot``
    and ``publication`` are None for a MariaDB/MySQL source (its binary log has none).
    """

    source: str
    slot: str | None
    publication: str | None
    lag_s: float | None  # seconds the target is behind the source; None: nothing read yet
    caught_up: bool
    loaded: bool  # the full load is done
    changes_read: int  # since this daemon started
    changes_per_s: float | None  # changes read per second over RATE_WINDOW
    applied_per_s: float | None
    waiting: int  # read, and not yet in the target
    retained_bytes: int | None  # WAL the slot keeps on the source server; None: unknown
    max_retained_wal: int  # the config's limit (0: not known yet)
    read_at: float  # wall clock of the last health read that succeeded (0: none yet)
    warning: str | None = None  # the slot keeps more WAL than max_retained_wal: what to do
    error: str | None = None  # why the last health read failed (the figures are older)

    @property
    def over_limit(self) -> bool:
        """The slot keeps more WAL than ``stream.max_retained_wal``."""
        return self.warning is not None


@dataclass(frozen=True)
class _Read:
    at: float  # the watch's clock
    changes_read: int
    waiting: int
    loaded: bool


class StreamWatch:
    """Reads each stream source's health (:meth:`poll`) and keeps the latest views.

    ``sources``: the stream sources by name. :meth:`poll` runs on one thread
    at a time (a job of the daemon's scheduler); :meth:`latest` may be called
    from any thread and never waits. ``clock`` measures the rates,
    ``wall_clock`` is the health's ``now`` (both injected in tests).
    """

    def __init__(
        self,
        sources: Mapping[str, Followed],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.sources = dict(sources)
        self.clock = clock
        self.wall_clock = wall_clock
        self._reads: dict[str, deque[_Read]] = {name: deque() for name in self.sources}
        self._views: dict[str, StreamView] = {}
        self._lock = threading.Lock()  # one poll at a time (the job, a test)

    @classmethod
    def of(cls, queues: Mapping[str, QueueingLimitedSource]) -> StreamWatch:
        """A watch of the ``mode: stream`` sources among ``queues`` (none: it reads nothing)."""
        return cls({name: queue.wrapped for name, queue in queues.items()
                    if isinstance(queue.wrapped, Followed)})  # fmt: skip

    def latest(self) -> dict[str, StreamView]:
        """Each stream's view at the last poll, by source (a copy: the caller's to keep)."""
        return dict(self._views)

    def poll(self) -> dict[str, StreamView]:
        """Read every stream's health once, warn of a slot's WAL crossing its limit, and
        publish the new views; a failed read keeps the last figures, with the error."""
        with self._lock:
            views = dict(self._views)
            for name, source in self.sources.items():
                views[name] = self._read(name, source, views.get(name))
            self._views = views
            return dict(views)

    def _read(self, name: str, source: Followed, last: StreamView | None) -> StreamView:
        try:
            # Its query says nothing of the database's load: not a key query's latency.
            with untimed():
                health = source.health(self.wall_clock())
        except Exception as error:  # the source's error: shown, read again at the next poll
            # A source's error names its URL without the password; a driver's might not.
            text = redact_text((str(error) or repr(error)).splitlines()[0], ())
            if last is None or last.error is None:
                log.warning("source %s: cannot read its stream's health: %s", name, text)
            if last is None:
                slot, publication = _names(source, source.names.slot, source.names.publication)
                return StreamView(name, slot, publication, None, False, False, 0, None, None,
                                  0, None, 0, 0.0, None, text)  # fmt: skip
            return replace(last, error=text)
        if last is not None and last.error is not None:
            log.info("source %s: its stream's health is read again", name)
        now = self.clock()
        reads = self._reads[name]
        reads.append(_Read(now, health.changes_read, health.waiting, health.loaded))
        while len(reads) > 2 and reads[0].at < now - RATE_WINDOW:
            reads.popleft()
        changes_per_s, applied_per_s = _rates(reads)
        warning = _warning(name, health, source.names, last)
        slot, publication = _names(source, health.slot, health.publication)
        return StreamView(
            source=name, slot=slot, publication=publication, lag_s=health.lag,
            caught_up=health.caught_up and health.lag == 0, loaded=health.loaded,
            changes_read=health.changes_read, changes_per_s=changes_per_s,
            applied_per_s=applied_per_s, waiting=health.waiting,
            retained_bytes=health.retained_bytes, max_retained_wal=health.max_retained_wal,
            read_at=self.wall_clock(), warning=warning,
        )  # fmt: skip


def _names(source: Followed, slot: str, publication: str) -> tuple[str | None, str | None]:
    """The slot and publication of a PostgreSQL source; none for a MariaDB/MySQL one (the
    binary log is read by GTID; its health still carries PostgreSQL's names)."""
    url = getattr(getattr(source, "cfg", None), "url", None)
    if isinstance(url, str) and not url_traits(url).stream_slots:
        return None, None
    return slot, publication


def _rates(reads: deque[_Read]) -> tuple[float | None, float | None]:
    """Changes read per second, and changes applied per second (once loaded), over the reads
    (None: under a second of reads)."""
    last = reads[-1]
    return _rate(reads[0], last, applied=False), next(
        (_rate(r, last, applied=True) for r in reads if r.loaded), None)


def _rate(first: _Read, last: _Read, *, applied: bool) -> float | None:
    span = last.at - first.at
    if span < 1.0:
        return None
    read = max(0, last.changes_read - first.changes_read)
    # Every change read is waiting or applied: what was read and is not waiting more was
    # applied. The full load's rows wait too, but are not changes read: measured after it.
    return max(0, read - (last.waiting - first.waiting)) / span if applied else read / span


def _warning(
    name: str, health: StreamHealth, names: StreamNames, last: StreamView | None
) -> str | None:
    """What to do about a slot over its WAL limit (None: under it); logged once per crossing.
    An unknown size (no slot yet) keeps the last state."""
    retained, limit = health.retained_bytes, health.max_retained_wal
    was = last is not None and last.over_limit
    if retained is None:
        return last.warning if last is not None else None
    if retained <= limit:
        if was:
            log.info("source %s: slot %s keeps %s of WAL, back under stream.max_retained_wal "
                     "(%s)", name, health.slot, human_bytes(retained),
                     human_bytes(limit))  # fmt: skip
        return None
    drop = ("`sluice reset` the source to drop its slot (it starts over with a new full load)"
            if names.owned else f"drop the slot {health.slot} yourself (the config names it: "
            "sluice never drops it) and `sluice reset` the source")  # fmt: skip
    warning = (f"source {name}: slot {health.slot} keeps {human_bytes(retained)} of WAL on the "
               f"source server, over stream.max_retained_wal ({human_bytes(limit)}; "
               f"{retained:,} > {limit:,} bytes): the target is behind; make room downstream "
               f"so that its batches go through, or {drop}")  # fmt: skip
    if not was:
        log.warning("%s", warning)
    return warning


def human_bytes(size: float) -> str:
    """``512 B``, ``1.5 KiB``, ``10.0 GiB``: powers of 1,024, as the config writes them."""
    if abs(size) < 1024:
        return f"{size:,.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if abs(size) < 1024:
            return f"{size:,.1f} {unit}"
    return f"{size / 1024:,.1f} TiB"


def describe(view: StreamView) -> str:
    """One line of a stream's figures (the progress lines and bars)."""
    state = "caught up" if view.caught_up else (
        "lag ?" if view.lag_s is None else f"lag {view.lag_s:,.0f} s")  # fmt: skip
    rate = "?" if view.changes_per_s is None else f"{view.changes_per_s:,.1f}"
    wal = "?" if view.retained_bytes is None else human_bytes(view.retained_bytes)
    over = f" (over {human_bytes(view.max_retained_wal)})" if view.over_limit else ""
    wal = f", WAL {wal}{over}"
    if view.slot is None:  # a binary log: no slot of sluice's keeps it
        names, wal = "binary log", ""
    elif view.slot == view.publication:
        names = f"slot and publication {view.slot}"
    else:
        names = f"slot {view.slot}, publication {view.publication}"
    return (f"{state}, {rate} changes/s, {view.waiting:,} waiting{wal}, {names}"
            f"{'' if view.loaded else ', full load running'}")  # fmt: skip
