"""One tick's feeding: a batch from a buffer, claimed in the ledger, handed to the sink.

:meth:`Feeder.feed_once` asks the throttle for room, lets the strategy pick a
source among those with a batch ready, takes the batch from that source's
buffer (memory only), claims it in the ledger (a keyset range by
compare-and-set of the source's high-water mark, other sources key by key)
and dispatches it. It runs on the loop's thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from config.errors import ClaimConflict, SourceError
from config.faults import crash_point
from config.models import SluiceConfig
from config.sources import walks_ranges
from scheduler.batch_size import BatchSizer
from scheduler.inflight import BatchesInFlight
from scheduler.ledger import Checkpoint, Ledger
from scheduler.order import FirstPasses
from scheduler.stats import RunStats
from scheduler.strategy import Node, build_strategy
from scheduler.stream_claims import claim_stream
from scheduler.throttle import Throttle
from sinks.abc import Sink
from sources.abc import Item
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from sources.stream import StreamSource
from spark_jobs.common.manifest import Manifest

# The loop's logger: these lines are the loop's, as they were before this module existed.
log = logging.getLogger("sluice.loop")

# Seconds a source rests after its database failed to count the rows left to claim.
_REST = 1.0


BURST = 8
"""The most batches one tick feeds (a Spark job takes up to 8 small batches together)."""


class Feeder:
    """Feeds one batch at a time from the buffers to the sink, through the ledger.

    ``checkpoints`` is the loop's own dict: a range claim moves a source's
    high-water mark in it. ``sizes`` says how many rows each source's next
    batch may hold (``batch.max_items``, or less where it adapts).
    """

    def __init__(
        self,
        cfg: SluiceConfig,
        queues: Mapping[str, QueueingLimitedSource],
        strategy: Node,
        ledger: Ledger,
        sink: Sink,
        checkpoints: dict[str, Checkpoint],
        *,
        throttle: Throttle,
        inflight: BatchesInFlight,
        stats: RunStats,
        sizes: BatchSizer,
        order: FirstPasses,
        stocked: Callable[[], list[str]],
    ) -> None:
        self.cfg = cfg
        self._stocked = stocked  # the sources whose buffers hold items, in their order
        self.order = order
        self.sizes = sizes
        self.queues = queues
        self.strategy = strategy
        self.ledger = ledger
        self.sink = sink
        self.checkpoints = checkpoints
        self.throttle = throttle
        self.inflight = inflight
        self.stats = stats
        # Sources whose mark (``checkpoints``) another daemon set: our walk's
        # ranges may lie below it, so the source counts our rows past it.
        self._marked_by_others: set[str] = set()
        self._rest_until: dict[str, float] = {}  # throttle.clock() until which a source rests

    def reconfigure(self, cfg: SluiceConfig) -> None:
        """Take a new config's batch sizes and a new strategy built from it."""
        self.cfg = cfg
        self.strategy = build_strategy(cfg)
        self.order.reconfigure(cfg)

    burst = BURST  # the most batches one call feeds (a test of turns feeds one at a time)

    def feed_once(self) -> bool:
        """Feed the batches there is room for (up to :attr:`burst`), each from the source the
        strategy picks among those with one ready; False: none fed."""
        room = self.throttle.room()
        # Who is ready is found once for several batches: with 1,000 small tables, finding
        # it took the loop longer than claiming a batch.
        ready = {n: self.queues[n].buffered for n in self._stocked() if self._may_feed(n, room)}
        fed = 0
        while ready and fed < self.burst:
            source = self.strategy.pick(ready)
            if source is None:
                break
            if fed and not self._may_feed(source, self.throttle.room()):
                # What stops it (no room, its database's limits) mostly stops the rest: all
                # are looked at again now, not one pick each (a pick weighs 1,000 tables).
                room, ready[source] = self.throttle.room(), 0
                ready = {name: n for name, n in ready.items() if n and self._may_feed(name, room)}
                continue
            if not self._feed(source):
                break
            fed += 1
            ready[source] = self.queues[source].buffered
            if not ready[source]:
                del ready[source]
        return fed > 0

    def _may_feed(self, name: str, room: int) -> bool:
        """There is ``room``, and source ``name`` has a batch ready that it may feed now."""
        queue = self.queues[name]
        # An empty buffer is the first look: of 1,000 tables, few have rows at any moment.
        return room > 0 and bool(queue.buffered) and self._ready(
            queue, self._wanted(name, room)) and self.inflight.admits(name) and not (
            self.order.holds(name) or self._stream_busy(name))  # fmt: skip

    def _feed(self, source: str) -> bool:
        """Take a batch of ``source``'s buffer, claim it and hand it to the sink; False when
        none was taken."""
        room = self.throttle.room()
        batch_id = uuid.uuid4().hex
        size = min(self._wanted(source, room), self.queues[source].buffered)
        share = tail_share(self.queues[source], size, self.sink.parallel,
                           walks_ranges(self.cfg.sources[source]),
                           self.inflight.importing(source), self.sizes.largest(source))
        # A range of more rows than the room goes alone when nothing else is
        # in flight: waiting would not make more room. Nor when the batch was
        # only made smaller to share a source's last rows, or by the source's
        # adaptive size (a range planned before the size fell: waiting would
        # not make it smaller).
        shrunk = self.sizes.size(source) < self._capped(source,
                                                        min(self.sizes.largest(source), room))
        # A stream's span is one transaction or one chunk or range of its full load, never
        # split: one goes even past the size (a stream has one batch of changes claimed ahead
        # at most; its load's ranges go side by side, a batch each).
        stream = isinstance(self.queues[source].wrapped, StreamSource)
        items = self.queues[source].next_batch(
            share, batch_id,
            at_least_one=self.sink.in_flight() == 0 or share < size or shrunk or stream,
        )
        if not items:
            return False
        rows = weight(items)
        try:
            manifest = self._claim(source, batch_id, items, rows)
        except SourceError as error:
            # After a lost range race the source's database counts the rows
            # left to claim; it failed: the batch waits in the buffer, and the
            # source rests a moment rather than be asked again every tick.
            log.warning("source %s: %s; claiming its batch later", source, error)
            self.queues[source].release(batch_id)
            self._rest_until[source] = self.throttle.clock() + _REST
            return False
        crash_point("after_claim")
        self.strategy.charge(source, rows)
        self.stats.items[source] = self.stats.items.get(source, 0) + rows
        if stream:
            self.stats.streams.add(source)
        if manifest is None:
            self.queues[source].ack(batch_id)
            return True
        if stream:
            self.inflight.dispatch_in_turn(manifest)
        else:
            self.inflight.dispatch(manifest, begun=True)
        self.throttle.observe()
        return True

    def _wanted(self, source: str, room: int) -> int:
        """The rows ``source``'s next batch may hold: its size, within the room and its rate."""
        return self._capped(source, min(self.sizes.size(source), room))

    def _capped(self, source: str, want: int) -> int:
        """``want``, or less when the source's database limits its rows per second."""
        cap = self.inflight.batch_cap(source)
        return want if cap is None else min(want, cap)

    def _stream_busy(self, source: str) -> bool:
        """A stream source's batches apply in the stream's order, one after another (see
        :mod:`scheduler.stream_claims`): the next one is claimed while one imports, and
        waits for it (:meth:`BatchesInFlight.dispatch_in_turn`)."""
        stream = isinstance(self.queues[source].wrapped, StreamSource)
        return stream and self.inflight.has_next(source)

    def _ready(self, queue: QueueingLimitedSource, want: int) -> bool:
        """A source has a batch ready: a full one, or a partial one that may not wait."""
        buffered = queue.buffered
        if buffered == 0 or (self._rest_until and self._resting(queue.name)):
            return False
        if buffered >= want or queue.full:
            return True
        if isinstance(queue.wrapped, StreamSource):
            # One batch of a stream is claimed ahead at most (_stream_busy): what came while
            # the one before it imported goes now, together; waiting would only add lag.
            return True
        if queue.at_end and not queue.refilling:
            return True  # no more is coming soon: waiting would only delay
        age = queue.oldest_age()
        return age is not None and age >= self.cfg.batch.max_wait

    def _resting(self, source: str) -> bool:
        """Whether ``source`` rests after its database failed a count (see :meth:`feed_once`)."""
        return self.throttle.clock() < self._rest_until.get(source, 0.0)

    def _claim(self, source: str, batch_id: str, items: list[Item], rows: int) -> Manifest | None:
        src_cfg = self.cfg.sources[source]
        if walks_ranges(src_cfg):
            return self._claim_range(source, src_cfg.target, batch_id, items, rows)
        if isinstance(wrapped := self.queues[source].wrapped, StreamSource):
            return claim_stream(self.ledger, wrapped, self.checkpoints, batch_id, items)
        keys = [key_values(item) for item in items]
        versions = [item.version for item in items]
        payloads = [item.payload for item in items] if src_cfg.kind == "sqs" else None
        for _ in range(5):
            try:
                return self.ledger.claim_keys(
                    batch_id, source, src_cfg.target, keys, versions=versions,
                    payloads=payloads, begin=True,
                )
            except ClaimConflict:
                # Another daemon inserted some of these keys between our look-up
                # and our insert; the next look-up skips them.
                log.info("source %s: lost a key claim race; claiming the rest", source)
        raise ClaimConflict(f"source {source!r}: lost the key claim five times in a row")

    def _claim_range(
        self, source: str, target: str, batch_id: str, items: list[Item], rows: int
    ) -> Manifest | None:
        """Claim ``(high-water, last key]`` (``rows`` rows) by compare-and-set on the mark.

        ``items`` are adjacent ranges of our walk. While the mark is ours (the
        one the walk resumed from, or our last claim) they follow it, and the
        compare-and-set alone decides: no key is compared. When another
        daemon walks the same table its claims move the mark under us: once a
        compare-and-set is lost, the mark is theirs, and until we claim again
        the source says how many rows of ours lie past it (only the source
        knows its key order: a text key's collation sorts 'a' before 'B',
        Python does not). We claim ``(their mark, last key]`` with those rows,
        or drop the batch when none is left (their batches hold it; our walk
        keeps going forward, so nothing is skipped).
        """
        hi = key_values(items[-1])
        for _ in range(5):
            checkpoint = self.checkpoints[source]
            if source in self._marked_by_others:
                rows = self._rows_past(source, checkpoint.high_water, items)
                if rows == 0:
                    return None  # all of it claimed by another daemon already
            try:
                manifest, self.checkpoints[source] = self.ledger.claim_range(
                    batch_id, source, target, checkpoint, hi, rows, begin=True
                )
            except ClaimConflict:
                self.checkpoints[source] = self.ledger.sources.checkpoint(source)
                self._marked_by_others.add(source)
                log.info("source %s: another daemon claimed up to %s; claiming above it",
                         source, self.checkpoints[source].high_water)
            else:
                self._marked_by_others.discard(source)
                return manifest
        raise ClaimConflict(f"source {source!r}: lost the range claim five times in a row")

    def _rows_past(self, source: str, mark: list[Any] | None, items: list[Item]) -> int:
        """Rows of the batch ``items`` past ``mark``, in the source's key order.

        A SQL source's database counts them (one query over the key's index,
        up to the batch's last key). An in-memory source (the tests' fake)
        hands its keys out in Python's order, so Python may compare them.
        """
        after = None if mark is None else tuple(mark)
        wrapped = self.queues[source].wrapped
        if isinstance(wrapped, SqlSource):
            return wrapped.rows_between(after, tuple(key_values(items[-1])))
        return weight([i for i in items if after is None or tuple(key_values(i)) > after])


