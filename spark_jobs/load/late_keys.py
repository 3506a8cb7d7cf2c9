"""Primary keys built after a table's first pass: what the imports of this process know of them.

A primary key kept up row by row while the rows go in costs the load more than building it
afterwards: the takeover benchmark's 10 M-row table, copied by two COPY streams, took
17.2 s into a table with its key and 11.1 s into one without (2.57 GB of WAL against
1.87 GB: every row's index entry is a record of its own), while the key's build after the
load is ~2.5 s of CPU beside the table's other indexes. pg_restore and pgcopydb build it
after the data; sluice does too, for a table where exactly once does not need it meanwhile
(:func:`spark_jobs.schema.plan.plan_schema` says which, and puts the key's build with the
table's other indexes, :data:`~spark_jobs.engines.objects.Stage.LOADED`).

Why exactly once holds without the key: a keyset walk's batches are ranges of its key that
no two batches of one ledger share, and a batch's rows are in the table only if its commit
row is (the commit looks at that first). A table this process makes empty, for the one
keyset source the config sends there, holds no row of a batch's range before the batch
(``fresh``): the range probe, an index probe with the key and a scan of the table without
it, is left out (:attr:`~spark_jobs.load.target.TargetTable.fresh`). Any other writer gives
the table its key first (:func:`ensure_key`): a process that did not make the table (a
restart after a crash, another daemon, ``sluice import``), and a staged load of this one
(rows the table refused, a batch committed before), whose upsert needs the key. Whoever
builds the key checks the rows too: a duplicate fails it, with the key named, and the
cutover says NOT READY; nothing is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import sqlalchemy as sa

from spark_jobs.engines import engine_of
from spark_jobs.engines.objects import BUILD_MEMORY
from spark_jobs.load.target import TargetTable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LateKey:
    """A table whose primary key follows its first pass: the one source that fills it,
    and the statements that build the key (its index, then the key on it)."""

    source: str
    schema: str
    table: str
    statements: tuple[str, ...]


_Where = tuple[str | None, int | None, str | None, str]
_late: dict[_Where, list[LateKey]] = {}
_fresh: set[tuple[_Where, str]] = set()
_lock = threading.Lock()
_building = threading.Lock()  # one key built at a time by this process: the others wait for it


def keep(tables: Iterable[tuple[str, LateKey]]) -> None:
    """Keep the tables (each its target's URL and its :class:`LateKey`) whose keys follow
    their loads, replacing what was kept; a table no longer among them is not fresh."""
    found: dict[_Where, list[LateKey]] = {}
    for url, late in tables:
        found.setdefault(_where(url, late.table), []).append(late)
    with _lock:
        _late.clear()
        _late.update(found)
        _fresh.intersection_update({(w, late.schema) for w, lates in found.items()
                                    for late in lates})  # fmt: skip


def make_keyless(url: str | sa.URL, target: TargetTable) -> bool:
    """Whether the table ``target``, which this process is about to make, is made without
    its primary key (its key columns ``NOT NULL``): it is then fresh in this process. The
    mark stays if another process makes the table first: every maker of a table shares the
    ledger, whose ranges no two batches share."""
    with _lock:
        late = _find(url, target)
        if late is None:
            return False
        _fresh.add((_where(url, late.table), late.schema))
        return True


def is_fresh(url: str | sa.URL, target: TargetTable) -> bool:
    """Whether this process made ``target``'s table without its key, for its batches."""
    return _fresh_late(url, target) is not None


def as_fresh(url: str | sa.URL, target: TargetTable, sources: Iterable[str]) -> TargetTable:
    """``target``, marked fresh where this process made its table without its key, for
    batches of ``sources`` that are all the one source the plan found filling it (their
    direct loads then leave the range probe out)."""
    late = None if target.fresh else _fresh_late(url, target)
    if late is None or any(source != late.source for source in sources):
        return target
    return replace(target, fresh=True)


def _fresh_late(url: str | sa.URL, target: TargetTable) -> LateKey | None:
    """``target``'s :class:`LateKey` where this process made its table without its key."""
    with _lock:
        late = _find(url, target)
        fresh = late is not None and (_where(url, late.table), late.schema) in _fresh
        return late if fresh else None


def ensure_key(engine: sa.Engine, target: TargetTable, why: str) -> bool:
    """Give ``target``'s table its primary key now, unless it has a unique key on the batch's
    key already; ``why``: for the log. Returns whether it was built here. Raises the
    database's error where the key cannot be built (a duplicate key: the rows are not
    what exactly once leaves, and nothing is written until someone looks)."""
    catalogue = engine_of(engine.url)
    key = list(target.key)
    with _building:
        if catalogue.has_unique_key(engine, target.schema, target.table, key):
            _forget(engine.url, target)
            return False
        with _lock:
            late = _find(engine.url, target)
        started = time.monotonic()
        # The plan's statements (the source's name, free in the target when planned), else
        # one the server names.
        statements = late.statements if late is not None else catalogue.key_after_load(
            None, (target.schema or "", target.table), key) or ()
        try:
            with engine.begin() as conn:
                for setting in catalogue.build_settings(BUILD_MEMORY):
                    conn.exec_driver_sql(setting)
                for statement in statements:
                    conn.exec_driver_sql(statement)
        except sa.exc.DBAPIError:
            if not catalogue.has_unique_key(engine, target.schema, target.table, key):
                raise
            _forget(engine.url, target)  # another process built it meanwhile
            return False
        _forget(engine.url, target)
    log.info("%s: primary key built now, %s (%.1f s)", target.label, why,
             time.monotonic() - started)  # fmt: skip
    return True


def ensure_if_fresh(engine: sa.Engine, target: TargetTable, why: str) -> None:
    """:func:`ensure_key`, where this process made the table without its key: the upsert
    of a staged load needs it (a process that did not make the table gave it its key when
    it first checked the table)."""
    if target.fresh or is_fresh(engine.url, target):
        ensure_key(engine, target, why)


def _forget(url: str | sa.URL, target: TargetTable) -> None:
    """``target``'s table has its key: not fresh any more (its direct loads probe again, and
    its staged loads look no further)."""
    with _lock:
        late = _find(url, target)
        if late is not None:
            _fresh.discard((_where(url, late.table), late.schema))


def _find(url: str | sa.URL, target: TargetTable) -> LateKey | None:
    found = _late.get(_where(url, target.table), [])
    if target.schema is not None:
        found = [late for late in found if late.schema == target.schema]
    return found[0] if len(found) == 1 else None


def _where(url: str | sa.URL, table: str) -> _Where:
    # The server and database, whatever driver each side's URL names.
    parsed = sa.make_url(url) if isinstance(url, str) else url
    return parsed.host, parsed.port, parsed.database, table
