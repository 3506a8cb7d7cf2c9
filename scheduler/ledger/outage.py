"""Riding out a ledger that goes away for a while (a restart, a failover, a network cut).

A daemon's reads and writes of the ledger are retried with backoff while the
database is unreachable, for up to ``ledger_outage`` (:data:`GRACE`) seconds; the loop and the
imports wait meanwhile (nothing can be claimed or recorded without the
ledger), and go on where they were once it is back. Only errors
:func:`config.errors.is_transient` calls transient are retried: a refused
query fails at once. A write whose connection is lost while it commits
(:class:`CommitUnknown`) is settled by asking PostgreSQL, once it answers
again, whether that transaction committed: committed, it stands; not, it is
written again. Where the server cannot say (another database, a transaction
id too old to know), the daemon stops so that a restart reads the truth
from the ledger. Commands
an operator runs (``status``, ``plan``) do not wait: they report the error.
A stop asked during an outage ends every wait at once (:meth:`Patience.stop_waiting`):
the drain waits for the imports in flight, not for the ledger; what their
ends could not record, the next run reconciles from the target.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

from config.errors import LedgerError, is_transient
from config.retrying import Backoff, retrying

log = logging.getLogger("sluice.ledger")

T = TypeVar("T")
GRACE = 600.0
"""Seconds the ledger may stay unreachable before the daemon gives up on it
(the default of the config's ``ledger_outage``)."""
BACKOFF = Backoff(0.25, 10.0, jitter=True)


class CommitUnknown(LedgerError):
    """The connection was lost while a ledger transaction committed: it may or may not have.

    ``session``: on PostgreSQL, the transaction's id and its server process,
    by which the server is asked afterwards whether it committed
    (``txid_status``); None elsewhere. ``results``: what its writes returned,
    which stand if it did.
    """

    def __init__(
        self, message: str, session: tuple[int, int] | None = None, results: list[Any] | None = None
    ) -> None:
        super().__init__(message)
        self.session = session
        self.results = results or []  # what the transaction's writes returned


class LedgerUnreachable(LedgerError):
    """The ledger stayed unreachable for longer than the grace period."""


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the ledger could not be reached (worth waiting for)."""
    return (
        isinstance(error, sa.exc.DBAPIError)
        and not isinstance(error, CommitUnknown)
        and is_transient(error)
    )


class Patience:
    """How long a ledger's callers wait out an outage: ``grace`` seconds, or until a stop.

    One per ledger, shared by its reads and its writer, so that one stop
    ends every wait.
    """

    def __init__(self, grace: float = 0.0) -> None:
        self.grace = grace
        self._stopped = threading.Event()

    def stop_waiting(self) -> None:
        """From now on an unreachable ledger is an error at once (a stop was asked)."""
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop_waiting` was called."""
        return self._stopped.is_set()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less if :meth:`stop_waiting` is called meanwhile."""
        self._stopped.wait(seconds)


def ride_out(fn: Callable[[], T], patience: Patience) -> T:
    """``fn()``, retried while the ledger is unreachable, for as long as ``patience`` lasts.

    Raises :class:`LedgerUnreachable` once that is over (with a grace of 0,
    the database's own error at once).
    """
    try:
        return retrying(fn, should_retry=lambda e: unreachable(e) and not patience.stopped,
                        backoff=BACKOFF, grace=patience.grace, on_retry=_waiting,
                        sleep=patience.sleep)  # fmt: skip
    except sa.exc.DBAPIError as error:
        if patience.grace > 0 and unreachable(error):
            if patience.stopped:
                raise LedgerUnreachable(
                    f"a stop was asked while the ledger was unreachable: {_cause(error)}"
                ) from error
            raise LedgerUnreachable(
                f"the ledger stayed unreachable for over {patience.grace:g} s: {_cause(error)}"
            ) from error
        raise


def _cause(error: BaseException) -> str:
    return str(getattr(error, "orig", None) or error).splitlines()[0]


def _waiting(attempt: int, delay: float, error: BaseException) -> None:
    log.warning("the ledger is unreachable (%d tries), trying again in %.1f s: %s",
                attempt, delay, _cause(error))  # fmt: skip


def reads_ride_out(cls: type[T]) -> type[T]:
    """Class decorator: every public method rides out an outage as ``self.patience`` says."""
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not callable(method):
            continue
        setattr(cls, name, _riding(method))
    return cls


def _riding(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return ride_out(lambda: method(self, *args, **kwargs), self.patience)

    return wrapper
