"""The refills of one buffer: when they run, on which thread, and what a failing one does.

A :class:`RefillWorker` runs the reads behind a
:class:`~sources.queueing.QueueingLimitedSource`, one at a time and never on
the scheduler's path, and keeps the record of their errors for its health.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from config.errors import SourceError
from config.retrying import Backoff
from sources.abc import Item, LimitedSource

# The buffer's logger: a refill's lines are the buffer's, and operators filter on its name.
log = logging.getLogger("sources.queueing")


class RefillWorker:
    """Runs ``source``'s reads into a buffer, one at a time, and retries failing ones.

    The buffer decides *whether* a refill is due (:meth:`claim`, under its
    lock) and says how much room there is (``room``, called under the lock);
    the worker runs the read (``source.next_batch(room)``, no lock held) and
    hands the result to ``filled``, which stores it and calls
    :meth:`succeeded` under the lock. ``on_refill`` is called after every
    refill, successful or not.

    A failed read is retried after a jittered backoff. One whose error has a
    ``transient`` attribute of False counts towards ``max_permanent_failures``
    (a success resets the count; transient errors, and exceptions without the
    attribute, do not add to it). At that count no more refills run,
    :attr:`failure` holds the error and ``on_failed`` is called once, on the
    refill thread.

    Refills run on ``executor`` (any object with ``submit``) or, by default,
    on one daemon thread, started by :meth:`start` and woken by an event:
    starting a thread waits until it runs, milliseconds when the GIL is busy,
    so none is ever started on the scheduler's path; and a daemon thread stuck
    in I/O cannot hold up interpreter exit. Nothing runs before :meth:`start`
    or after :meth:`stop`.

    Its state (flags, timer, error record) is guarded by ``lock``, the
    buffer's own: whether a refill may start depends on the buffer's fill and
    the worker's state together, so one lock covers both.
    """

    def __init__(
        self,
        source: LimitedSource,
        lock: threading.Lock,
        *,
        room: Callable[[], int],
        filled: Callable[[list[Item], bool], None],
        executor: Executor | None,
        on_refill: Callable[[], None] | None,
        on_failed: Callable[[SourceError], None] | None,
        max_permanent_failures: int,
        backoff: Backoff,
        rng: random.Random,
    ) -> None:
        self.name = source.name
        self._source = source
        self._lock = lock
        self._room = room
        self._filled = filled
        self._executor = executor
        self._on_refill = on_refill
        self._on_failed = on_failed
        self._max_permanent = max_permanent_failures
        self._backoff = backoff
        self._rng = rng
        self._idle = threading.Event()  # set while no source.next_batch call runs
        self._idle.set()
        self._started = False
        self._stopped = False
        self._busy = False  # a refill is running or its retry is scheduled
        self._timer: threading.Timer | None = None
        self._wake = threading.Event()  # a refill is due (or a stop): the worker runs
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.consecutive_errors = 0
        self._permanent = 0  # not-transient errors since the last successful refill
        self.failure: SourceError | None = None
        self.last_error: str | None = None
        self.failing_since: float | None = None  # time.monotonic() of the first error in a row
        self.last_refill_at: float | None = None  # clock() of the last successful refill
        self.begun = 0  # refills begun so far (each read's number)
        self.last_ok_begun = 0  # the number of the last read that succeeded
        self._running = 0  # the number of the read running now
        self.at_end = False  # the last successful refill reached the end of the source

    @property
    def busy(self) -> bool:
        """A refill runs or its retry is scheduled."""
        return self._busy

    def start(self, claim_first: Callable[[], bool]) -> None:
        """Start the worker and, if ``claim_first()`` (under the lock) says so, a refill.

        Calling it again does nothing.
        """
        with self._lock:
            if self._started:
                return
            self._started = True
            go = claim_first()
        if self._executor is None:
            self._thread = threading.Thread(
                target=self._work, name=f"refill-{self.name}", daemon=True
            )
            self._thread.start()
        if go:
            self.launch()

    def claim(self) -> bool:
        """Under the lock: mark a refill started unless that cannot be; return whether it was.

        It cannot before :meth:`start`, after :meth:`stop`, while a refill
        runs or waits to retry, or once refills were given up.
        """
        if not self._started or self._stopped or self._busy or self.failure is not None:
            return False
        self._busy = True
        return True

    def launch(self) -> None:
        """Run the refill :meth:`claim` marked started. Never blocks."""
        if self._executor is None:
            self._wake.set()  # cheap: the worker thread already exists
            return
        try:
            self._executor.submit(self._refill)
        except RuntimeError:  # executor shut down, or no more threads
            log.exception("%s: could not start a refill", self.name)
            with self._lock:
                self._busy = False

    def succeeded(self, now: float, exhausted: bool) -> bool:
        """Under the lock, once a read returned: the refill is over.

        Returns False when a stop came meanwhile: nothing is recorded and
        what was read is the buffer's to give back. Otherwise the error
        counts start again, the refill counts as the last at ``now`` and
        :attr:`at_end` becomes ``exhausted`` (the source's, after the read).
        """
        self._idle.set()
        self._busy = False
        if self._stopped:
            return False
        self.last_ok_begun = self._running
        self.consecutive_errors = 0
        self.failing_since = None
        self._permanent = 0
        self.last_refill_at = now
        self.at_end = exhausted
        return True

    def stop(self, timeout: float | None = None) -> bool:
        """Stop refilling: cancel a pending retry at once, wait up to ``timeout``.

        Returns True when no ``source.next_batch`` call is still running.
        """
        with self._lock:
            self._stopped = True
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()  # its retry will not run: nothing is refilling now
                self._busy = False
        self._wake.set()  # an idle worker wakes up and ends
        return self._idle.wait(timeout)

    def _work(self) -> None:
        """The default refill thread: one refill per wake-up until stopped."""
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            self._refill()  # returns at once after a stop (and clears _busy)

    def _refill(self) -> None:
        with self._lock:
            room = self._room()
            if self._stopped or room <= 0:
                self._busy = False
                return
            self._idle.clear()
            self.begun += 1
            self._running = self.begun
        try:
            items = self._source.next_batch(room)
            exhausted = self._source.exhausted
        except Exception as exc:
            self._failed(exc)
        else:
            self._filled(items, exhausted)
        self._notify()

    def _failed(self, exc: Exception) -> None:
        failure: SourceError | None = None
        with self._lock:
            self._idle.set()
            self.errors += 1
            self.consecutive_errors += 1
            if self.failing_since is None:
                self.failing_since = time.monotonic()
            self.last_error = f"{type(exc).__name__}: {exc}"
            # Only an error the source itself calls permanent counts: an
            # unknown one may be a network hiccup, retried as long as it lasts.
            if getattr(exc, "transient", True) is False:
                self._permanent += 1
            if self._stopped:
                self._busy = False
                delay = None
            elif self._permanent >= self._max_permanent:
                # The source refuses the same read every time: retrying for
                # ever would hide the problem (and never let a drain end).
                failure = SourceError(
                    f"source {self.name}: refill failed {self._permanent} times: {exc}"
                )
                failure.transient = False
                self.failure = failure
                self._busy = False
                delay = None
            else:
                # Jittered: spread retries of many sources hitting one dead server.
                delay = self._backoff.delay(self.consecutive_errors, self._rng)
                self._timer = threading.Timer(delay, self._retry)
                self._timer.daemon = True
                self._timer.start()
        if failure is not None:
            then = "not retried: the source refuses the read"
        else:
            then = "stopping, no retry" if delay is None else f"retry in {delay:.2f} s"
        log.warning(
            "%s: refill failed (%d in a row), %s: %s",
            self.name,
            self.consecutive_errors,
            then,
            self.last_error,
        )
        if failure is not None and self._on_failed is not None:
            try:
                self._on_failed(failure)
            except Exception:
                log.exception("%s: on_failed callback failed", self.name)

    def _retry(self) -> None:
        with self._lock:
            self._timer = None
            if self._stopped:
                self._busy = False
                return
        self.launch()

    def _notify(self) -> None:
        if self._on_refill is not None:
            try:
                self._on_refill()
            except Exception:
                log.exception("%s: on_refill callback failed", self.name)
