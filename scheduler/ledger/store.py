"""The ledger: the durable record of every batch and of each source's progress.

SQLAlchemy Core on SQLite (WAL) by default or PostgreSQL in production; the
``sluice_*`` tables are created or upgraded on start (:mod:`.migrate`). Every
state change is a versioned compare-and-set (``UPDATE … WHERE version = :v``);
a keyset range is claimed by a compare-and-set on the source's high-water mark,
so two daemons can never claim the same range and a restart resumes after the
last claimed range.

Batch states: ``claimed → importing → done``, or ``failed`` (retried after a
backoff) and ``dead`` after ``retry.max_attempts``.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from config.errors import ClaimConflict, LedgerError
from config.models import RetryConfig
from config.retrying import Backoff
from scheduler.ledger import migrate, outage
from scheduler.ledger.checkpoints import Checkpoint, SourceBook
from scheduler.ledger.owners import DEAD_AFTER, Owners
from scheduler.ledger.reads import LedgerReads
from scheduler.ledger.schema import (
    UNFINISHED,
    batches_table,
    encode_key,
    encode_position,
    keys_table,
    sources_table,
)
from scheduler.ledger.writer import SerialWriter
from spark_jobs.common.manifest import Manifest


class Ledger:
    """Batches, checkpoints and owners in a SQL database. Thread-safe.

    Every write goes through one :class:`SerialWriter` thread (group commit);
    reads (:attr:`reads`) use the connection pool directly. Across processes
    the compare-and-sets decide. ``owner`` names this process in leases
    (:attr:`owners`): a batch belongs to the owner that claimed or began it
    until its lease expires or its owner is seen dead, and then any live
    daemon may take it over (with a new fencing token). Only the batch's
    current owner may end it (:meth:`finish`, :meth:`fail`); an importer that
    lost its batch gets :class:`ClaimConflict`. Sources' checkpoints are in
    :attr:`sources`. Opening upgrades an older ledger (:func:`.migrate.upgrade`);
    an unreachable ledger is waited for up to ``outage`` seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        lease_ttl: float = 600.0,
        owner: str | None = None,
        on_writer_death: Callable[[BaseException], None] | None = None,
        outage_grace: float | None = None,
    ) -> None:
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.engine = migrate.open_upgraded(url, clock)
        # One patience for the reads and the writes: a stop ends every wait.
        self.patience = outage.Patience(outage.GRACE if outage_grace is None else outage_grace)
        self.writer = SerialWriter(self.engine, on_death=on_writer_death, patience=self.patience)
        self.reads = LedgerReads(self.engine, patience=self.patience)
        self.owners = Owners(self.engine, self.writer, self.owner, clock, lease_ttl)
        self.sources = SourceBook(self.engine, self.writer, clock)

    def close(self) -> None:
        """Finish queued writes and release the ledger's connections."""
        self.writer.close()
        self.engine.dispose()

    def orphans(self, sources: Iterable[str], dead_after: float = DEAD_AFTER) -> list[Manifest]:
        """Unfinished batches of other owners that any live daemon may take over: their lease
        expired or their owner is gone (:meth:`Owners.lapsed`, :meth:`begin`'s rule)."""
        ids = self.owners.orphan_ids(sources, dead_after)
        if not ids:
            return []
        return self.reads.batches(UNFINISHED, sources, batches_table.c.id.in_(ids))

    # -- claims ----------------------------------------------------------------------

    def claim_range(
        self, batch_id: str, source: str, target: str, after: Checkpoint, hi: list[Any],
        items: int, *, begin: bool = False,
    ) -> tuple[Manifest, Checkpoint]:
        """Claim the keys ``after.high_water < key <= hi`` as one new batch.

        With ``begin`` the batch is born ``importing`` with token 1 (one
        ledger write instead of a claim and a :meth:`begin`). Raises
        :class:`ClaimConflict` when the high-water mark moved since ``after``
        was read (another daemon claimed first).
        """
        manifest = Manifest(
            batch_id=batch_id, source=source, target=target, kind="range",
            items=items, token=int(begin), lo=after.high_water, hi=list(hi),
        )
        return manifest, claim_at_mark(self, manifest, after)

    def claim_keys(
        self, batch_id: str, source: str, target: str, keys: list[list[Any]],
        *, payloads: list[str] | None = None, versions: list[str] | None = None,
        begin: bool = False,
    ) -> Manifest | None:
        """Claim the given keys as one new batch, skipping keys another batch holds.

        With ``payloads`` (one per key) the batch carries the records themselves
        (kind ``payloads``, for SQS); otherwise it names the keys to re-read
        (kind ``keys``). ``versions`` (the cursor value in incremental mode)
        lets a key be migrated again when it changed. Returns None when every
        key was already claimed. Each (key, version) belongs to one batch: the
        primary key of ``sluice_keys`` decides races between daemons, and a lost
        race raises :class:`ClaimConflict`.
        """
        versions = versions or [""] * len(keys)
        first: dict[tuple[str, str], int] = {}
        for i, key in enumerate(keys):
            first.setdefault((encode_key(key), versions[i]), i)
        taken = self.reads.taken(source, list(first))
        if not (mine := [i for pair, i in first.items() if pair not in taken]):
            return None
        manifest = Manifest(
            batch_id=batch_id, source=source, target=target,
            kind="keys" if payloads is None else "payloads", items=len(mine), token=int(begin),
            keys=[keys[i] for i in mine],
            payloads=[] if payloads is None else [payloads[i] for i in mine],
        )
        rows = [
            {"source": source, "key": encode_key(keys[i]), "version": versions[i],
             "batch_id": batch_id}
            for i in mine
        ]

        def write(conn: sa.Connection) -> None:
            conn.execute(keys_table.insert(), rows)
            _insert_batch(conn, manifest, self.owner, self.clock(), self.lease_ttl)

        try:
            self.writer.call(write)
        except sa.exc.IntegrityError as error:
            raise ClaimConflict(f"source {source!r}: keys of batch {batch_id} were "
                                "claimed by another daemon first") from error
        return manifest

    # -- transitions -----------------------------------------------------------------

    def begin(self, batch_id: str, *, dead_after: float = DEAD_AFTER) -> Manifest:
        """Take a batch for this owner: ``importing``, a new fencing token, a fresh lease.

        A ``claimed`` or ``importing`` batch is taken only when it is ours or
        its owner lost it (lease expired, owner gone: the rule of
        :meth:`orphans`); a ``failed`` one has no lease and any owner may
        retry it. Raises :class:`ClaimConflict` when the batch is held by
        another live owner, or another owner changed it first: of two daemons
        taking over one orphan, one wins.
        """
        now = self.clock()
        row = self._transition(
            batch_id, ("claimed", "failed", "importing"), "importing",
            lambda r: {
                "token": r.token + 1, "attempts": r.attempts + 1, "error": None,
                "owner": self.owner, "lease_until": now + self.lease_ttl,
            },
            guard=lambda conn: sa.or_(
                batches_table.c.owner == self.owner, self.owners.lapsed(conn, now, dead_after)
            ),
        )
        manifest = Manifest.from_json(row.manifest)
        return Manifest(**{**manifest.__dict__, "token": row.token + 1})

    def finish(
        self, batch_id: str, rows: int, rejected: int = 0, *, token: int | None = None,
        zero_dates: Mapping[str, int] | None = None,
    ) -> None:  # fmt: skip
        """Record that a batch's rows are committed in its target.

        Only the batch's owner may, and with ``token`` only the attempt that
        began it with that fencing token; otherwise (another daemon took it
        over) :class:`ClaimConflict` is raised and nothing changes.
        ``zero_dates``: per column, the MySQL zero dates the batch made NULL.
        """
        self._transition(
            batch_id, ("importing",), "done",
            lambda r: {"rows": rows, "rejected": rejected, "lease_until": None,
                       "zero_dates": _counts(zero_dates)},
            guard=lambda conn: _held(self.owner, token),
        )

    def fail(
        self, batch_id: str, error: str, retry: RetryConfig, *,
        token: int | None = None, counted: bool = True, permanent: bool = False,
    ) -> str:  # fmt: skip
        """Record a failed attempt; returns the new state, ``failed`` or ``dead``.

        Owner and ``token`` are checked as in :meth:`finish`. ``counted=False``:
        the batch never ran (nothing could import it), so the attempt
        :meth:`begin` counted is given back, and it may run again at once.
        ``permanent``: no retry can help (a column the target cannot hold): dead now.
        """
        state = "failed"

        def values(row: Any) -> dict[str, Any]:
            nonlocal state
            if not counted:
                return {"error": error, "attempts": max(0, row.attempts - 1),
                        "not_before": None, "lease_until": None}  # fmt: skip
            if row.attempts >= retry.max_attempts or permanent:
                state = "dead"
                return {"state": "dead", "error": error, "not_before": None, "lease_until": None}
            delay = Backoff(retry.backoff, retry.max_backoff).delay(row.attempts)
            return {"error": error, "not_before": self.clock() + delay, "lease_until": None}

        self._transition(batch_id, ("importing",), "failed", values,
                         guard=lambda conn: _held(self.owner, token))
        return state

    def requeue(self, batch_id: str) -> None:
        """Put a failed or dead batch back to ``claimed`` with fresh attempts.

        An operator's action (``sluice retry``): no owner holds a failed or
        dead batch, so none is checked.
        """
        self._transition(batch_id, ("failed", "dead"), "claimed",
                         lambda r: {"attempts": 0, "not_before": None, "owner": None,
                                    "lease_until": 0.0})

    def _transition(
        self, batch_id: str, allowed: tuple[str, ...], state: str,
        values: Callable[[Any], dict[str, Any]],
        guard: Callable[[sa.Connection], sa.ColumnElement[bool]] | None = None,
    ) -> Any:
        """Move a batch from one of ``allowed`` to ``state`` by compare-and-set.

        ``guard`` adds a condition to the ``UPDATE``'s ``WHERE`` (who may make
        the change); the version check makes the read and the write one step.
        Returns the row as it was; raises :class:`ClaimConflict` when the
        state, the version or the guard says no.
        """
        t = batches_table

        def write(conn: sa.Connection) -> Any:
            row = conn.execute(sa.select(t).where(t.c.id == batch_id)).first()
            if row is None:
                raise LedgerError(f"batch {batch_id} is not in the ledger")
            if row.state not in allowed:
                raise ClaimConflict(
                    f"batch {batch_id} is {row.state}, expected one of {', '.join(allowed)}"
                )
            changes = {"state": state, **values(row)}
            where = [t.c.id == batch_id, t.c.version == row.version]
            if guard is not None:
                where.append(guard(conn))
            changed = conn.execute(
                t.update()
                .where(*where)
                .values(version=row.version + 1, updated_at=self.clock(), **changes)
            )
            if changed.rowcount != 1:
                raise _refused(conn, self.owner, batch_id, state)
            return row

        return self.writer.call(write)


