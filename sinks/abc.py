"""The sink interface: how a claimed batch reaches an import job.

The main loop hands a batch to a sink and moves on; the sink runs the import
somewhere else (a thread driving a SparkSession, a ``spark-submit``) and
reports through the returned future. The backpressure gate reads
:meth:`Sink.pending_items` to decide whether to feed more.
"""

from __future__ import annotations

import abc
import itertools
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult


class SinkClosed(RuntimeError):
    """A batch was submitted to a sink that is closed or closing."""


class Sink(abc.ABC):
    """Runs import jobs; thread-safe.

    - :meth:`submit` never waits for the import: it queues the batch and
      returns a future at once (it may block briefly on a lock, never on I/O).
    - The future resolves to an :class:`ImportResult` once the target commit
      is done, or raises the import's error (a ``SluiceError`` whose
      ``transient`` says whether a retry can help). A batch whose rows the
      target partly refused is done: ``rows_rejected`` counts the refused
      rows (in ``_sluice_rejects``), and the run must end with exit code 1. Callbacks added with
      ``add_done_callback`` run after :meth:`in_flight` and
      :meth:`pending_items` stopped counting the batch.
    - Submitting the same batch id twice runs it twice; imports are
      idempotent per batch id, so that is safe, merely wasteful.

    ``parallel``: how many imports run at once (more may be queued); the
    loop splits the last rows of a source among them. ``ready_at``: the
    monotonic time the sink could first run an import, None while it is
    still starting (a JVM); rates are measured from then on.
    """

    parallel: int = 1
    ready_at: float | None = 0.0

    @abc.abstractmethod
    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        """Queue the batch's import; raise :class:`SinkClosed` after :meth:`close`."""

    @abc.abstractmethod
    def in_flight(self) -> int:
        """Batches submitted and not finished (queued or running). Never blocks."""

    @abc.abstractmethod
    def pending_items(self) -> int:
        """Items in batches submitted and not finished. Never blocks."""

    @abc.abstractmethod
    def close(self, wait: bool = True) -> None:
        """Stop accepting batches.

        ``wait=True`` blocks until every submitted batch has finished.
        ``wait=False`` cancels queued batches (their futures are cancelled),
        asks running ones to stop, and returns without waiting. Idempotent.
        """


class PoolSink(Sink):
    """A sink that runs imports on a bounded thread pool; subclasses write ``_run``.

    Keeps the bookkeeping the gate reads (batches and items in flight) and
    hands each batch a ticket (0, 1, …) that subclasses use to name it.

    Batches wait in a queue of the sink's own until a pool thread is free.
    A subclass whose imports can share one job (one Spark job reading and
    loading several batches, a task each: the job's fixed cost paid once)
    gives such batches the same :meth:`_group_key` and writes
    :meth:`_run_group`: a thread that frees up then takes the first batch
    waiting and every later one of its group, up to :attr:`max_group`. The
    other batches keep their order. Each batch still has a future of its own.
    """

    label = "sink"
    max_group = 1
    """Most batches one import job takes at once (1: each batch alone)."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self.parallel = workers
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=thread_name_prefix
        )
        self._lock = threading.Lock()
        self._pending: dict[int, Manifest] = {}
        self._queue: deque[_Queued] = deque()
        self._seq = itertools.count()
        self._closed = False

    @abc.abstractmethod
    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        """Import one batch on a pool thread; may block for as long as it takes."""

    def _group_key(self, manifest: Manifest) -> Hashable | None:
        """Batches with the same key (not None) may be imported by one :meth:`_run_group`."""
        return None

    def _run_group(
        self, tickets: list[int], manifests: list[Manifest]
    ) -> list[ImportResult | BaseException]:
        """Import several batches of one group together; an outcome per batch, in order."""
        raise NotImplementedError(f"{type(self).__name__} does not group batches")

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        future: Future[ImportResult] = Future()
        group = self._group_key(manifest)  # may look at the target's URL: not under the lock
        with self._lock:
            if self._closed:
                raise SinkClosed(f"the {self.label} is closed")
            ticket = next(self._seq)
            self._pending[ticket] = manifest
            # Added first, so it runs before any caller's on_done callback:
            # by then the gate no longer counts this batch.
            future.add_done_callback(lambda _f: self._forget(ticket))
            self._queue.append(_Queued(ticket, manifest, future, group))
            # One turn per batch: each turn takes what waits, so no batch is
            # left behind, and a turn that finds the queue empty ends at once.
            self._executor.submit(self._turn)
        return future

    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    def pending_items(self) -> int:
        with self._lock:
            return sum(m.items for m in self._pending.values())

    def _turn(self) -> None:
        """On a pool thread: import the first batch waiting, with those of its group."""
        with self._lock:
            if not self._queue:
                return
            first = self._queue.popleft()
            taken = [first]
            if first.group is not None and self.max_group > 1:
                for queued in list(self._queue):
                    if len(taken) == self.max_group:
                        break
                    if queued.group == first.group:
                        self._queue.remove(queued)
                        taken.append(queued)
        taken = [q for q in taken if q.future.set_running_or_notify_cancel()]
        if not taken:
            return
        try:
            if len(taken) == 1:
                outcomes: list[ImportResult | BaseException] = [
                    _outcome(self._run, taken[0].ticket, taken[0].manifest)
                ]
            else:
                outcomes = self._run_group([q.ticket for q in taken], [q.manifest for q in taken])
        except BaseException as error:  # noqa: BLE001 - every batch's future learns of it
            outcomes = [error] * len(taken)
        if len(taken) == 1:
            _settle(taken[0], outcomes[0])
            return
        # A future's callbacks record its batch's end (a ledger commit among them, waited
        # for): set side by side, a group's ends reach the ledger's writer together and
        # commit in one transaction, not eight one after another.
        with ThreadPoolExecutor(len(taken), thread_name_prefix="sluice-ends") as ends:
            list(ends.map(_settle, taken, outcomes))

    def _shutdown(self, wait: bool) -> None:
        """Stop the pool: ``wait`` for every batch, or cancel those still queued."""
        if not wait:
            with self._lock:
                queued, self._queue = list(self._queue), deque()
            for entry in queued:
                entry.future.cancel()
        self._executor.shutdown(wait=wait, cancel_futures=not wait)

    def _forget(self, ticket: int) -> None:
        with self._lock:
            self._pending.pop(ticket, None)


@dataclass(frozen=True)
class _Queued:
    """A batch submitted to a :class:`PoolSink` and not yet taken by a thread."""

    ticket: int
    manifest: Manifest
    future: Future[ImportResult]
    group: Hashable | None


def _settle(queued: _Queued, outcome: ImportResult | BaseException) -> None:
    """Give a batch's future its outcome (its callbacks run here)."""
    if isinstance(outcome, BaseException):
        queued.future.set_exception(outcome)
    else:
        queued.future.set_result(outcome)


