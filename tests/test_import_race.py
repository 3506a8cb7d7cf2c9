"""Two importers of one batch, in two processes, racing to commit it.

What the race is about is the commit transaction (:func:`commit_staged`):
staging is per attempt (each importer writes a table of its own, even with
the same token), so the commit is the only state two importers share. The
test therefore runs that step in two real processes, each with a staging
table it fills over plain SQL, rather than two Spark applications: two JVM
starts would cost ~20 s and still leave the interleaving to chance. Here it
is not left to chance: the test locks ``_sluice_commits``, waits until both
importers are blocked on it inside their commit, and only then lets them go,
so both are in the critical section at once.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import JdbcTargetConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.load.commit_jdbc import commit_staged
from spark_jobs.load.jdbc_tables import commits_table, create_if_missing, rejects_table
from spark_jobs.load.staging import drop_staging, staging_table
from spark_jobs.load.target import StaleToken, TargetTable

ROWS = 2_000
DEADLINE = 60.0  # seconds for the whole race; far more than it takes
COLUMNS = ("id", "label")


def _target(url: str) -> TargetTable:
    return TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=url), None, "items", ("id",))


def _manifest(token: int) -> Manifest:
    return Manifest("race-1", "src", "wh.items", "range", ROWS, token, [0], [ROWS])


def _stage(engine: sa.Engine, token: int) -> sa.Table:
    """A filled staging table of this attempt, labels saying which token wrote them."""
    columns = [sa.Column("id", sa.Integer()), sa.Column("label", sa.Text())]
    staging = staging_table(_manifest(token), columns, engine.dialect.name)
    with engine.begin() as conn:
        staging.create(conn)
        conn.execute(
            staging.insert(),
            [{"id": i, "label": f"t{token}-{i}", "_sluice_row": i} for i in range(ROWS)],
        )
    return staging


def importer(url: str, token: int, outcomes: Any) -> None:
    """One importer process: stage the batch, then commit it; report how it went."""
    engine = sql_engine(url)
    staging = None
    try:
        staging = _stage(engine, token)
        written = commit_staged(engine, _target(url), staging, COLUMNS, _manifest(token))
        outcomes.put((token, "ok", written.rows))
    except StaleToken as error:
        outcomes.put((token, "stale", str(error)))
    except BaseException as error:
        outcomes.put((token, "error", repr(error)))
    finally:
        if staging is not None:
            drop_staging(engine, staging)
        engine.dispose()


def _waiting_on_locks(engine: sa.Engine, database: str) -> int:
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = :db AND wait_event_type = 'Lock'"
    )
    with engine.connect() as conn:
        return int(conn.execute(query, {"db": database}).scalar_one())


@pytest.mark.postgres
@pytest.mark.parametrize(
    "tokens", [(1, 2), (2, 1), (1, 1)], ids=["older-first", "newer-first", "same-token"]
)
def test_two_processes_commit_one_batch_once(pg_url: str, tokens: tuple[int, int]) -> None:
    engine = sql_engine(pg_url)
    database = sa.make_url(pg_url).database or ""
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE items (id integer PRIMARY KEY, label text NOT NULL)")
    create_if_missing(engine, commits_table())
    create_if_missing(engine, rejects_table())
    spawn = multiprocessing.get_context("spawn")
    outcomes = spawn.Queue()
    deadline = time.monotonic() + DEADLINE
    processes = []
    gate = engine.connect()
    try:
        held = gate.begin()
        gate.exec_driver_sql("LOCK TABLE _sluice_commits IN EXCLUSIVE MODE")
        for n, token in enumerate(tokens, start=1):
            proc = spawn.Process(target=importer, args=(pg_url, token, outcomes))
            proc.start()
            processes.append(proc)
            # Both importers staged and blocked inside their commit, in order.
            while _waiting_on_locks(engine, database) < n:
                assert time.monotonic() < deadline, "the importers never reached their commit"
                assert proc.is_alive(), f"importer {token} ended early: {outcomes.get(timeout=1)}"
                proc.join(timeout=0.05)  # the poll interval, cut short if it dies
        held.commit()  # both go at once
    finally:
        gate.close()
        for proc in processes:
            proc.join(timeout=max(1.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
    results = {}
    for _ in processes:
        token, how, detail = outcomes.get(timeout=5)
        assert how != "error", detail
        results.setdefault(token, []).append((how, detail))

    newest = max(tokens)
    with engine.connect() as conn:
        labels = conn.execute(sa.text("SELECT label FROM items ORDER BY id")).scalars().all()
        commits = conn.execute(sa.text("SELECT batch_id, token, rows FROM _sluice_commits")).all()
        stages = conn.execute(
            sa.text("SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_sluice\\_stage%'")
        ).scalar_one()
    # One copy of the rows, written by the newest importer; one commit record.
    assert labels == [f"t{newest}-{i}" for i in range(ROWS)]
    assert [tuple(c) for c in commits] == [("race-1", newest, ROWS)]
    assert stages == 0
    # The newest importer always commits; an older one either commits first
    # (and is then overwritten) or is refused, never after the newer one.
    assert all(how == "ok" for how, _ in results[newest])
    for token in set(tokens) - {newest}:
        assert results[token][0][0] in ("ok", "stale")

    # A stale token arriving after the race is refused and changes nothing.
    if newest > 1:
        late = _stage(engine, 1)
        try:
            with pytest.raises(StaleToken, match=f"committed to wh.items with token {newest}"):
                commit_staged(engine, _target(pg_url), late, COLUMNS, _manifest(1))
        finally:
            drop_staging(engine, late)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT min(label) FROM items")).scalar_one() == (
                f"t{newest}-0"
            )
    engine.dispose()