def _refused(conn: sa.Connection, owner: str, batch_id: str, state: str) -> ClaimConflict:
    """Say who holds a batch that this owner could not move to ``state``."""
    t = batches_table
    held = conn.execute(
        sa.select(t.c.state, t.c.owner, t.c.token, t.c.lease_until).where(t.c.id == batch_id)
    ).first()
    if held is None:  # removed meanwhile (``sluice reset``)
        return ClaimConflict(f"batch {batch_id} left the ledger; it cannot be made {state}")
    return ClaimConflict(
        f"batch {batch_id} is {held.state} with token {held.token} under owner "
        f"{held.owner!r} (lease until {held.lease_until}); {owner!r} may not make it "
        f"{state}: another daemon holds it or changed it first"
    )


def claim_changes(
    ledger: Ledger, batch_id: str, source: str, target: str, after: Checkpoint,
    hi: list[Any], changes: list[str], resume: list[Any],
) -> tuple[Manifest, Checkpoint]:
    """Claim a stream source's changes ``(after.high_water, hi]`` (``changes``: their events)
    as one new batch, born ``importing``, as :meth:`Ledger.claim_range` claims a range; the
    full load's progress after them (``resume``) is recorded with the mark."""
    manifest = Manifest(
        batch_id=batch_id, source=source, target=target, kind="changes", items=len(changes),
        token=1, lo=after.high_water, hi=list(hi), payloads=changes,
    )
    return manifest, claim_at_mark(ledger, manifest, after, resume)


