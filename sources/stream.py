"""A ``mode: stream`` source: a table's existing rows and every change after, in commit order.

The table's change stream (PostgreSQL: a publication and a logical slot,
:mod:`sources.pg_stream`; MariaDB/MySQL: the row binary log,
:mod:`sources.binlog_stream`) is read from the source's position on. The rows
already in the table are loaded as key ranges that their importers read
(:mod:`spark_jobs.changes.load_ranges`): in the snapshot the slot was made with,
before every change; or, where the source exports none, as the table is when
read, the changes made meanwhile then handed out as each row's last state
(:mod:`sources.stream_catchup`). Where neither serves (a slot made before), the
rows are read in key chunks between two watermarks and merged into the stream's
order by a :class:`~sources.watermarks.Reconciler` (DBLog). Nothing is locked,
and no row goes back to an older state. What comes out is one ordered list of
:class:`~spark_jobs.changes.change_batches.StreamEvent`, each at a *position*:
``[end, n]``, the end of its transaction's commit (a GTID's sequence number on
MariaDB) and how many events of that transaction come up to and with it.
Positions only grow.

Items are *spans* of that list (like a keyset walk's ranges): ``key`` the
position of the span's last event, ``payload`` the events' JSON texts,
``rows`` how many, ``version`` the full load's progress after the span (see
:class:`LoadProgress`). A batch is adjacent spans, claimed in the ledger by a
compare-and-set on the source's high-water mark (the last position claimed),
and applied by its target in one transaction that checks and moves the
target's own record of the stream's position
(:mod:`spark_jobs.changes.apply_changes`). The slot is acknowledged only up to a
transaction whose every event is in a batch that is done.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SqlSourceConfig
from config.sources import StreamConfig, no_stream
from sources.abc import Item, LimitedSource
from sources.budget import Budget
from sources.sqldb import SourceDatabase
from sources.stream_applied import Applied
from sources.stream_backends import Backend, Txn, complete_unsent, last_key, names_of
from sources.stream_catchup import catch_up
from sources.stream_spans import DONE, LoadProgress, Position, take_spans
from sources.watermarks import Reconciler, high, low
from spark_jobs.changes.change_batches import StreamEvent
from spark_jobs.engines import url_traits


def backend_of(name: str, cfg: SqlSourceConfig, db: SourceDatabase) -> Backend:
    """The backend of ``cfg``'s database engine: its replication slot (PostgreSQL's), or its
    binary log. Raises :class:`ConfigError` for an engine whose change stream sluice does
    not read (the config refuses a database in a file as it loads)."""
    engine = url_traits(cfg.url)
    if not engine.reads_change_streams:
        raise ConfigError(no_stream(cfg.url))
    if engine.stream_slots:
        from sources.pg_stream import PgBackend

        return PgBackend(name, cfg, db)
    from sources.binlog_stream import MariaBackend

    return MariaBackend(name, cfg, db)


LOAD_RANGE = 200_000
"""Rows of a range of a full load read in the slot's snapshot, ``page_size`` left out: its
rows go from the source to the target without the daemon (a range costs a batch's claim
and transaction, and a key query of that many index entries)."""


WAIT_FOR_RANGES = 0.2
"""Seconds a load read as the table then is waits, when asked, for the target to hold its
every range before it says again that it has nothing yet (a daemon asks again at once)."""


def load_range_rows(cfg: SqlSourceConfig) -> int:
    """Rows of each range of ``cfg``'s full load in a snapshot: its ``page_size`` where set,
    else :data:`LOAD_RANGE`."""
    return cfg.page_size if "page_size" in cfg.model_fields_set else LOAD_RANGE


@dataclass(frozen=True)
class StreamHealth:
    """A stream source's state: its slot and publication; ``lag``, seconds the target is
    behind the source (0: caught up; None: nothing read yet); ``changes_read`` since the
    start; ``waiting``, changes read and not yet in the target; ``retained_bytes``, the WAL
    the slot keeps on the server (warned about above ``max_retained_wal``); ``caught_up``,
    the last read reached the source's end; ``loaded``, the full load is done."""

    slot: str
    publication: str
    lag: float | None
    changes_read: int
    waiting: int
    retained_bytes: int | None
    caught_up: bool
    loaded: bool
    max_retained_wal: int