def weight(items: list[Item]) -> int:
    """Rows in ``items``: one per key, a range's own count for a range."""
    return sum(item.rows for item in items)


def key_values(item: Item) -> list[Any]:
    """An item's key as the list of its column values (how manifests carry keys)."""
    return list(item.key) if isinstance(item.key, tuple) else [item.key]


def tail_share(
    queue: QueueingLimitedSource, size: int, parallel: int, walks: bool, importing: int,
    largest: int,
) -> int:  # fmt: skip
    """The size of the next batch of ``queue``'s source: ``size``, less at its end.

    Once a keyset walk's (``walks``) last rows are buffered, one full batch after
    another would leave the last one importing alone while the sink could run
    ``parallel`` imports: the rest is split among them instead (shrinking as slots
    free up), down to a quarter of its ``largest`` batch. The source's rows still
    ``importing`` count half (half done, on average): a slot that frees up beside
    one that just took a full batch takes a matching share, not half of what is left
    while the other slot's batch runs on alone. Not for sources whose end is only for
    now (incremental, sweep, SQS): a trickle of changes would be split too.
    """
    if parallel < 2 or not walks or not queue.at_end or queue.refilling:
        return size
    share = -(-(queue.buffered + importing // 2) // parallel)
    return min(size, max(share, largest // 4, 1))
