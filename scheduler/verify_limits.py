"""What ``sluice verify`` may ask of its source databases: its share of their ``limits:``.

A verify reads whole tables of the databases the daemons read. While it
runs it registers on the ledger as one more reader (an owner, as a daemon
is), so that each database's limits are divided between the daemons and
the verify (:meth:`sources.budget.Budgets.share`): the daemons take their
smaller share at their next heartbeat, and the verify opens nothing to a
limited database before they have. Without a ledger, or with no limit set,
it has the limits to itself and registers nothing.

- **connections** (``max_connections`` set): a table's comparison holds its
  read partitions' permits of the database's budget while Spark reads.
- **rows per second** (``max_rows_per_s``): the source table is read once,
  in key slices of at most the budget's batch (half a second of the rate
  share), each counted by one query over the key's index and kept by Spark
  before the next may start, as a daemon's batches are released. The
  comparison's two passes then read the kept rows, not the database.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from scheduler.ledger import DEAD_AFTER
from sources.budget import Budget
from sources.budgets import Budgets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from config.models import SluiceConfig, SqlSourceConfig
    from scheduler.ledger import Ledger

log = logging.getLogger("sluice.verify")

POLL = 0.05
"""Seconds between two looks at a budget that has no permit free."""


class ReadShare:
    """This verify's share of the limits of the databases it reads (a context manager).

    ``clock`` and ``wait`` (how long to pause, in ``clock``'s seconds) are
    injected in tests; by default real time, and a pause a stop ends.
    """

    def __init__(
        self, cfg: SluiceConfig, names: Iterable[str], *,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], object] | None = None,
    ) -> None:  # fmt: skip
        self._cfg = cfg
        self._budgets = Budgets(cfg, clock=clock)
        limited = set(self._budgets.limited().values())
        self._of = {n: b for n in names if (b := self._budgets.of(n)) in limited}
        self._stop = threading.Event()
        self.wait: Callable[[float], object] = wait or self._stop.wait
        self.heartbeat_every = min(5.0, cfg.lease.ttl / 3)  # the daemons' own
        self._ledger: Ledger | None = None
        self._thread: threading.Thread | None = None

    def budget(self, source: str) -> Budget | None:
        """The budget of ``source``'s database when it bounds something (else None)."""
        return self._of.get(source)

    def __enter__(self) -> ReadShare:
        if self._of and _ledger_exists(self._cfg.ledger):
            from scheduler.ledger import Ledger

            owner = f"verify:{socket.gethostname()}:{os.getpid()}"
            self._ledger = Ledger(self._cfg.ledger, lease_ttl=self._cfg.lease.ttl, owner=owner)
            try:
                self._ledger.owners.register()
                self._share(joining=True)
            except BaseException:
                self._ledger.close()
                raise
            self._thread = threading.Thread(target=self._beat, name="verify-heartbeat",
                                            daemon=True)  # fmt: skip
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        if self._ledger is not None:
            try:
                self._ledger.owners.unregister()
            except Exception as error:  # noqa: BLE001 - the report stands; the owner lapses
                log.warning("verify: cannot leave the ledger's owners (it lapses in %.0f s): %s",
                            DEAD_AFTER, error)  # fmt: skip
            finally:
                self._ledger.close()

    def _share(self, *, joining: bool = False) -> None:
        assert self._ledger is not None
        owners = self._ledger.owners
        live = owners.live()
        # As a daemon joining: the others shrink at their next heartbeat, before we read.
        wait = self.heartbeat_every + 1.0 if joining and len(live) > 1 else 0.0
        if len(live) > 1:
            log.info("limits: shared with %d daemons on the ledger", len(live) - 1)
        self._budgets.share(live, owners.owner, join_wait=wait)

    def _beat(self) -> None:
        assert self._ledger is not None
        while not self._stop.wait(self.heartbeat_every):
            try:
                self._ledger.owners.heartbeat()
                self._share()
            except Exception as error:  # noqa: BLE001 - the share held stays; the next beat retries
                log.warning("verify: cannot renew its share of the limits: %s", error)

    def paces(self, source: str) -> bool:
        """Whether ``source``'s reads are paced (``max_rows_per_s``): read slice by slice."""
        budget = self._of.get(source)
        return budget is not None and budget.rate_share is not None

    def bounds_connections(self, source: str) -> bool:
        """Whether ``source``'s database's connections are bounded: every query counts."""
        budget = self._of.get(source)
        return budget is not None and budget.connection_share is not None

    def admit(self, source: str, parts: int = 1) -> None:
        """Wait until ``source``'s budget admits a read on ``parts`` connections: permits
        free, the rate out of debt, the daemons shrunk to their share."""
        budget = self._of.get(source)
        while budget is not None and not budget.admits(parts):
            self.wait(max(POLL, min(1.0, budget.wait_s())))

    @contextmanager
    def reading(self, source: str, parts: int, rows: int = 0) -> Iterator[int]:
        """Hold the permits of ``parts`` read partitions of ``source``'s database while the
        body reads ``rows`` rows of it (charged to its rate).

        It waits until the budget admits them: permits free, the rate out of
        debt. The partitions held are yielded: fewer than ``parts`` when the
        share of connections is smaller.
        """
        budget = self._of.get(source)
        if budget is None:
            yield parts
            return
        if budget.connection_share is not None:
            parts = budget.read_parts(parts)
        self.admit(source, parts)
        budget.take(rows, parts)
        try:
            yield parts
        finally:
            budget.give_back(parts)


@dataclass
class KeptRows:
    """A source table's rows read slice by slice at its rate, kept by Spark (:func:`read_paced`).

    ``rate``: the most rows per second the share allowed while it read.
    """

    rows: DataFrame
    rate: float
    _kept: list[DataFrame] = field(default_factory=list, repr=False)

    def release(self) -> None:
        """Let Spark drop the kept slices."""
        for frame in self._kept:
            frame.unpersist()


def read_paced(
    spark: SparkSession, share: ReadShare, name: str, source: SqlSourceConfig,
    upto: list[Any] | None, parts: int,
) -> KeptRows | None:  # fmt: skip
    """``source``'s rows with keys up to ``upto`` (None: every key), read at the rate share of
    its database, kept; None when no rate bounds it (read it as usual)."""
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

    from sources.keyqueries import KeyQueries
    from sources.sqldb import SourceDatabase
    from spark_jobs.verify.read import source_reader

    budget = share.budget(name)
    if budget is None or budget.rate_share is None:
        return None
    reader = source_reader(spark, source)
    # The key order whatever the mode (incremental walks by its cursor).
    walk = source.model_copy(update={"mode": "keyset", "cursor": None})
    db = SourceDatabase(name, walk, None, budget)
    queries = KeyQueries(walk, db, through=None if upto is None else tuple(upto))
    frames: list[DataFrame] = []
    rates: list[float] = []
    after: tuple[Any, ...] | None = None
    try:
        while True:
            share.admit(name)  # the slice's key query too waits for its turn
            found = queries.range_end(after, budget.batch_cap() or 1)
            if found is None:
                break
            end, rows = found
            with share.reading(name, parts, rows) as held:
                rates.append(budget.rate_share or 0.0)
                frame = reader.read_range(after, end, items=rows, parts=held)
                frames.append(frame.persist(StorageLevel.DISK_ONLY))
                frame.count()  # read now, within the permits; kept on Spark's disk
            after = end
    except BaseException:
        for frame in frames:
            frame.unpersist()
        raise
    finally:
        db.close()
    if not frames:  # nothing in scope: the table's columns, no row
        return KeptRows(reader.read_range(None, None).limit(0), budget.rate_share or 0.0)
    return KeptRows(reduce(DataFrame.unionByName, frames), max(rates), frames)


def _ledger_exists(url: str) -> bool:
    """Whether the ledger holds sluice's tables: without them no daemon shares a limit."""
    from scheduler.ledger.migrate import revision
    from scheduler.readonly import readonly_engine

    engine = readonly_engine(url)
    if engine is None:
        return False
    try:
        with engine.connect() as conn:
            return revision(conn) is not None
    finally:
        engine.dispose()