def _outcome(run: Callable[[int, Manifest], ImportResult], ticket: int, manifest: Manifest
             ) -> ImportResult | BaseException:
    try:
        return run(ticket, manifest)
    except BaseException as error:  # noqa: BLE001 - the batch's future carries it
        return error


class MemorySink(Sink):
    """An in-memory fake for tests: records the manifests it is given.

    With ``auto_complete`` (the default) every future succeeds at once with
    all items read and written. With ``auto_complete=False`` futures wait
    for :meth:`complete` or :meth:`fail`. :meth:`fail` on a batch not yet
    submitted makes it fail as soon as it arrives.
    """

    def __init__(self, auto_complete: bool = True) -> None:
        self.auto_complete = auto_complete
        self.submitted: list[Manifest] = []
        self._lock = threading.Lock()
        self._held: dict[str, tuple[Manifest, Future[ImportResult]]] = {}
        self._failures: dict[str, BaseException] = {}
        self._closed = False

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        future: Future[ImportResult] = Future()
        with self._lock:
            if self._closed:
                raise SinkClosed("the sink is closed")
            self.submitted.append(manifest)
            error = self._failures.pop(manifest.batch_id, None)
            hold = error is None and not self.auto_complete
            if hold:
                self._held[manifest.batch_id] = (manifest, future)
        future.set_running_or_notify_cancel()
        if error is not None:
            future.set_exception(error)
        elif not hold:
            future.set_result(_done(manifest))
        return future

    def complete(self, batch_id: str, result: ImportResult | None = None) -> None:
        """Finish a held batch successfully (default: every item written)."""
        with self._lock:
            manifest, future = self._held.pop(batch_id)
        future.set_result(result or _done(manifest))

    def fail(self, batch_id: str, error: BaseException | None = None) -> None:
        """Fail a held batch now, or the next submission of ``batch_id``."""
        error = error or RuntimeError(f"batch {batch_id} failed (MemorySink)")
        with self._lock:
            held = self._held.pop(batch_id, None)
            if held is None:
                self._failures[batch_id] = error
        if held is not None:
            held[1].set_exception(error)

    def held(self) -> list[str]:
        """Batch ids waiting for :meth:`complete` or :meth:`fail`, oldest first."""
        with self._lock:
            return list(self._held)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._held)

    def pending_items(self) -> int:
        with self._lock:
            return sum(manifest.items for manifest, _ in self._held.values())

    def close(self, wait: bool = True) -> None:
        """Stop accepting batches; held futures fail with :class:`SinkClosed`,
        since nobody would complete them (``wait`` changes nothing: nothing runs)."""
        with self._lock:
            self._closed = True
            held, self._held = list(self._held.values()), {}
        for _, future in held:
            # A future already marked running cannot be cancelled: fail it.
            future.set_exception(SinkClosed("the sink was closed before the batch finished"))


def _done(manifest: Manifest) -> ImportResult:
    return ImportResult(manifest.batch_id, manifest.items, manifest.items, manifest.target)
