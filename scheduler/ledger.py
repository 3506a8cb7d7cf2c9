"""The ledger: the durable record of every batch and of each source's progress.

SQLAlchemy Core on SQLite (WAL) by default or PostgreSQL in production; the
``sluice_*`` tables are created on start. Every state change is a versioned
compare-and-set (``UPDATE … WHERE version = :v``); a keyset range is claimed
by a compare-and-set on the source's high-water mark, so two daemons can never
claim the same range and a restart resumes after the last claimed range.

Batch states: ``claimed → importing → done``, or ``failed`` (retried after a
backoff) and ``dead`` after ``retry.max_attempts``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa

from config.errors import ClaimConflict, FingerprintMismatch, LedgerError
from config.models import RetryConfig, SqlSourceConfig, SqsSourceConfig
from scheduler.ledger_schema import (
    batches_table,
    decode_key,
    encode_key,
    keys_table,
    metadata,
    open_engine,
    owners_table,
    poison_table,
    sources_table,
)
from scheduler.writer import SerialWriter
from spark_jobs.manifest import Manifest

__all__ = [
    "UNFINISHED", "Checkpoint", "Ledger", "SourceProgress", "batches_table", "encode_key",
    "fingerprint", "keys_table", "owners_table", "poison_table", "sources_table",
]

T = TypeVar("T")

UNFINISHED = ("claimed", "importing")
STATES = ("claimed", "importing", "done", "failed", "dead")
DEAD_AFTER = 30.0
"""Seconds without a heartbeat after which an owner counts as dead."""


@dataclass(frozen=True)
class Checkpoint:
    """A source's claim high-water mark and the version that guards it."""

    high_water: list[Any] | None
    version: int


@dataclass(frozen=True)
class SourceProgress:
    """Counts of one source's batches per state, and rows written."""

    source: str
    states: dict[str, int]
    items: int
    rows: int
    last_error: str | None


