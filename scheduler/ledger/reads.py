"""The one read API of the ledger: counts, progress and batch look-ups, never a write.

``sluice status``, ``sluice plan``, the metrics endpoint and the daemon read
the ledger only through :class:`LedgerReads`, so that a state, a count or a
column means the same everywhere. It takes an engine, not a :class:`Ledger`:
``plan`` and ``status`` read a ledger they must not create or upgrade.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from scheduler.ledger.lookup import RecordReads
from scheduler.ledger.migrate import revision
from scheduler.ledger.outage import Patience, reads_ride_out
from scheduler.ledger.schema import (
    STATES,
    batches_table,
    decode_key,
    decode_position,
    keys_table,
    owners_table,
    poison_table,
    sources_table,
)
from spark_jobs.common.manifest import Manifest

StateCounts = dict[tuple[str, str], tuple[int, int]]
"""(source, state) -> (batches, rows written)."""


@dataclass(frozen=True)
class SourceProgress:
    """Counts of one source's batches per state, and rows written."""

    source: str
    states: dict[str, int]
    items: int
    rows: int
    last_error: str | None


@dataclass(frozen=True)
class DeadBatch:
    """A batch that used up its attempts, with the error that killed it."""

    id: str
    attempts: int
    error: str | None
    updated_at: float


@dataclass(frozen=True)
class Owner:
    """A daemon registered in the ledger, and how long ago it last said it was alive."""

    owner: str
    heartbeat_age_s: float
    sluice_version: str | None = None  # None: a daemon of a sluice before schema 0002


@dataclass
class SourceFigures:
    """Every figure the ledger holds about one source (what ``status`` shows)."""

    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    items: int = 0  # keys claimed, in batches of any state
    rows: int = 0  # rows written by done batches
    rejected: int = 0  # rows the targets refused, in done batches
    recent_rows: int = 0  # rows of batches done since the ``since`` asked for
    first_created: float | None = None
    last_error: str | None = None
    poison: int = 0
    high_water: list[Any] | None = None  # keyset: the last key claimed
    dead: list[DeadBatch] = field(default_factory=list)
    # MySQL zero dates made NULL by done batches, per column (schema 0006)
    zero_dates: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedSource:
    """A source as the ledger recorded it: its fingerprint, claim high-water mark
    and (incremental, schema 0003 on) resume point."""

    fingerprint: str
    high_water: list[Any] | None
    resume_after: list[Any] | None = None


_IN_LIST = 64
"""Sources named in a query's ``IN (…)``; more are picked from its rows instead (a loop that
asked for 1,000 tables' unfinished batches twice a second compiled 1,000 parameters each
time, and the few rows in those states are quicker to filter)."""


