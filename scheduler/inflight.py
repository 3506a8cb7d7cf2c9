"""The batches the main loop handed to the sink, and how each one's end is recorded.

:meth:`BatchesInFlight.dispatch` runs on the loop's thread; :meth:`BatchesInFlight._on_done`
runs on the sink's threads when an import ends. It writes the end to the
ledger, releases the batch's items from their buffer, counts it in the run's
stats and wakes the loop. :meth:`BatchesInFlight.drain` is the wait for in-flight
batches when the loop stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace

from config.errors import ClaimConflict, SinkUnavailable
from config.faults import crash_point
from config.models import RetryConfig
from scheduler.batch_size import BatchSizer
from scheduler.ledger import Ledger
from scheduler.stats import RunStats
from scheduler.turns import StreamTurns
from sinks.abc import Sink
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource
from sources.reach import Away
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult

# The loop's logger: these lines are the loop's, as they were before this module existed.
log = logging.getLogger("sluice.loop")


class BatchesInFlight:
    """Batches submitted to the sink and not yet ended; thread-safe.

    ``die`` stops the loop and wakes it (no batch can import); ``halt`` stops
    it without waking it, for a ledger that failed while a batch ended: the
    sink thread wakes the loop itself once it has let go of the batch.
    ``retry`` is the loop's current retry config (the loop replaces it on a
    reload). ``sizes`` learns how long each batch's import took.
    """

    def __init__(
        self,
        ledger: Ledger,
        sink: Sink,
        queues: Mapping[str, QueueingLimitedSource],
        stats: RunStats,
        retry: RetryConfig,
        wake: threading.Event,
        *,
        die: Callable[[BaseException], None],
        halt: Callable[[BaseException], None],
        budgets: Budgets | None = None,
        sizes: BatchSizer | None = None,
    ) -> None:
        self.ledger = ledger
        self.sizes = sizes
        self.sink = sink
        self.queues = queues
        self.stats = stats
        self.retry = retry
        self.wake = wake
        self._die = die
        self._halt = halt
        self._lock = threading.Lock()  # sink threads remove the batches that end
        self._inflight: dict[str, Manifest] = {}
        self.budgets = budgets
        # Source databases found away after their batches failed (a source's URL changes
        # only with a restart).
        self.away: Away | None = Away(lambda name: _url_of(self.queues.get(name)))
        # Batches that must run (retries, takeovers, orphans) waiting for
        # their source database's limits to admit them; the loop's thread only.
        self._waiting: dict[str, Manifest] = {}  # by batch id, oldest first
        # A stream's next batch, claimed while the one before it imports: it goes to the sink
        # as soon as that one is in the target (held there; in _inflight too).
        self._turns = StreamTurns()

    def busy(self) -> bool:
        """Whether any batch is still importing, or waiting for its database's limits."""
        with self._lock:
            return bool(self._inflight) or bool(self._waiting)

    def admits(self, source: str) -> bool:
        """Whether ``source``'s database's limits let one more batch be dispatched now.

        Under a rate, only while an import slot is free: a batch queued in
        the sink would be read later, right after the one before it, faster
        than the rate.
        """
        if self.budgets is None:
            return True
        rated = self.budgets.batch_cap(source) is not None
        if rated and self.sink.in_flight() >= self.sink.parallel:
            return False
        return self.budgets.admits(source)

    def batch_cap(self, source: str) -> int | None:
        """Most rows a batch of ``source`` may hold under its database's rate (None: no bound)."""
        return None if self.budgets is None else self.budgets.batch_cap(source)

    def dispatch_waiting(self) -> None:
        """Dispatch the waiting batches that the limits admit now, in order."""
        for batch_id, manifest in list(self._waiting.items()):
            if self.admits(manifest.source):
                del self._waiting[batch_id]
                self.dispatch(manifest)

    def holds(self, batch_id: str) -> bool:
        """Whether ``batch_id`` is importing here already, or waiting to."""
        with self._lock:
            return batch_id in self._inflight or batch_id in self._waiting

    def importing(self, source: str) -> int:
        """Rows of ``source``'s batches still importing."""
        with self._lock:
            return sum(m.items for m in self._inflight.values() if m.source == source)

    def has_next(self, source: str) -> bool:
        """Whether stream ``source`` may claim no batch now (:meth:`StreamTurns.holds`)."""
        with self._lock:
            return self._turns.holds(source)

    def dispatch_in_turn(self, manifest: Manifest) -> None:
        """Hand a stream's claimed batch to the sink once its source's batch before it is in
        the target (:meth:`_release_next`), now when none imports: claimed meanwhile and
        started as that one commits, the claim and the ledger's record of the end are off
        the stream's path."""
        with self._lock:
            before = [m.batch_id for m in self._inflight.values() if m.source == manifest.source]
            if self._turns.waits(manifest, before):
                self._inflight[manifest.batch_id] = manifest
                return
        self.dispatch(manifest, begun=True)

    def _release_next(self, source: str, after: Manifest, *, applied: bool) -> None:
        """The batch of ``source`` that waited for ``after``, which just ended: submitted when
        ``after`` is in the target (``applied``); else it waits in the ledger for its turn,
        failed without running and its attempt not counted, and runs as a retry."""
        with self._lock:
            others = [m.batch_id for m in self._inflight.values() if m.source == source]
            manifest = self._turns.go_on(source, after.batch_id, others, applied=applied)
            if manifest is None:
                return
            del self._inflight[manifest.batch_id]
        try:
            if applied:
                self.dispatch(manifest, begun=True)
                return
            self.ledger.fail(manifest.batch_id, f"batch {manifest.batch_id} of stream {source} "
                             f"waits for batch {after.batch_id} before it, which failed",
                             self.retry, token=manifest.token, counted=False)  # fmt: skip
        except Exception as error:  # a sink that stops, a ledger away: the ledger holds it
            log.warning("batch %s of %s not started (%s); it is claimed in the ledger and "
                        "taken up again", manifest.batch_id, source, error)  # fmt: skip

    def dispatch(self, manifest: Manifest, *, begun: bool = False) -> None:
        """Hand a batch to the sink; ``begun``: it was claimed as importing already.

        A batch not begun waits (:meth:`dispatch_waiting`) while its source
        database's limits do not admit it; it is begun in the ledger when it goes.
        """
        if not begun and (manifest.batch_id in self._waiting or not self.admits(manifest.source)):
            # A retry is due again each second until it goes: it waits once.
            self._waiting.setdefault(manifest.batch_id, manifest)
            return
        try:
            started = manifest if begun else self.ledger.begin(manifest.batch_id)
        except ClaimConflict as conflict:
            log.info("batch %s taken by another daemon: %s", manifest.batch_id, conflict)
            return
        parts = None if self.budgets is None else self.budgets.take(started.source, started.items)
        if parts is not None:
            started = replace(started, read_parts=parts)
        with self._lock:
            self._inflight[started.batch_id] = started
        if self.stats.first_batch_at is None:
            # Any batch: one resumed or retried at start is the run's first too.
            self.stats.first_batch_at = time.monotonic()
        try:
            future = self.sink.submit(started)
        except BaseException:
            with self._lock:
                self._inflight.pop(started.batch_id, None)
            if parts is not None and self.budgets is not None:
                self.budgets.give_back(started.source, parts)
            raise
        future.add_done_callback(lambda f, m=started: self._on_done(m, f))  # type: ignore[misc]

    def drain(self, timeout: float | None) -> None:
        """Wait for in-flight batches to end (they are recorded by ``_on_done``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._inflight:
                    return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                log.warning("stopping with %d batches still importing", len(self._inflight))
                return
            self.wake.wait(0.5 if remaining is None else min(0.5, remaining))
            self.wake.clear()

    def _on_done(self, manifest: Manifest, future: Future[ImportResult]) -> None:
        """Runs on a sink thread when an import ends."""
        error: BaseException | None = None
        try:
            error = future.exception()
            queue = self.queues.get(manifest.source)
            if error is None:
                result = future.result()
                # In the target: a stream's next batch may apply on top of it now, before
                # the ledger hears of this one (a restart reconciles from the target).
                with self._lock:
                    self._turns.ended(manifest, ok=True)
                self._release_next(manifest.source, manifest, applied=True)
                rejected = getattr(result, "rows_rejected", 0)
                _observe(self.sizes, manifest, result, None)
                crash_point("before_ledger_done")
                zeros = getattr(result, "zero_dates", None) or {}
                self.ledger.finish(manifest.batch_id, result.rows_written, rejected,
                                   token=manifest.token, zero_dates=zeros)
                if queue is not None:
                    queue.ack(manifest.batch_id)
                if self.away is not None:
                    self.away.succeeded(manifest.source)
                with self._lock:
                    s = self.stats
                    s.batches_done += 1
                    s.rows_rejected += rejected
                    for column, count in zeros.items():
                        name = f"{manifest.source}.{column}"
                        s.zero_dates[name] = s.zero_dates.get(name, 0) + count
                    s.rows_by_source[manifest.source] = (
                        s.rows_by_source.get(manifest.source, 0) + result.rows_written
                    )
                    s.rows_by_target[manifest.target] = (
                        s.rows_by_target.get(manifest.target, 0) + result.rows_written
                    )
                log.debug("batch %s done: %d rows", manifest.batch_id, result.rows_written)
            else:
                _observe(self.sizes, manifest, None, error)
                unavailable = isinstance(error, SinkUnavailable)
                waits = getattr(error, "waits", False)  # a stream's batch before its turn
                with self._lock:
                    self._turns.ended(manifest, ok=False, waits=waits)
                state = self.ledger.fail(manifest.batch_id, str(error), self.retry,
                                         token=manifest.token,
                                         counted=not (unavailable or waits),
                                         permanent=getattr(error, "permanent", False))
                # A stream's batch before its turn is an ordering wait, not a fault.
                log.log(logging.INFO if waits else logging.WARNING, "batch %s of %s %s: %s",
                        manifest.batch_id, manifest.source, state, error)  # fmt: skip
                if self.away is not None and getattr(error, "transient", True) and not waits:
                    self.away.failed(manifest.source)  # is its database there?
                if unavailable:
                    log.critical("no batch can import: %s", error)
                    self._die(error)
                with self._lock:
                    if state == "dead":
                        self.stats.batches_dead += 1
                        if queue is not None:
                            queue.ack(manifest.batch_id)  # the ledger keeps it for `retry`
                    else:
                        self.stats.batches_failed += 1
        except ClaimConflict as conflict:
            # Our lease ran out and another daemon took the batch over (and
            # may have finished it): it is theirs now; we go on.
            log.warning("batch %s was taken over by another daemon: %s",
                        manifest.batch_id, conflict)
            _let_go(self.queues, self.ledger, manifest)
        except BaseException as failure:  # the ledger itself failed: stop loudly
            log.critical("cannot record the end of batch %s: %s", manifest.batch_id, failure)
            self._halt(failure)
        finally:
            with self._lock:
                self._inflight.pop(manifest.batch_id, None)
            # What was held behind it since (after the release above, before the pop): on.
            self._release_next(manifest.source, manifest, applied=error is None)
            if self.budgets is not None and manifest.read_parts is not None:
                self.budgets.give_back(manifest.source, manifest.read_parts)
            self.wake.set()


def _url_of(queue: QueueingLimitedSource | None) -> str | None:
    """The database of a SQL source's buffer (None for a queue of messages)."""
    cfg = getattr(getattr(queue, "wrapped", None), "cfg", None)
    url = getattr(cfg, "url", None)
    return url if isinstance(url, str) else None


