"""The staging tables of a JDBC target: one per import attempt, and their clean-up.

An attempt that cannot go straight into the target table writes its rows
into a staging table of its own (named after the batch, its token and the
attempt), which the commit transaction upserts from and the attempt drops.
What crashed attempts leave behind is dropped by the batch's next attempt
(:func:`drop_stale_stages`) or, for a batch that is committed and will not
run again, by :func:`sweep_committed_stages`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from spark_jobs.common.manifest import Manifest
from spark_jobs.engines import dialect_engine
from spark_jobs.load.jdbc_tables import ROW_COLUMN, commits_table

log = logging.getLogger(__name__)


def staging_prefix(batch_id: str) -> str:
    """The start of every staging table name of ``batch_id`` (a plain lowercase identifier)."""
    tag = re.sub(r"[^a-z0-9]+", "_", batch_id.lower()).strip("_")[:16]
    digest = hashlib.sha1(batch_id.encode()).hexdigest()[:8]
    return f"{STAGE_PREFIX}{tag}_{digest}_"


def staging_table_name(batch_id: str, token: int, attempt: str | None = None) -> str:
    """``_sluice_stage_<batch>_<digest>_<token>_<attempt>``: unique per import attempt.

    Two importers of one batch (a takeover, or the same manifest run twice)
    never write into the same staging table. At most 58 characters, so that
    an index name derived from it fits PostgreSQL's and MySQL's limits.
    """
    return f"{staging_prefix(batch_id)}{token}_{attempt or uuid.uuid4().hex[:6]}"


def staging_table(manifest: Manifest, columns: Sequence[sa.Column], dialect: str) -> sa.Table:
    """A new staging table for one attempt: the batch's columns, nullable, and the row number.

    On PostgreSQL it is UNLOGGED: its rows are written once, read once by the
    commit and dropped, so writing them to the WAL too would only cost time
    (a crash empties it, and the attempt is re-run anyway).
    """
    return sa.Table(
        staging_table_name(manifest.batch_id, manifest.token),
        sa.MetaData(),
        *[sa.Column(c.name, c.type, nullable=True) for c in columns],
        sa.Column(ROW_COLUMN, sa.BigInteger, nullable=False),
        prefixes=list(dialect_engine(dialect).staging_prefixes),
    )


def drop_stale_stages(engine: sa.Engine, manifest: Manifest) -> None:
    """Drop this batch's staging tables left by older tokens (crashed attempts).

    Best effort: a table still in use by a stale importer makes that importer
    fail, which is what should happen to it anyway.
    """
    prefix = staging_prefix(manifest.batch_id)
    stale = []
    for name in sa.inspect(engine).get_table_names():
        parts = _staging_parts(name)
        if parts is not None and parts[0] == prefix and parts[1] < manifest.token:
            stale.append(name)
    for name in stale:
        drop_staging(engine, sa.Table(name, sa.MetaData()))


def drop_staging(engine: sa.Engine, staging: sa.Table) -> None:
    """Drop a staging table if it exists; log, never raise (the next attempt cleans up).

    ``DROP TABLE IF EXISTS`` rather than a catalog look-up first: one round
    trip per batch fewer.
    """
    try:
        # Do not wait long on a lock held by a stuck importer.
        with engine.begin() as conn, dialect_engine(conn.dialect).lock_wait(conn, 5):
            conn.execute(sa.schema.DropTable(staging, if_exists=True))
    except sa.exc.SQLAlchemyError as error:
        log.warning("could not drop staging table %s: %s", staging.name, error)


STAGE_PREFIX = "_sluice_stage_"

STAGES_SWEPT_EVERY = 600.0
"""Seconds between two sweeps of a database's leftover staging tables, per process."""

_stages_swept_at: dict[str, float] = {}
_sweep_lock = threading.Lock()


def sweep_committed_stages(
    engine: sa.Engine, now: Callable[[], float] = time.monotonic
) -> list[str]:
    """Drop the staging tables of batches the target committed; return their names.

    A staging table outlives its attempt when the attempt's own drop fails
    after its commit, or when a crash comes between the two; a re-run of the
    batch under a newer token drops older tokens' tables
    (:func:`drop_stale_stages`), but a committed batch may never run again.
    So, at most every :data:`STAGES_SWEPT_EVERY` seconds per database, the
    tables whose batch ``_sluice_commits`` holds at their token or a later
    one go: no importer of that token can commit any more. A table of a
    token above the commit's (a takeover still importing) stays. Best
    effort, like :func:`drop_staging`: a sweep never fails a batch.
    """
    url = engine.url.render_as_string(hide_password=True)
    with _sweep_lock:
        last = _stages_swept_at.get(url)
        if last is not None and now() - last < STAGES_SWEPT_EVERY:
            return []
        _stages_swept_at[url] = now()
    try:
        names = [n for n in sa.inspect(engine).get_table_names() if n.startswith(STAGE_PREFIX)]
        if not names:
            return []
        commits = commits_table()
        with engine.connect() as conn:
            rows = conn.execute(sa.select(commits.c.batch_id, commits.c.token)).all()
    except sa.exc.SQLAlchemyError as error:
        log.warning("could not look for leftover staging tables: %s", error)
        return []
    committed = {staging_prefix(batch_id): token for batch_id, token in rows}
    swept = []
    for name in names:
        parts = _staging_parts(name)
        if parts is not None and parts[1] <= committed.get(parts[0], -1):
            drop_staging(engine, sa.Table(name, sa.MetaData()))
            swept.append(name)
    if swept:
        log.info("dropped %d staging table(s) of committed batches: %s", len(swept), swept)
    return swept


def index_staging_rows(engine: sa.Engine, staging: sa.Table) -> None:
    """Index the row numbers, so that each half of a split batch is a range scan.

    Only done when a batch must be split: the happy path reads the staging
    table once, whole. Outside the commit transaction, as MySQL commits
    implicitly on DDL.
    """
    index = sa.Index(f"{staging.name}_r", staging.c[ROW_COLUMN])
    with engine.begin() as conn:
        index.create(conn)


def _staging_parts(name: str) -> tuple[str, int] | None:
    """``(prefix, token)`` of a staging table's name; None for any other table.

    The name is ``<prefix><token>_<attempt>`` (:func:`staging_table_name`),
    the prefix ending in ``_``; its tag may hold more of them.
    """
    if not name.startswith(STAGE_PREFIX) or name.count("_") < 3:
        return None
    head, token, attempt = name.rsplit("_", 2)
    if not (token.isdigit() and attempt):
        return None
    return head + "_", int(token)
