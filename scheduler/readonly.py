"""Engines that read without writing: what ``plan``, ``status`` and ``verify`` look with."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa


def readonly_engine(url: str) -> sa.Engine | None:
    """An engine that cannot write; None for a SQLite file that does not exist.

    SQLite: ``mode=ro`` while a ``-wal`` file exists (a daemon may be writing;
    its companions already exist), else ``immutable=1``, which reads the file
    as it is without creating ``-wal``/``-shm`` files beside it. PostgreSQL:
    read-only transactions. Other databases only ever get SELECTs.
    """
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return sa.create_engine(parsed)
        path = Path(database)
        if not path.is_file():
            return None
        flag = {"mode": "ro"} if Path(f"{database}-wal").exists() else {"immutable": "1"}
        uri = sa.URL.create("sqlite", database=f"file:{quote(str(path.resolve()))}",
                            query={**flag, "uri": "true"})
        return sa.create_engine(uri)
    engine = sa.create_engine(parsed, pool_size=1, max_overflow=0, pool_pre_ping=True)
    if parsed.get_backend_name() == "postgresql":
        with suppress(sa.exc.ArgumentError):
            engine = engine.execution_options(postgresql_readonly=True)
    return engine