@reads_ride_out
class LedgerReads(RecordReads):
    """Read-only queries on the ``sluice_*`` tables of ``engine``; which batch holds
    a record (:class:`~.lookup.RecordReads`: ``holding_keys``, ``covering_range``).

    ``patience``: how long each read waits for an unreachable ledger
    (:mod:`.outage`); none, for commands an operator runs, reports it at once.
    """

    def __init__(self, engine: sa.Engine, patience: Patience | None = None) -> None:
        self.engine = engine
        self.patience = patience or Patience()

    def has_tables(self) -> bool:
        """Whether a ledger was ever created in this database."""
        with self.engine.connect() as conn:
            return sa.inspect(conn).has_table(sources_table.name)

    # -- batches -----------------------------------------------------------------------

    def batches(
        self, states: Iterable[str], sources: Iterable[str] | None = None,
        *where: sa.ColumnElement[bool],
    ) -> list[Manifest]:  # fmt: skip
        """Manifests of the batches in the given states (oldest first), with their tokens.

        ``where``: more conditions on ``sluice_batches``.
        """
        t = batches_table
        query = sa.select(t.c.manifest, t.c.token, t.c.source).where(
            t.c.state.in_(list(states)), *where)  # fmt: skip
        named = None if sources is None else set(sources)
        if named is not None and len(named) <= _IN_LIST:
            query, named = query.where(t.c.source.in_(sorted(named))), None
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(t.c.created_at)).all()
        return [
            Manifest(**{**Manifest.from_json(r.manifest).__dict__, "token": r.token}) for r in rows
            if named is None or r.source in named
        ]

    def due_retries(self, sources: Iterable[str], now: float) -> list[Manifest]:
        """Failed batches whose backoff has passed by ``now``, and those that may run again at
        once (an attempt not counted: no backoff)."""
        due = batches_table.c.not_before
        return self.batches(["failed"], sources, sa.or_(due.is_(None), due <= now))

    def state_of(self, batch_id: str) -> str | None:
        """A batch's state, or None if unknown."""
        t = batches_table
        with self.engine.connect() as conn:
            return conn.scalar(sa.select(t.c.state).where(t.c.id == batch_id))

    def batch_ids(self, states: Iterable[str], sources: Iterable[str]) -> dict[str, str]:
        """Batch id → source of the batches in ``states`` (oldest first)."""
        b = batches_table
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(b.c.id, b.c.source)
                .where(b.c.state.in_(list(states)), b.c.source.in_(list(sources)))
                .order_by(b.c.created_at)
            ).all()
        return {batch_id: source for batch_id, source in found}

    # -- keys --------------------------------------------------------------------------

    def taken(self, source: str, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which (encoded key, version) pairs some batch of ``source`` already holds."""
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

    def claimed_keys(self, source: str, encoded: list[str], version: str = "") -> set[str]:
        """Which of the encoded keys (at ``version``) some batch already holds."""
        return {text for text, _ in self.taken(source, [(text, version) for text in encoded])}

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

    def claimed_key_counts(self) -> dict[str, int]:
        """Keys claimed so far, per source (key-list and SQS sources)."""
        k = keys_table
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(k.c.source, sa.func.count()).group_by(k.c.source))
            return {source: int(n) for source, n in found}

    # -- sources -----------------------------------------------------------------------

    def recorded_sources(self) -> dict[str, RecordedSource]:
        """Every source the ledger knows, by name."""
        t = sources_table
        with self.engine.connect() as conn:
            # Read-only commands read older ledgers as they are: before 0003, no resume points.
            have = {c["name"] for c in sa.inspect(conn).get_columns(t.name)}
            resume = t.c.resume_after if "resume_after" in have else sa.null()
            rows = conn.execute(
                sa.select(t.c.name, t.c.fingerprint, t.c.high_water, resume.label("resume"))
            ).all()
        return {
            r.name: RecordedSource(
                r.fingerprint, decode_key(r.high_water), decode_position(r.resume)
            )
            for r in rows
        }

    def poison_count(self, source: str) -> int:
        """Messages of a source recorded as poison."""
        with self.engine.connect() as conn:
            return int(
                conn.scalar(sa.select(sa.func.count()).where(poison_table.c.source == source)) or 0
            )

    def schema(self) -> str | None:
        """The ledger's schema revision (None: no ledger in this database)."""
        with self.engine.connect() as conn:
            return revision(conn)

    def owners_seen(self, now: float) -> list[Owner]:
        """The registered daemons, the age of their last heartbeat at ``now``, their sluice."""
        o = owners_table
        columns = [o.c.owner, o.c.heartbeat_at]
        with self.engine.connect() as conn:
            if revision(conn) != "0001":  # schema 0001 has no versions (read-only: no upgrade)
                columns.append(o.c.sluice_version)
            found = conn.execute(sa.select(*columns).order_by(o.c.owner)).all()
        return [Owner(row[0], max(0.0, now - row[1]), *row[2:]) for row in found]

    # -- counts ------------------------------------------------------------------------

    def state_counts(self, sources: Iterable[str] | None = None) -> StateCounts:
        """Batches and rows written per source and state."""
        b = batches_table
        query = sa.select(b.c.source, b.c.state, sa.func.count(), sa.func.sum(b.c.rows))
        if sources is not None:
            query = query.where(b.c.source.in_(list(sources)))
        with self.engine.connect() as conn:
            found = conn.execute(query.group_by(b.c.source, b.c.state)).all()
        return {(source, state): (int(n), int(rows or 0)) for source, state, n, rows in found}

    def unfinished(self, states: Iterable[str]) -> dict[str, tuple[int, int]]:
        """Per source, the batches in ``states`` and the items they hold."""
        b = batches_table
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(b.c.source, sa.func.count(), sa.func.sum(b.c["items"]))
                .where(b.c.state.in_(list(states))).group_by(b.c.source)
            ).all()
        return {source: (int(n), int(items or 0)) for source, n, items in found}

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

    def figures(
        self, names: list[str], since: float, dead_shown: int = 10
    ) -> dict[str, SourceFigures]:
        """Every figure of every named source, in one connection; ``since`` bounds recent rows."""
        b, found = batches_table, {name: SourceFigures() for name in names}
        mine = b.c.source.in_(names)
        with self.engine.connect() as conn:
            for source, state, count, items, written, rejected, first in conn.execute(
                sa.select(b.c.source, b.c.state, sa.func.count(), sa.func.sum(b.c["items"]),
                          sa.func.sum(b.c.rows), sa.func.sum(b.c.rejected),
                          sa.func.min(b.c.created_at))
                .where(mine).group_by(b.c.source, b.c.state)
            ):  # fmt: skip
                row = found[source]
                row.states[state] = int(count)
                row.items += int(items or 0)
                if state == "done":
                    row.rows, row.rejected = int(written or 0), int(rejected or 0)
                row.first_created = min(first, row.first_created or first)
            for source, written in conn.execute(
                sa.select(b.c.source, sa.func.sum(b.c.rows))
                .where(mine, b.c.state == "done", b.c.updated_at >= since).group_by(b.c.source)
            ):
                found[source].recent_rows = int(written or 0)
            _add_zero_dates(conn, mine, found)
            for source, count in conn.execute(
                sa.select(poison_table.c.source, sa.func.count())
                .where(poison_table.c.source.in_(names)).group_by(poison_table.c.source)
            ):
                found[source].poison = int(count)
            for source, high_water in conn.execute(
                sa.select(sources_table.c.name, sources_table.c.high_water)
                .where(sources_table.c.name.in_(names))
            ):
                found[source].high_water = decode_key(high_water)
            _add_last_errors(conn, mine, found)
            for name, row in found.items():
                if row.states["dead"]:
                    row.dead = [
                        DeadBatch(r.id, r.attempts, r.error, r.updated_at)
                        for r in conn.execute(
                            sa.select(b.c.id, b.c.attempts, b.c.error, b.c.updated_at)
                            .where(b.c.source == name, b.c.state == "dead")
                            .order_by(b.c.updated_at.desc()).limit(dead_shown)
                        )
                    ]
        return found


