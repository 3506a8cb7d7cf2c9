"""The ledger's single writer (the Singular Update Queue pattern).

Every ledger write is a function of a connection, queued to one thread that
runs them in groups, one transaction per group; if a request fails (a lost
compare-and-set) the group is re-run request by request, so the failure stays
with its own request while the others still commit. Callers get futures.
The queue is bounded, so a ledger that falls behind slows its callers
instead of eating memory. An unreachable ledger is waited for, up to
``grace`` seconds (:mod:`.outage`); a connection lost while committing is
settled by asking the server whether the transaction committed
(PostgreSQL); one it cannot settle, or a longer outage, kills the thread.
If the thread dies, every waiting and later request fails with the cause
and ``on_death`` is called, so the daemon stops loudly instead of limping on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import sqlalchemy as sa

from config.errors import LedgerError
from scheduler.ledger.outage import (
    CommitUnknown,
    LedgerUnreachable,
    Patience,
    ride_out,
    unreachable,
)
from scheduler.ledger.schema import WRITE_OPTION
from spark_jobs.engines import dialect_traits

log = logging.getLogger("sluice.ledger")

T = TypeVar("T")
Request = tuple[Callable[[sa.Connection], Any], "Future[Any]"]
_STOP = object()


class SerialWriter:
    """One thread that owns every write to ``engine``."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        max_queue: int = 10_000,
        max_group: int = 500,
        on_death: Callable[[BaseException], None] | None = None,
        patience: Patience | None = None,
    ) -> None:
        self.engine = engine
        self._asked = dialect_traits(engine.dialect)  # what differs between ledgers' engines
        self.patience = patience or Patience()
        self.max_group = max_group
        self.on_death = on_death
        self.failure: BaseException | None = None
        self.groups = 0  # transactions committed (for benchmarks and tests)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[sa.Connection], T]) -> Future[T]:
        """Queue ``fn(conn)``; blocks only while the queue is full."""
        if self.failure is not None:
            raise LedgerError(f"the ledger writer stopped: {self.failure}") from self.failure
        future: Future[T] = Future()
        self._queue.put((fn, future))
        return future

    def call(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run ``fn(conn)`` in the writer and wait for its result."""
        return self.submit(fn).result()

    def close(self, timeout: float = 10.0) -> None:
        """Finish the queued writes, then stop the thread."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            stopping = False
            while not stopping:
                first = self._queue.get()
                if first is _STOP:
                    break
                group: list[Request] = [first]
                while len(group) < self.max_group:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is _STOP:
                        stopping = True
                        break
                    group.append(nxt)
                self._commit(group)
        except _Died:
            return
        except BaseException as error:  # pragma: no cover - the writer itself broke
            self._die(error)

    def _commit(self, group: list[Request]) -> None:
        live = [(fn, future) for fn, future in group if future.set_running_or_notify_cancel()]
        if live:
            self._run_group(live)

    def _run_group(self, group: list[Request]) -> None:
        """One transaction for the group; if any request fails, each alone.

        Failures are rare (a lost compare-and-set), so the common case pays
        no savepoints; the rare one re-runs the group request by request so a
        failure stays with its own request.
        """
        try:
            try:
                results = ride_out(lambda: self._transaction(group), self.patience)
            except CommitUnknown as unknown:
                results = self._settle(group, unknown)
        except (CommitUnknown, LedgerUnreachable) as error:
            self._die(error, group)  # a restart reads what committed
            raise _Died from error
        except Exception as error:
            if len(group) > 1:
                for request in group:
                    self._run_group([request])
                return
            if isinstance(error, sa.exc.SQLAlchemyError) and not isinstance(
                error, sa.exc.IntegrityError
            ):
                log.error("ledger write failed: %s", error)
            group[0][1].set_exception(error)
            return
        self.groups += 1
        for (_, future), result in zip(group, results, strict=True):
            future.set_result(result)

    def _settle(self, group: list[Request], unknown: CommitUnknown) -> list[Any]:
        """The results of ``group``, whose COMMIT lost its connection.

        The server says whether the transaction committed: it did, and the
        results stand; it did not, and the group is written again (which
        may lose its COMMIT too, and is settled the same way). Raises
        ``unknown`` when the server cannot say.
        """
        results = None
        while results is None:
            xid_pid = unknown.session
            if xid_pid is None:
                raise unknown
            state = ride_out(functools.partial(self._outcome, *xid_pid), self.patience)
            if state == "committed":
                log.warning("ledger: a write's COMMIT lost its connection; it had committed")
                return unknown.results
            if state != "aborted":
                raise unknown  # the server no longer knows that transaction
            log.warning("ledger: a write's COMMIT lost its connection before it committed; "
                        "writing it again")  # fmt: skip
            try:
                results = ride_out(lambda: self._transaction(group), self.patience)
            except CommitUnknown as again:
                unknown = again
        return results

    def _outcome(self, xid: int, pid: int) -> str | None:
        """Whether transaction ``xid`` committed: 'committed', 'aborted' or None (unknown).

        While its server process has not yet seen its connection go, it is
        still in progress: that process (our own session, found by its
        transaction) is ended first, which aborts it.
        """
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            return self._asked.commit_outcome(conn, (xid, pid), self.patience.sleep)

    def _transaction(self, group: list[Request]) -> list[Any]:
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            transaction = conn.begin()
            session = None
            try:
                # Known before the COMMIT: the server may be asked about it after.
                session = self._asked.transaction_session(conn)
                results = [fn(conn) for fn, _ in group]
            except BaseException:
                with contextlib.suppress(sa.exc.SQLAlchemyError):  # a lost connection has none
                    transaction.rollback()
                raise
            try:
                transaction.commit()
            except sa.exc.DBAPIError as error:
                # SQLite commits locally or not at all; a server may have
                # committed what it could not acknowledge.
                if unreachable(error) and not self._asked.file_database:
                    raise CommitUnknown(
                        "the ledger's connection was lost while a write committed; whether it "
                        f"did is unknown, so this daemon stops (a restart reads it): {error.orig}",
                        session, results,
                    ) from error
                raise
        return results

    def _die(self, error: BaseException, group: list[Request] | None = None) -> None:
        """Fail ``group`` and every queued request, once ``on_death`` has heard of it:
        a caller that sees its request fail finds the daemon already stopping."""
        self.failure = error
        log.critical("the ledger writer died: %s", error)
        if self.on_death is not None:
            self.on_death(error)
        for _, future in group or []:
            future.set_exception(error)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item[1].set_exception(LedgerError(f"the ledger writer stopped: {error}"))


class _Died(Exception):
    """The writer thread ends: :meth:`SerialWriter._die` has been called."""