def fingerprint(cfg: SqlSourceConfig | SqsSourceConfig) -> str:
    """A digest of what defines a source's progress (url without password, table, key…)."""
    if isinstance(cfg, SqlSourceConfig):
        url = sa.make_url(cfg.url).set(password=None).render_as_string(hide_password=False)
        parts: dict[str, Any] = {
            "url": url, "table": cfg.table, "key": cfg.key_columns, "mode": cfg.mode,
            "where": cfg.where,
        }
    else:
        parts = {"queue_url": cfg.queue_url, "key": cfg.key}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class Ledger:
    """Batches, checkpoints and owners in a SQL database. Thread-safe.

    Every write goes through one :class:`SerialWriter` thread (group commit);
    reads use the connection pool directly. Across processes the
    compare-and-sets decide. ``owner`` names this process in leases: a batch
    belongs to the owner that claimed or began it until its lease expires or
    its owner is seen dead, and then any live daemon may take it over (with a
    new fencing token). Only the batch's current owner may end it
    (:meth:`finish`, :meth:`fail`); an importer that lost its batch gets
    :class:`ClaimConflict`.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        lease_ttl: float = 600.0,
        owner: str | None = None,
        on_writer_death: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.clock = clock
        self.lease_ttl = lease_ttl
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.engine = open_engine(url)
        self._create_tables()
        self.writer = SerialWriter(self.engine, on_death=on_writer_death)

    def _create_tables(self, attempts: int = 5) -> None:
        """Create the ``sluice_*`` tables if missing.

        Two daemons starting at once on a new ledger may both see no table and
        both create it; the loser's CREATE fails, and a second look finds the
        tables the winner made.
        """
        for attempt in range(1, attempts + 1):
            try:
                metadata.create_all(self.engine)
                return
            except sa.exc.SQLAlchemyError as error:
                if attempt == attempts:
                    shown = self.engine.url.render_as_string(hide_password=True)
                    raise LedgerError(
                        f"cannot open the ledger {shown}: {getattr(error, 'orig', None) or error}"
                    ) from error
                time.sleep(0.2 * attempt)  # start-up only: let the other creator finish

    def close(self) -> None:
        """Finish queued writes and release the ledger's connections."""
        self.writer.close()
        self.engine.dispose()

    def _write(self, fn: Callable[[sa.Connection], T]) -> T:
        return self.writer.call(fn)

    # -- owners and leases ------------------------------------------------------------

    def register_owner(self) -> None:
        """Announce this process as a live owner of batches."""
        now = self.clock()

        def write(conn: sa.Connection) -> None:
            conn.execute(owners_table.delete().where(owners_table.c.owner == self.owner))
            conn.execute(
                owners_table.insert().values(
                    owner=self.owner, host=socket.gethostname(), pid=os.getpid(),
                    started_at=now, heartbeat_at=now,
                )
            )

        self._write(write)

    def heartbeat(self) -> int:
        """Say this owner is alive and renew the leases of its batches; returns how many."""
        now = self.clock()
        t = batches_table

        def write(conn: sa.Connection) -> int:
            conn.execute(
                owners_table.update()
                .where(owners_table.c.owner == self.owner)
                .values(heartbeat_at=now)
            )
            renewed = conn.execute(
                t.update()
                .where(t.c.owner == self.owner, t.c.state.in_(UNFINISHED))
                .values(lease_until=now + self.lease_ttl)
            )
            return renewed.rowcount or 0

        return self._write(write)

    def unregister_owner(self) -> None:
        """This process stops: its unfinished batches may be taken over at once."""
        t = batches_table

        def write(conn: sa.Connection) -> None:
            conn.execute(owners_table.delete().where(owners_table.c.owner == self.owner))
            conn.execute(
                t.update()
                .where(t.c.owner == self.owner, t.c.state.in_(UNFINISHED))
                .values(lease_until=0.0)
            )

        self._write(write)

    def orphans(self, sources: Iterable[str], dead_after: float = DEAD_AFTER) -> list[Manifest]:
        """Unfinished batches of other owners that any live daemon may take over.

        That is, their lease expired or their owner is gone (see
        :meth:`_lapsed`); :meth:`begin` takes a batch over by the same rule.
        """
        t = batches_table
        with self.engine.connect() as conn:
            ids = set(
                conn.scalars(
                    sa.select(t.c.id).where(
                        t.c.state.in_(UNFINISHED), t.c.source.in_(list(sources)),
                        sa.or_(t.c.owner.is_(None), t.c.owner != self.owner),
                        self._lapsed(conn, self.clock(), dead_after),
                    )
                )
            )
        return [m for m in self.batches(UNFINISHED, sources) if m.batch_id in ids]

    def _lapsed(self, conn: sa.Connection, now: float, dead_after: float) -> sa.ColumnElement[bool]:
        """SQL: a batch's owner has lost it, so that another owner may take it over.

        Its lease expired, or its owner is gone: it has none, unregistered,
        stopped its heartbeat for ``dead_after`` seconds, or was a process on
        this host that no longer exists (a restart after ``kill -9`` takes its
        batches back at once). Used inside the ``UPDATE``'s ``WHERE`` so that
        the decision and the takeover are one compare-and-set.
        """
        t, o = batches_table, owners_table
        host, me = socket.gethostname(), os.getpid()
        # SQL cannot ask whether a pid lives: look at this host's owners here.
        dead_here = [
            row.owner for row in conn.execute(sa.select(o.c.owner, o.c.pid).where(o.c.host == host))
            if row.pid != me and not _pid_alive(row.pid)
        ]
        alive = sa.select(o.c.owner).where(o.c.heartbeat_at >= now - dead_after)
        return sa.or_(
            sa.func.coalesce(t.c.lease_until, 0.0) < now,
            t.c.owner.is_(None),
            t.c.owner.not_in(alive),
            t.c.owner.in_(dead_here),
        )

    # -- sources ---------------------------------------------------------------------

    def register_source(self, name: str, digest: str, *, config_path: str = "CONFIG") -> Checkpoint:
        """Record a source (first run) or check it is the one recorded before."""
        t = sources_table

        def write(conn: sa.Connection) -> Any:
            row = conn.execute(sa.select(t).where(t.c.name == name)).first()
            if row is None:
                conn.execute(
                    t.insert().values(
                        name=name, fingerprint=digest, high_water=None, version=0,
                        updated_at=self.clock(),
                    )
                )
            return row

        try:
            row = self._write(write)
        except sa.exc.IntegrityError:
            # Another daemon starting on the same config inserted it first: read its row.
            row = self._write(write)
        if row is None:
            return Checkpoint(None, 0)
        if row.fingerprint != digest:
            raise FingerprintMismatch(
                f"source {name!r} changed (url, table, key, mode or where) since the ledger "
                f"recorded its progress; to start it over run: "
                f"sluice reset {config_path} --source {name}"
            )
        return Checkpoint(decode_key(row.high_water), row.version)

    def checkpoint(self, name: str) -> Checkpoint:
        """The current high-water mark of a source."""
        t = sources_table
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.c.high_water, t.c.version).where(t.c.name == name)).one()
        return Checkpoint(decode_key(row.high_water), row.version)

    def reset_source(self, name: str) -> int:
        """Forget a source's progress and batches; returns the batches removed."""

        def write(conn: sa.Connection) -> int:
            conn.execute(sources_table.delete().where(sources_table.c.name == name))
            conn.execute(keys_table.delete().where(keys_table.c.source == name))
            conn.execute(poison_table.delete().where(poison_table.c.source == name))
            result = conn.execute(batches_table.delete().where(batches_table.c.source == name))
            return result.rowcount or 0

        return self._write(write)

    def record_poison(self, source: str, message_id: str, body: str, reason: str) -> None:
        """Keep a message no batch can take (bad JSON, no key…) before it is deleted."""
        values = {
            "source": source, "message_id": message_id, "body": body, "reason": reason,
            "recorded_at": self.clock(),
        }
        self._write(lambda conn: conn.execute(poison_table.insert().values(**values)))

    def poison_count(self, source: str) -> int:
        """Messages of a source recorded as poison."""
        with self.engine.connect() as conn:
            return int(
                conn.scalar(
                    sa.select(sa.func.count()).where(poison_table.c.source == source)
                ) or 0
            )

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
        t = sources_table

        def write(conn: sa.Connection) -> None:
            moved = conn.execute(
                t.update()
                .where(t.c.name == source, t.c.version == after.version)
                .values(high_water=encode_key(hi), version=after.version + 1,
                        updated_at=self.clock())
            )
            if moved.rowcount != 1:
                raise ClaimConflict(
                    f"source {source!r}: the high-water mark moved past version "
                    f"{after.version}; another daemon claimed this range"
                )
            self._insert_batch(conn, manifest)

        self._write(write)
        return manifest, Checkpoint(list(hi), after.version + 1)

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
        taken = self._taken(source, list(first))
        mine = [i for pair, i in first.items() if pair not in taken]
        if not mine:
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
            self._insert_batch(conn, manifest)

        try:
            self._write(write)
        except sa.exc.IntegrityError as error:
            raise ClaimConflict(f"source {source!r}: keys of batch {batch_id} were "
                                "claimed by another daemon first") from error
        return manifest

    def claimed_keys(self, source: str, encoded: list[str], version: str = "") -> set[str]:
        """Which of the encoded keys (at ``version``) some batch already holds."""
        return {text for text, _ in self._taken(source, [(text, version) for text in encoded])}

    def key_states(self, source: str, encoded: list[str], version: str = "") -> dict[str, str]:
        """For each encoded key (at ``version``) some batch holds, that batch's state.

        Keys no batch holds are left out. One query per 500 keys: a key's
        batch is found by a join, not a look-up per key.
        """
        k, b = keys_table, batches_table
        states: dict[str, str] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(encoded), 500):
                rows = conn.execute(
                    sa.select(k.c.key, b.c.state)
                    .join(b, b.c.id == k.c.batch_id)
                    .where(
                        k.c.source == source, k.c.version == version,
                        k.c.key.in_(encoded[start : start + 500]),
                    )
                )
                states.update((text, state) for text, state in rows)
        return states

    def _taken(self, source: str, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
        t = keys_table
        wanted = set(pairs)
        found: set[tuple[str, str]] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(pairs), 500):
                chunk = [text for text, _ in pairs[start : start + 500]]
                rows = conn.execute(
                    sa.select(t.c.key, t.c.version).where(t.c.source == source, t.c.key.in_(chunk))
                )
                found.update(pair for pair in map(tuple, rows) if pair in wanted)
        return found

    def _insert_batch(self, conn: sa.Connection, manifest: Manifest) -> None:
        """A new batch row: ``claimed``, or ``importing`` when its token is already 1."""
        now = self.clock()
        begun = manifest.token > 0
        conn.execute(
            batches_table.insert().values(
                id=manifest.batch_id, source=manifest.source, target=manifest.target,
                kind=manifest.kind, state="importing" if begun else "claimed", version=0,
                token=manifest.token, attempts=int(begun), items=manifest.items, rows=None,
                manifest=manifest.to_json(), error=None, not_before=None, owner=self.owner,
                lease_until=now + self.lease_ttl,
                created_at=now, updated_at=now,
            )
        )

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
                batches_table.c.owner == self.owner, self._lapsed(conn, now, dead_after)
            ),
        )
        manifest = Manifest.from_json(row.manifest)
        return Manifest(**{**manifest.__dict__, "token": row.token + 1})

    def finish(
        self, batch_id: str, rows: int, rejected: int = 0, *, token: int | None = None
    ) -> None:
        """Record that a batch's rows are committed in its target.

        Only the batch's owner may, and with ``token`` only the attempt that
        began it with that fencing token; otherwise (another daemon took it
        over) :class:`ClaimConflict` is raised and nothing changes.
        """
        self._transition(
            batch_id, ("importing",), "done",
            lambda r: {"rows": rows, "rejected": rejected, "lease_until": None},
            guard=lambda conn: self._held(token),
        )

    def fail(
        self,
        batch_id: str,
        error: str,
        retry: RetryConfig,
        *,
        token: int | None = None,
        counted: bool = True,
    ) -> str:
        """Record a failed attempt; returns the new state, ``failed`` or ``dead``.

        Owner and ``token`` are checked as in :meth:`finish`. ``counted=False``:
        the batch never ran (nothing could import it), so the attempt
        :meth:`begin` counted is given back, and it may run again at once.
        """
        state = "failed"

        def values(row: Any) -> dict[str, Any]:
            nonlocal state
            if not counted:
                return {"error": error, "attempts": max(0, row.attempts - 1),
                        "not_before": None, "lease_until": None}  # fmt: skip
            if row.attempts >= retry.max_attempts:
                state = "dead"
                return {"state": "dead", "error": error, "not_before": None, "lease_until": None}
            delay = min(retry.max_backoff, retry.backoff * 2 ** max(0, row.attempts - 1))
            return {"error": error, "not_before": self.clock() + delay, "lease_until": None}

        self._transition(batch_id, ("importing",), "failed", values,
                         guard=lambda conn: self._held(token))
        return state

    def requeue(self, batch_id: str) -> None:
        """Put a failed or dead batch back to ``claimed`` with fresh attempts.

        An operator's action (``sluice retry``): no owner holds a failed or
        dead batch, so none is checked.
        """
        self._transition(batch_id, ("failed", "dead"), "claimed",
                         lambda r: {"attempts": 0, "not_before": None, "owner": None,
                                    "lease_until": 0.0})

    def _held(self, token: int | None) -> sa.ColumnElement[bool]:
        """SQL: the batch is still ours (and, with ``token``, still at that attempt)."""
        t = batches_table
        if token is None:
            return t.c.owner == self.owner
        return sa.and_(t.c.owner == self.owner, t.c.token == token)

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
                raise self._refused(conn, batch_id, state)
            return row

        return self._write(write)

    def _refused(self, conn: sa.Connection, batch_id: str, state: str) -> ClaimConflict:
        """Say who holds a batch that this owner could not move to ``state``."""
        t = batches_table
        held = conn.execute(
            sa.select(t.c.state, t.c.owner, t.c.token, t.c.lease_until).where(t.c.id == batch_id)
        ).first()
        if held is None:  # removed meanwhile (``sluice reset``)
            return ClaimConflict(f"batch {batch_id} left the ledger; it cannot be made {state}")
        return ClaimConflict(
            f"batch {batch_id} is {held.state} with token {held.token} under owner "
            f"{held.owner!r} (lease until {held.lease_until}); {self.owner!r} may not make it "
            f"{state}: another daemon holds it or changed it first"
        )

    # -- queries ---------------------------------------------------------------------

    def batches(
        self, states: Iterable[str], sources: Iterable[str] | None = None
    ) -> list[Manifest]:
        """Manifests of the batches in the given states (oldest first)."""
        t = batches_table
        query = sa.select(t.c.manifest, t.c.token).where(t.c.state.in_(list(states)))
        if sources is not None:
            query = query.where(t.c.source.in_(list(sources)))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(t.c.created_at)).all()
        return [
            Manifest(**{**Manifest.from_json(r.manifest).__dict__, "token": r.token}) for r in rows
        ]

    def due_retries(self, sources: Iterable[str]) -> list[Manifest]:
        """Failed batches whose backoff has passed."""
        t = batches_table
        with self.engine.connect() as conn:
            ids = conn.scalars(
                sa.select(t.c.id).where(
                    t.c.state == "failed", t.c.source.in_(list(sources)),
                    t.c.not_before <= self.clock(),
                )
            ).all()
        wanted = set(ids)
        return [m for m in self.batches(["failed"], sources) if m.batch_id in wanted]

    def state_of(self, batch_id: str) -> str | None:
        """A batch's state, or None if unknown."""
        t = batches_table
        with self.engine.connect() as conn:
            return conn.scalar(sa.select(t.c.state).where(t.c.id == batch_id))

    def progress(self) -> list[SourceProgress]:
        """Per source: batches per state, items claimed, rows written, last error."""
        t = batches_table
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    t.c.source, t.c.state, sa.func.count(), sa.func.sum(t.c["items"]),
                    sa.func.sum(t.c.rows),
                ).group_by(t.c.source, t.c.state)
            ).all()
            errors = dict(
                conn.execute(
                    sa.select(t.c.source, t.c.error)
                    .where(t.c.error.is_not(None))
                    .order_by(t.c.updated_at)
                ).all()
            )
        by_source: dict[str, dict[str, Any]] = {}
        for source, state, count, items, written in rows:
            entry = by_source.setdefault(source, {"states": {}, "items": 0, "rows": 0})
            entry["states"][state] = count
            entry["items"] += int(items or 0)
            entry["rows"] += int(written or 0)
        return [
            SourceProgress(name, e["states"], e["items"], e["rows"], errors.get(name))
            for name, e in sorted(by_source.items())
        ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
