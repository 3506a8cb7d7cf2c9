"""Owners and leases: who holds a batch, who is alive, and when another daemon may take over.

Every daemon registers as an owner and heartbeats; each batch it claims or
begins carries a lease. The takeover rule (:meth:`Owners.lapsed`) is SQL, so
that deciding a batch is orphaned and taking it over are one compare-and-set.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable

import sqlalchemy as sa

from config.processes import pid_alive
from scheduler.ledger.outage import ride_out
from scheduler.ledger.schema import SCHEMA, UNFINISHED, batches_table, owners_table
from scheduler.ledger.writer import SerialWriter

DEAD_AFTER = 30.0
"""Seconds without a heartbeat after which an owner counts as dead."""


class Owners:
    """This process as an owner of batches, and the rule by which owners lose them."""

    def __init__(
        self, engine: sa.Engine, writer: SerialWriter, owner: str,
        clock: Callable[[], float], lease_ttl: float,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.writer = writer
        self.owner = owner
        self.clock = clock
        self.lease_ttl = lease_ttl

    def register(self) -> None:
        """Announce this process as a live owner of batches."""
        now = self.clock()

        def write(conn: sa.Connection) -> None:
            conn.execute(owners_table.delete().where(owners_table.c.owner == self.owner))
            conn.execute(
                owners_table.insert().values(
                    owner=self.owner, host=socket.gethostname(), pid=os.getpid(),
                    started_at=now, heartbeat_at=now, sluice_version=sluice_version(),
                    schema=SCHEMA,
                )
            )

        self.writer.call(write)

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

        return self.writer.call(write)

    def unregister(self) -> None:
        """This process stops: its unfinished batches may be taken over at once."""
        t = batches_table

        def write(conn: sa.Connection) -> None:
            conn.execute(owners_table.delete().where(owners_table.c.owner == self.owner))
            conn.execute(
                t.update()
                .where(t.c.owner == self.owner, t.c.state.in_(UNFINISHED))
                .values(lease_until=0.0)
            )

        self.writer.call(write)

    def live(self, dead_after: float = DEAD_AFTER) -> list[str]:
        """The owners alive now: a heartbeat within ``dead_after`` seconds, and,
        on this host, a process that still exists (this one always counts)."""
        o = owners_table
        host = socket.gethostname()

        def read() -> list[str]:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    sa.select(o.c.owner, o.c.host, o.c.pid)
                    .where(o.c.heartbeat_at >= self.clock() - dead_after)
                ).all()
            return sorted(
                {r.owner for r in rows if r.host != host or pid_alive(r.pid)} | {self.owner}
            )

        return ride_out(read, self.writer.patience)

    def orphan_ids(self, sources: Iterable[str], dead_after: float = DEAD_AFTER) -> set[str]:
        """Unfinished batches of other owners that this daemon may take over (:meth:`lapsed`)."""
        t = batches_table

        def read() -> set[str]:
            with self.engine.connect() as conn:
                return set(
                    conn.scalars(
                        sa.select(t.c.id).where(
                            t.c.state.in_(UNFINISHED), t.c.source.in_(list(sources)),
                            sa.or_(t.c.owner.is_(None), t.c.owner != self.owner),
                            self.lapsed(conn, self.clock(), dead_after),
                        )
                    )
                )

        return ride_out(read, self.writer.patience)

    def lapsed(self, conn: sa.Connection, now: float, dead_after: float) -> sa.ColumnElement[bool]:
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
            if row.pid != me and not pid_alive(row.pid)
        ]
        alive = sa.select(o.c.owner).where(o.c.heartbeat_at >= now - dead_after)
        return sa.or_(
            sa.func.coalesce(t.c.lease_until, 0.0) < now,
            t.c.owner.is_(None),
            t.c.owner.not_in(alive),
            t.c.owner.in_(dead_here),
        )


def sluice_version() -> str:
    """The installed sluice's version ("unknown" when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sluice")
    except PackageNotFoundError:
        return "unknown"
