"""Engines that read without writing: what ``plan``, ``status`` and ``verify`` look with."""

from __future__ import annotations

import sqlalchemy as sa

from spark_jobs.engines import url_traits


def readonly_engine(url: str) -> sa.Engine | None:
    """An engine that cannot write; None for a SQLite file that does not exist.

    Each engine's own way (:meth:`~spark_jobs.engines.sessions.Sessions.readonly_engine`):
    SQLite: ``mode=ro`` while a ``-wal`` file exists (a daemon may be writing;
    its companions already exist), else ``immutable=1``, which reads the file
    as it is without creating ``-wal``/``-shm`` files beside it. PostgreSQL:
    read-only transactions. Other databases only ever get SELECTs.
    """
    parsed = sa.make_url(url)
    return url_traits(parsed).readonly_engine(parsed)
