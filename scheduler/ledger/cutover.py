"""The cutover flag: ``sluice cutover`` asks every daemon on the ledger for a final pass.

One row in ``sluice_cutover`` (schema 0005). Daemons look for it each second
(:func:`cutover_requested`): once it is there, each feeds until its sources
are drained (keyset: to the end as it is now; sweep and incremental: a pass
that finds nothing new) and every batch is finished, then stops feeding and
exits. The flag stays: a daemon started later runs a final pass too, until
``sluice cutover --cancel`` clears it.
"""

from __future__ import annotations

import sqlalchemy as sa

from scheduler.ledger.schema import cutover_table
from scheduler.ledger.store import Ledger


def request_cutover(ledger: Ledger, by: str) -> float:
    """Set the flag (once: a second request keeps the first); when it was first requested."""
    t = cutover_table
    now = ledger.clock()

    def write(conn: sa.Connection) -> float:
        found = conn.scalar(sa.select(t.c.requested_at).where(t.c.id == 1))
        if found is not None:
            return float(found)
        conn.execute(t.insert().values(id=1, requested_at=now, requested_by=by[:200]))
        return now

    return ledger.writer.call(write)


def cancel_cutover(ledger: Ledger) -> bool:
    """Clear the flag: daemons started from now on feed as before. True if it was set."""

    def write(conn: sa.Connection) -> bool:
        return bool(conn.execute(cutover_table.delete()).rowcount)

    return ledger.writer.call(write)


def cutover_requested(engine: sa.Engine) -> float | None:
    """When a cutover was requested on the ledger at ``engine``, or None (one short query).

    None also for a ledger older than schema 0005 (no flag table yet).
    """
    t = cutover_table
    try:
        with engine.connect() as conn:
            found = conn.scalar(sa.select(t.c.requested_at).where(t.c.id == 1))
    except sa.exc.ProgrammingError:
        return None
    except sa.exc.OperationalError as error:
        if "no such table" in str(error):  # SQLite's words for it
            return None
        raise
    return None if found is None else float(found)
