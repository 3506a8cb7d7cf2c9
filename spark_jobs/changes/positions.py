"""Where a target holds each change stream: the position of the last change it applied.

Read by the daemon's start (where each stream resumes), status and verify, and
forgotten by ``sluice reset``; written only by the batches' own transactions
(:mod:`.apply_changes`, :mod:`.load_ranges`).
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from spark_jobs.load.jdbc_tables import streams_table


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
    """Forget how far ``source`` is applied (``sluice reset``): its next batch starts over."""
    streams = streams_table()
    if not sa.inspect(engine).has_table(streams.name):
        return
    with engine.begin() as conn:
        conn.execute(streams.delete().where(streams.c.source == source))