def claim_at_mark(
    ledger: Ledger, manifest: Manifest, after: Checkpoint, resume: list[Any] | None = None
) -> Checkpoint:
    """Insert ``manifest``'s batch if the source's mark is still at ``after`` (moved to the
    batch's end, with ``resume`` for a stream), else raise :class:`ClaimConflict`."""
    t = sources_table
    source, hi, version = manifest.source, manifest.hi or [], after.version + 1
    marks: dict[str, Any] = {"high_water": encode_key(hi), "version": version}
    if manifest.kind == "changes":
        marks["resume_after"] = None if resume is None else encode_position(resume)

    def write(conn: sa.Connection) -> None:
        moved = conn.execute(
            t.update()
            .where(t.c.name == source, t.c.version == after.version)
            .values(**marks, updated_at=ledger.clock())
        )
        if moved.rowcount != 1:
            raise ClaimConflict(
                f"source {source!r}: the high-water mark moved past version "
                f"{after.version}; another daemon claimed this range"
            )
        _insert_batch(conn, manifest, ledger.owner, ledger.clock(), ledger.lease_ttl,
                      range_seq=version)

    ledger.writer.call(write)
    return Checkpoint(list(hi), version, resume)


def _insert_batch(
    conn: sa.Connection, manifest: Manifest, owner: str, now: float, lease_ttl: float,
    range_seq: int | None = None,
) -> None:
    """A new batch row: ``claimed``, or ``importing`` when its token is already 1.

    ``range_seq``: a range's place in its source's claim order (the mark's new version).
    """
    begun = manifest.token > 0
    conn.execute(
        batches_table.insert().values(
            id=manifest.batch_id, source=manifest.source, target=manifest.target,
            kind=manifest.kind, state="importing" if begun else "claimed", version=0,
            token=manifest.token, attempts=int(begun), items=manifest.items, rows=None,
            manifest=manifest.to_json(), error=None, not_before=None, owner=owner,
            lease_until=now + lease_ttl, created_at=now, updated_at=now, range_seq=range_seq,
        )
    )


def _held(owner: str, token: int | None) -> sa.ColumnElement[bool]:
    """SQL: the batch is still ``owner``'s (and, with ``token``, still at that attempt)."""
    t = batches_table
    if token is None:
        return t.c.owner == owner
    return sa.and_(t.c.owner == owner, t.c.token == token)


def _counts(counts: Mapping[str, int] | None) -> str | None:
    """Counts per column as the ledger keeps them (JSON; None for none)."""
    return json.dumps(dict(sorted(counts.items()))) if counts else None
