"""Staging tables that outlive their attempt are dropped once their batch is committed.

A crash between a batch's target commit and its staging table's drop (or a
drop that failed after the commit) used to leave the table for good when
the batch was never re-run under a newer token. The sweep reads
``_sluice_commits`` and drops what no importer can commit any more.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from spark_jobs.load.jdbc_tables import commits_table, ensure_own_tables
from spark_jobs.load.staging import STAGES_SWEPT_EVERY, staging_table_name, sweep_committed_stages
from tests.helpers import FakeClock


def _tables(engine: sa.Engine) -> set[str]:
    return {n for n in sa.inspect(engine).get_table_names() if n.startswith("_sluice_stage_")}


def _stage(engine: sa.Engine, batch_id: str, token: int, attempt: str) -> str:
    name = staging_table_name(batch_id, token, attempt)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {name} (id integer)")
    return name


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_a_committed_batchs_leftover_staging_tables_are_swept(
    database: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_url" if database == "postgresql" else "mariadb_url")
    engine = sa.create_engine(url)
    ensure_own_tables(engine)
    # A batch id with underscores: its tag in the table name holds them too.
    committed, open_batch = "orders_keyset_0007", "orders-0008"
    with engine.begin() as conn:
        conn.execute(
            sa.insert(commits_table()),
            [{"batch_id": committed, "token": 3, "rows": 10, "committed_at": dt.datetime.now()}],
        )
    dead = {
        _stage(engine, committed, 3, "a1b2c3"),  # the committing attempt's own (same token)
        _stage(engine, committed, 2, "d4e5f6"),  # an older token's
    }
    alive = {
        _stage(engine, committed, 4, "0a0b0c"),  # a newer token still importing
        _stage(engine, open_batch, 1, "112233"),  # a batch not committed yet
    }
    clock = FakeClock()

    assert set(sweep_committed_stages(engine, now=clock)) == dead
    assert _tables(engine) == alive

    # Within the interval the database is not looked at again ...
    late = _stage(engine, committed, 1, "445566")
    clock.now += STAGES_SWEPT_EVERY - 1
    assert sweep_committed_stages(engine, now=clock) == []
    assert _tables(engine) == alive | {late}
    # ... after it, it is.
    clock.now += 2
    assert sweep_committed_stages(engine, now=clock) == [late]
    assert _tables(engine) == alive
    engine.dispose()


def test_a_sweep_that_cannot_read_the_target_fails_nothing(pg_url: str) -> None:
    """No ``_sluice_commits`` yet (or a database error): the sweep logs and drops nothing."""
    engine = sa.create_engine(pg_url)
    stage = _stage(engine, "b-1", 1, "abcdef")
    assert sweep_committed_stages(engine, now=FakeClock()) == []
    assert _tables(engine) == {stage}
    engine.dispose()
