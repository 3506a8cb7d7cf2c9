"""Where a target holds each change stream: the position of the last change it applied.

Read by the daemon's start (where each stream resumes), status and verify, and
forgotten by ``sluice reset``; written only by the batches' own transactions
(:mod:`.apply_changes`, :mod:`.load_ranges`). Beside it, where a verify of a live
stream proved the table equal (``_sluice_verified``, see :mod:`scheduler.verify_marks`):
written by ``sluice verify`` and the cutover, forgotten with the position.
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from spark_jobs.load.jdbc_tables import create_if_missing, streams_table

VERIFIED_TABLE = "_sluice_verified"
"""In a JDBC target, one row per stream a verify proved equal: from which position on the
source's changes must be compared again."""


def verified_table(metadata: sa.MetaData | None = None) -> sa.Table:
    """``_sluice_verified``: per stream source, the position from which on its changes were not
    yet compared (every row no change from there on touched was equal), and when."""
    return sa.Table(
        VERIFIED_TABLE,
        metadata or sa.MetaData(),
        sa.Column("source", sa.String(255), primary_key=True),
        sa.Column("since", sa.BigInteger, nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=False),
    )


def stream_position(engine: sa.Engine, source: str) -> list[int] | None:
    """The position of the last change of ``source`` the target holds; None when none."""
    streams = streams_table()
    if not sa.inspect(engine).has_table(streams.name):
        return None
    with engine.connect() as conn:
        text = conn.execute(
            sa.select(streams.c.position).where(streams.c.source == source)
        ).scalar_one_or_none()
    return None if text is None else list(json.loads(text))


def stream_positions(engine: sa.Engine) -> dict[str, list[int]]:
    """The position of every stream the target holds changes of, by source."""
    streams = streams_table()
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.select(streams.c.source, streams.c.position)).all()
    except sa.exc.ProgrammingError:  # no stream has written here yet: no table
        return {}
    return {source: list(json.loads(text)) for source, text in found if text is not None}


def forget_stream(engine: sa.Engine, source: str) -> None:
    """Forget how far ``source`` is applied (``sluice reset``): its next batch starts over;
    and where a verify proved it equal."""
    inspector = sa.inspect(engine)
    with engine.begin() as conn:
        for table in (streams_table(), verified_table()):
            if inspector.has_table(table.name):
                conn.execute(table.delete().where(table.c.source == source))


def verified_since(engine: sa.Engine, source: str) -> int | None:
    """The position from which on ``source``'s changes were not compared by the last verify
    that proved its table equal; None: no such verify (or a reset since)."""
    marks = verified_table()
    if not sa.inspect(engine).has_table(marks.name):
        return None
    with engine.connect() as conn:
        found = conn.execute(sa.select(marks.c.since).where(marks.c.source == source))
        return found.scalar_one_or_none()


def keep_verified(engine: sa.Engine, source: str, since: int | None) -> None:
    """Keep that ``source``'s table is proven equal but for its changes from ``since`` on
    (None: forget any such proof)."""
    marks = verified_table()
    create_if_missing(engine, marks)
    with engine.begin() as conn:
        conn.execute(marks.delete().where(marks.c.source == source))
        if since is not None:
            conn.execute(marks.insert().values(source=source, since=since,
                                               verified_at=dt.datetime.now(dt.UTC)))  # fmt: skip
