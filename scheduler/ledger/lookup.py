"""Which batch holds a record: by key for key-list batches, by range for keyset batches.

A key-list batch (sweep, incremental, SQS) holds its keys in ``sluice_keys``,
whose primary key ``(source, key, version)`` finds a key's rows by one index
probe. A keyset batch is a range ``(lo, hi]`` in the source's key order, which
only the source database knows (a text key's collation): the ledger cannot
compare keys in SQL. It keeps each range's place in its source's claim order
instead (``range_seq``, schema 0004): ranges are claimed one after the other
from the high-water mark, so their ends rise with it, and the range holding a
key is the first whose ``hi`` is not below the key. That is a binary search
over the ``(source, range_seq)`` index, a dozen probes for ten thousand
ranges, each comparison made by the caller (in the source's order).

Read-only; :class:`RecordReads` puts them in the one read API,
:class:`~scheduler.ledger.reads.LedgerReads`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from scheduler.ledger.outage import Patience, reads_ride_out
from scheduler.ledger.schema import batches_table, keys_table, open_engine
from spark_jobs.engines import url_traits

AtOrBelow = Callable[[list[Any]], bool]
"""Whether the key looked for is at or below the given range end, in the source's order."""

_COLUMNS = (
    "id", "source", "target", "kind", "state", "attempts", "token", "owner", "error", "items",
    "rows", "rejected", "created_at", "updated_at", "lease_until", "not_before",
)  # fmt: skip


@dataclass(frozen=True)
class HeldBy:
    """A batch as the ledger records it, with what ties a record to it.

    ``version``: the key's version in a key-list batch (the cursor value in
    incremental mode, empty otherwise); ``lo``/``hi``: a range batch's ends
    (``lo`` None: from the start).
    """

    id: str
    source: str
    target: str
    kind: str
    state: str
    attempts: int
    token: int
    owner: str | None
    error: str | None
    items: int
    rows: int | None
    rejected: int | None
    created_at: float
    updated_at: float
    lease_until: float | None
    not_before: float | None
    version: str | None = None
    lo: list[Any] | None = None
    hi: list[Any] | None = None


@reads_ride_out
class RecordReads:
    """The record look-ups of :class:`~scheduler.ledger.reads.LedgerReads` (its base)."""

    engine: sa.Engine
    patience: Patience
    _ranges_numbered = False  # schema 0004 on: ranges have their place in claim order

    def holding_keys(self, source: str, encoded: list[str]) -> list[HeldBy]:
        """The batches holding any of the encoded keys (at any version), newest first."""
        with self.engine.connect() as conn:
            return batches_holding(conn, source, encoded)

    def covering_range(self, source: str, at_or_below: AtOrBelow) -> HeldBy | None:
        """The keyset range of ``source`` that holds a key, or None: not claimed yet.

        ``at_or_below(hi)`` says whether the key is at or below a range's
        end, in the source's own order.
        """
        with self.engine.connect() as conn:
            if not self._ranges_numbered:  # read-only commands read older ledgers too
                have = {c["name"] for c in sa.inspect(conn).get_columns(batches_table.name)}
                self._ranges_numbered = "range_seq" in have
            if self._ranges_numbered:
                return range_holding(conn, source, at_or_below)
            return range_holding_by_chain(conn, source, at_or_below)


def batches_holding(conn: sa.Connection, source: str, encoded: Sequence[str]) -> list[HeldBy]:
    """The batches holding any of the encoded keys (every version), newest first.

    One query: the keys by ``sluice_keys``' primary key, their batches by theirs.
    """
    k, b = keys_table, batches_table
    rows = conn.execute(
        sa.select(k.c.version, *(b.c[name] for name in _COLUMNS))
        .join(b, b.c.id == k.c.batch_id)
        .where(k.c.source == source, k.c.key.in_(list(dict.fromkeys(encoded))))
        .order_by(b.c.created_at.desc())
    ).all()
    return [HeldBy(**{name: row._mapping[name] for name in _COLUMNS}, version=row.version)
            for row in rows]  # fmt: skip