def _observe(
    sizes: BatchSizer | None, manifest: Manifest, result: ImportResult | None,
    error: BaseException | None,
) -> None:  # fmt: skip
    """Tell the batch sizer how the import went.

    A batch already committed (skipped) was not imported; an error a
    retry cannot help (a bad expression) or a sink that cannot run any
    import says nothing about the target's pace.
    """
    if sizes is None or not sizes.adaptive:
        return
    try:
        if error is None:
            if not getattr(result, "skipped", False):
                seconds = getattr(result, "seconds", None)
                sizes.observe(manifest.source, manifest.items, seconds)
        elif getattr(error, "transient", True) and not isinstance(error, SinkUnavailable):
            sizes.observe(manifest.source, manifest.items, None, ok=False)
    except Exception:  # sizing is advice: the batch's end must still reach the ledger
        log.exception("source %s: cannot adapt its batch size", manifest.source)


def _let_go(
    queues: Mapping[str, QueueingLimitedSource], ledger: Ledger, manifest: Manifest
) -> None:
    """Stop holding the items of a batch another daemon took over.

    Done by them: our items are done too (SQS: their messages are
    deleted). Still theirs to import: the items go back to the source
    (SQS: visible again; a redelivery finds the key held by their batch
    and is left invisible, and deleted once that batch is done), so
    nothing stays held here for good.
    """
    queue = queues.get(manifest.source)
    if queue is None:
        return
    try:
        done = ledger.reads.state_of(manifest.batch_id) == "done"
    except Exception as error:  # a read failing here must not stop the loop
        log.warning("batch %s: cannot read its state (%s); giving its items back",
                    manifest.batch_id, error)
        done = False
    if done:
        queue.ack(manifest.batch_id)
    else:
        queue.release(manifest.batch_id, to_source=True)