def _add_last_errors(conn: sa.Connection, mine: Any, found: dict[str, SourceFigures]) -> None:
    """Add each source's latest batch error, one query for them all (a query per source
    took ~0.25 s of every read with 1,000 tables)."""
    b = batches_table
    failed = b.c.error.is_not(None)
    latest = (sa.select(b.c.source, sa.func.max(b.c.updated_at).label("at"))
              .where(mine, failed).group_by(b.c.source).subquery())  # fmt: skip
    for source, error in conn.execute(
        sa.select(b.c.source, b.c.error).join(
            latest, sa.and_(b.c.source == latest.c.source, b.c.updated_at == latest.c.at)
        ).where(failed)
    ):  # fmt: skip
        found[source].last_error = error


def _add_zero_dates(conn: sa.Connection, mine: Any, found: dict[str, SourceFigures]) -> None:
    """Add the zero dates done batches made NULL to each source's figures, per column."""
    b = batches_table
    # Read-only commands read older ledgers as they are: before 0006, no zero dates.
    if "zero_dates" not in {c["name"] for c in sa.inspect(conn).get_columns(b.name)}:
        return
    for source, zeros in conn.execute(
        sa.select(b.c.source, b.c.zero_dates)
        .where(mine, b.c.state == "done", b.c.zero_dates.is_not(None))
    ):
        counts = found[source].zero_dates
        for column, count in json.loads(zeros).items():
            counts[column] = counts.get(column, 0) + int(count)