def range_holding(conn: sa.Connection, source: str, at_or_below: AtOrBelow) -> HeldBy | None:
    """The range batch of ``source`` whose ``(lo, hi]`` holds the key, or None.

    None when the key is past every range claimed (not claimed yet).
    ``at_or_below(hi)`` is asked about a dozen range ends (a binary search
    over ``range_seq``); it may query the source database.
    """
    b = batches_table
    mine = sa.and_(b.c.source == source, b.c.range_seq.is_not(None))
    first, last = conn.execute(
        sa.select(sa.func.min(b.c.range_seq), sa.func.max(b.c.range_seq)).where(mine)
    ).one()
    if first is None:
        return None

    def first_from(lo: int, hi: int) -> tuple[int, list[Any]] | None:
        # The first range at or after ``lo`` (claim order may have gaps).
        row = conn.execute(
            sa.select(b.c.range_seq, b.c.manifest)
            .where(mine, b.c.range_seq >= lo, b.c.range_seq <= hi)
            .order_by(b.c.range_seq)
            .limit(1)
        ).first()
        return None if row is None else (int(row.range_seq), json.loads(row.manifest)["hi"])

    found = _first_at_or_above(first, last, first_from, at_or_below)
    if found is None:
        return None
    row = conn.execute(
        sa.select(*(b.c[name] for name in _COLUMNS), b.c.manifest).where(
            mine, b.c.range_seq == found
        )
    ).one()
    return _range_row(row)


def range_holding_by_chain(
    conn: sa.Connection, source: str, at_or_below: AtOrBelow
) -> HeldBy | None:
    """:func:`range_holding` for a ledger before schema 0004 (no ``range_seq``).

    Reads every range of the source and puts them in claim order by their
    ends (:func:`chain_order`): as many rows as ranges, for read-only
    commands on a ledger a running daemon of an older sluice still uses.
    """
    b = batches_table
    rows = conn.execute(
        sa.select(*(b.c[name] for name in _COLUMNS), b.c.manifest)
        .where(b.c.source == source, b.c.kind == "range")
        .order_by(b.c.created_at)
    ).all()
    by_id = {row.id: row for row in rows}
    ordered = chain_order((row.id, row.manifest) for row in rows)
    if not ordered:
        return None

    def first_from(lo: int, hi: int) -> tuple[int, list[Any]] | None:
        return lo, json.loads(by_id[ordered[lo]].manifest)["hi"]

    found = _first_at_or_above(0, len(ordered) - 1, first_from, at_or_below)
    return None if found is None else _range_row(by_id[ordered[found]])


def chain_order(ranges: Iterable[tuple[str, str]]) -> list[str]:
    """Range batch ids in claim order, from ``(id, manifest JSON)`` in creation order.

    Each range starts where the one claimed before it ended (its ``lo`` is
    that ``hi``), the first from the start: following the ends needs no key
    comparison. Ranges off that chain (none, unless rows were edited by
    hand) follow in the order given.
    """
    by_lo: dict[str, list[tuple[str, str]]] = {}
    given = []
    for batch_id, manifest in ranges:
        parsed = json.loads(manifest)
        by_lo.setdefault(_end(parsed["lo"]), []).append((batch_id, _end(parsed["hi"])))
        given.append(batch_id)
    ordered: list[str] = []
    end = _end(None)
    while by_lo.get(end):
        batch_id, end = by_lo[end].pop(0)
        ordered.append(batch_id)
    placed = set(ordered)
    return ordered + [batch_id for batch_id in given if batch_id not in placed]


def _end(value: list[Any] | None) -> str:
    return json.dumps(value, separators=(",", ":"))


def _first_at_or_above(
    lo: int, hi: int, first_from: Callable[[int, int], tuple[int, list[Any]] | None],
    at_or_below: AtOrBelow,
) -> int | None:  # fmt: skip
    """The smallest position in ``[lo, hi]`` whose range end the key is at or below.

    ``first_from(a, b)``: the first position in ``[a, b]`` that exists, with
    its range end. Range ends rise with the position, so the answer is found
    by halving.
    """
    found = None
    while lo <= hi:
        probe = first_from((lo + hi) // 2, hi)
        if probe is None:  # nothing from the middle on: look below it
            hi = (lo + hi) // 2 - 1
            continue
        position, end = probe
        if at_or_below(end):
            found, hi = position, (lo + hi) // 2 - 1
        else:
            lo = position + 1
    return found


def _range_row(row: Any) -> HeldBy:
    manifest = json.loads(row.manifest)
    values = {name: row._mapping[name] for name in _COLUMNS}
    return HeldBy(**values, lo=manifest["lo"], hi=manifest["hi"])


def reader_engine(url: str, connections: int = 2) -> sa.Engine:
    """An engine of its own for a reader beside a running daemon (``/record``).

    A few connections: a burst of requests waits for them, never for the
    daemon's. SQLite in WAL mode, as the daemon opens it: readers run beside
    its writer.
    """
    if url_traits(url).file_database:
        return open_engine(url)
    return sa.create_engine(url, pool_pre_ping=True, pool_size=connections, max_overflow=0)
