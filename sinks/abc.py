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
from concurrent.futures import Future, ThreadPoolExecutor

from spark_jobs.import_job import ImportResult
from spark_jobs.manifest import Manifest


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
    """

    label = "sink"

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self.parallel = workers
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=thread_name_prefix
        )
        self._lock = threading.Lock()
        self._pending: dict[int, Manifest] = {}
        self._seq = itertools.count()
        self._closed = False

    @abc.abstractmethod
    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        """Import one batch on a pool thread; may block for as long as it takes."""

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        with self._lock:
            if self._closed:
                raise SinkClosed(f"the {self.label} is closed")
            ticket = next(self._seq)
            self._pending[ticket] = manifest
            future = self._executor.submit(self._run, ticket, manifest)
        # Added first, so it runs before any caller's on_done callback: by
        # then the gate no longer counts this batch.
        future.add_done_callback(lambda _f: self._forget(ticket))
        return future

    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    def pending_items(self) -> int:
        with self._lock:
            return sum(m.items for m in self._pending.values())

    def _forget(self, ticket: int) -> None:
        with self._lock:
            self._pending.pop(ticket, None)


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