class StreamSource(LimitedSource):
    """The changes of one table after its existing rows (see the module). ``next_batch``
    hands out the full load's next range (or chunk), then what the stream read past it, in
    spans of at most ``limit`` events. :meth:`reset` starts again after a position and a
    load progress (a restart, a lost claim race); spans of an earlier start carry an older
    :attr:`epoch` in ``handle``. ``committed`` reads the target's position; each read first
    lets the slot go up to it. Errors are :class:`~config.errors.SourceError`.
    """

    weighs_rows = True

    def __init__(
        self, name: str, cfg: SqlSourceConfig, *, engine: sa.Engine | None = None,
        budget: Budget | None = None, committed: Callable[[], list[int] | None] | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        self.cfg = cfg
        self._db = SourceDatabase(name, cfg, engine, budget)
        self.names = names_of(name, cfg)
        self._stream = backend_of(name, cfg, self._db)
        self._key = cfg.key_columns
        self._lock = threading.Lock()
        self.epoch = 0
        self._applied = Applied(committed, self._lock)
        self.changes_read = 0
        self.reset(None, "")

    # -- the walk ----------------------------------------------------------------

    def reset(self, after: Sequence[int] | None, progress: str | None) -> None:
        """Hand out what lies past ``after`` (None: the slot's start), the full load going on
        from ``progress``; spans handed out before are of an older epoch."""
        with self._lock:
            self.epoch += 1
            self._after: Position | None = None if after is None else (after[0], after[1])
            self._read_to = 0 if after is None else after[0] - 1  # transactions fed
            self._resumed: Position | None = self._after  # claimed up to, at this start
            self._fed = False  # a read since: _read_to is where the slot was read to
            self._load = LoadProgress(progress or "")
            self._reconciler = Reconciler(self._key)
            self._chunks: dict[str, LoadProgress] = {}  # read, high mark not seen: progress after
            self._nonce = uuid.uuid4().hex[:12]
            self._seq = 0
            self._out: deque[tuple[Position, StreamEvent, LoadProgress]] = deque()
            self._applied.saw_end(False)
            self._snapshot_seq = 0 if after is None else after[1]  # see _from_snapshot
            self._load_end: Position | None = None  # the last range read in the snapshot
            if self._load.catching_up is not None:
                self._load_end = self._after  # the last range, or a part of the catch-up

    @property
    def exhausted(self) -> bool:
        return self._applied.at_end

    def check(self) -> None:
        """Make the stream's slot and publication where missing (PostgreSQL), check the
        server can stream (MariaDB), check the table and its key."""
        self._stream.open()
        columns = self._stream.columns()
        if not columns:
            raise ConfigError(f"source {self.name}: no table {self.cfg.table!r}")
        missing = [k for k in self._key if k not in columns]
        if missing:
            raise ConfigError(f"source {self.name}: key column(s) {missing} are not columns "
                              f"of {self.cfg.table}")  # fmt: skip

    def next_batch(self, limit: int) -> list[Item]:
        epoch = self.epoch
        # On this thread, as every use of the slot: a slot serves one session at a time.
        self._acknowledge()
        self._release_snapshot()
        start = self._load.catching_up
        if start is not None:
            if not self._out and self._load_end is None:  # the target holds every range
                self._catch_up(start)
            elif not self._out:
                # Its importers are at work: asked again at once, the refill would spin.
                time.sleep(WAIT_FOR_RANGES)
            return self._spans(limit, epoch)
        if not self._load.done and not self._chunks:
            if self._from_snapshot():
                return self._spans(limit, epoch)  # the slot is read once every range is out
            self._read_chunk(max(1, limit))  # the chunk's size is the one last_key compares
        more = limit - len(self._out)
        at_end = False
        if more > 0:
            # The slot is peeked from its acknowledged position: what was read since counts.
            read = self._applied.messages() + 4 * more + 1000
            self._feed(self._stream.read(self._read_to, read))
            at_end = self._stream.at_end
            self._read_to = max(self._read_to, self._stream.reached)
        items = self._spans(limit, epoch)
        self._applied.saw_end(at_end and not self._out and self._load.done and not self._chunks)
        return items

    @property
    def applied(self) -> tuple[Position, float] | None:
        """The target's position and its commit time, as last read."""
        return self._applied.position

    def _acknowledge(self) -> None:
        """Let the slot forget what the target has applied (see :meth:`Applied.learn`); of a
        slot shared by a ``tables:`` group, what this table needs no more
        (:meth:`Applied.needs_from`)."""
        complete = self._applied.learn()
        if self._stream.shared:
            with self._lock:
                needs = self._applied.needs_from(self._fed, self._resumed, self._read_to)
            if needs is not None:
                self._stream.acknowledge(needs)
            return
        if complete > self._applied.acked:
            self._stream.acknowledge(complete)
            self._applied.acked = complete

    def health(self, now: float | None = None) -> StreamHealth:
        """The stream as status, the page and the metrics show it (reads the slot's WAL and
        the target's position)."""
        self._applied.learn()  # not only at the next read: the lag would lag
        waiting = self._applied.waiting()[0] + sum(e.rows for _, e, _ in self._out)
        return StreamHealth(
            slot=self.names.slot, publication=self.names.publication, lag=self.lag(now),
            changes_read=self.changes_read, waiting=waiting,
            retained_bytes=self._stream.retained_bytes(), caught_up=self._applied.fresh_end(now),
            loaded=self._load.done,
            max_retained_wal=(self.cfg.stream or StreamConfig()).max_retained_wal)

    def lag(self, now: float | None = None) -> float | None:
        """Seconds the target is behind the source (see :meth:`Applied.lag`)."""
        return self._applied.lag(now)

    def drop(self) -> bool:
        """Drop what sluice keeps on the source for the stream (``cutover``, ``reset``)."""
        return self._stream.drop()

    @property
    def backend(self) -> Backend:
        """The engine's stream and table behind this source (see :mod:`sources.stream_backends`)."""
        return self._stream

    def close(self) -> None:
        self._stream.close()
        self._db.close()

    # -- inside ------------------------------------------------------------------

    def _read_chunk(self, room: int) -> None:
        """Read the next chunk of the full load between a low and a high watermark; a chunk
        read whole (one event) holds no more rows than the buffer has ``room`` for."""
        self._seq += 1
        chunk = f"{self._nonce}.{self._seq}"
        size = min(self.cfg.page_size, room) if self._stream.whole_chunks else self.cfg.page_size
        self._stream.mark(low(chunk))
        rows = self._stream.chunk(self._load.after, size)
        self._stream.mark(high(chunk))
        self._reconciler.chunk(chunk, rows)
        last = last_key(rows, self._key, size)
        self._chunks[chunk] = LoadProgress(DONE if last is None else json.dumps(last))

    def _from_snapshot(self) -> bool:
        """Hand out the next key range of the full load in the snapshot the slot was made with
        (the table where the slot starts): the ``n``-th at ``[start, n]``, before every
        change, with no watermark, merge or read of the slot; its importer reads its rows
        (:class:`~spark_jobs.changes.change_batches.LoadRange`). False where no snapshot serves, or
        positions past it (another daemon's claims) end it: :meth:`_read_chunk` then."""
        found = self._stream.snapshot
        if found is None:
            return False
        name, start = found
        if self._after is not None and self._after[0] != start:
            if not self._stream.live_ranges:
                self._stream.loaded()
                return False
            # Read as the table is then, a range needs no snapshot: the load goes on after
            # the ranges claimed (a restart), the changes after their position.
            start = self._after[0]
        # The transaction at the stream's start is in the table the ranges read, not after.
        self._read_to = max(self._read_to, start)
        span = self._stream.load_range(self._load.after, load_range_rows(self.cfg), name)
        progress = LoadProgress(json.dumps(list(span.upto))) if span.upto is not None else (
            LoadProgress.catch_up(start) if self._stream.live_ranges else LoadProgress(DONE))
        with self._lock:
            self._snapshot_seq += 1
            at = (start, self._snapshot_seq)
            if span.rows and (self._after is None or at > self._after):
                self._out.append((at, StreamEvent.of(span, self._key), progress))
        self._load = progress
        if span.upto is None:
            # Its importers read the snapshot until the last range is in the target (an
            # empty last range is none: the one before it is the last).
            last = at if span.rows else (start, self._snapshot_seq - 1)
            self._load_end = last if last[1] > 0 else None
            if self._load_end is None:
                self._stream.loaded()
        return True

    def _catch_up(self, start: int) -> None:
        """Hand out the changes since ``start`` as rows' last states (:mod:`.stream_catchup`)."""
        found = catch_up(self._stream, self._key, start, self._after, self._load)
        with self._lock:
            self._out.extend(found.out)
            if found.out and found.last is not None:
                self._applied.read(found.read_to, len(found.out), found.last.committed_at,
                                   found.last.begin, len(found.out))  # fmt: skip
            self._read_to = max(self._read_to, found.read_to)
            self._fed = True
            self.changes_read += found.changes
        self._load = LoadProgress(DONE)

    def _release_snapshot(self) -> None:
        """Let the snapshot go once the target holds every range read in it."""
        held = self._applied.held
        if self._load_end is not None and held is not None and held >= self._load_end:
            self._load_end = None
            self._stream.loaded()

    def _feed(self, transactions: list[Txn]) -> None:
        """Merge whole transactions past what was read into the ordered events."""
        for txn in transactions:
            if txn.end <= self._read_to:
                continue
            ours = [m for m in txn.marks if m.partition(":")[2].startswith(self._nonce + ".")]
            closed = [m.partition(":")[2] for m in ours if m.startswith("high:")]
            merged = self._reconciler.feed(ours, txn.changes)
            events = [StreamEvent.of(e, self._key) for e in merged]
            events = complete_unsent(events, self._reconciler.holds_back, self._stream.current)
            progress = self._load
            for chunk in closed:
                progress = self._chunks.pop(chunk)
            with self._lock:
                for n, event in enumerate(events, 1):
                    at = (txn.end, n)
                    if self._after is None or at > self._after:
                        self._out.append((at, event, progress if n == len(events) else
                                          self._load))  # fmt: skip
                self._read_to = txn.end
                self._fed = True
                if events:
                    self._applied.read(txn.end, len(events), txn.committed_at, txn.begin,
                                       sum(e.rows for e in events))  # fmt: skip
                self.changes_read += len(txn.changes)
            self._load = progress

    def _spans(self, limit: int, epoch: int) -> list[Item]:
        """Up to ``limit`` events from the front, one span per transaction."""
        with self._lock:
            return take_spans(self._out, self.name, limit, epoch)


def check_resumable(source: StreamSource, claimed: Sequence[int] | None) -> None:
    """Raise :class:`ConfigError` when ``source`` resumes after ``claimed`` (the ledger's
    mark) from a slot this start made: the changes in between are in no slot."""
    if claimed is not None and source.backend.made_slot:
        raise ConfigError(
            f"source {source.name}: its stream resumes after position {list(claimed)}, but "
            f"its slot {source.names.slot} was made by this start (the one before was "
            "dropped, or the config names another): the changes in between are not in it; "
            f"start it over with a new full load: sluice reset --source {source.name}"
        )
