"""A check the source's rows all pass is made with its target table, not read again after the
load; one the target cannot take there waits for the load, and nothing is built twice."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import sqlalchemy as sa

from config.loader import load_config_text
from scheduler.schema_builds import plan_for_run
from spark_jobs.engines.objects import Stage
from spark_jobs.load.jdbc_tables import create_made, made_tables
from spark_jobs.schema import early
from spark_jobs.schema.build import build_stage
from tests.helpers import run_sql

pytestmark = pytest.mark.postgres


def _constraints(url: str) -> dict[str, bool]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = dict(conn.execute(sa.text(
            "SELECT conname, convalidated FROM pg_constraint "
            "WHERE conrelid = to_regclass('items') AND contype = 'c'")).all())  # fmt: skip
    engine.dispose()
    return found


def test_checks_are_made_with_the_table_and_one_the_target_cannot_take_waits_for_the_load(
    pg_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    source, target = pg_factory.create("early_src"), pg_factory.create("early_dst")
    run_sql(
        source,
        "CREATE FUNCTION positive(n int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT n > 0'",
        "CREATE TABLE items (id int PRIMARY KEY, n int CONSTRAINT n_small CHECK (n < 100) "
        # A function's check waits for the load (the target may not have it, or not alike).
        "CONSTRAINT n_positive CHECK (positive(n)), m int CONSTRAINT m_positive CHECK (m > 0))",
        "INSERT INTO items VALUES (1, 5, 1)",
        # Held NOT VALID on the source: its rows may fail it, so never checked while loading.
        "ALTER TABLE items ADD CONSTRAINT n_loose CHECK (n > 10) NOT VALID",
    )
    cfg = load_config_text(f"""
sources:
  items: {{kind: sql, url: '{source}', table: items, key: id, target: wh.items}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")
    plans = plan_for_run(cfg)  # what the daemon does before its first batch
    engine = sa.create_engine(target)
    try:
        # Made without m: m_positive fails where the table is made, alone.
        table = sa.Table("items", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                         sa.Column("n", sa.Integer))  # fmt: skip
        with caplog.at_level(logging.INFO, logger="spark_jobs.load.early"):
            create_made(engine, table)  # what the first batch's import does
        with engine.connect() as conn:
            assert ("public", "items") in made_tables(conn)  # the failed check did not undo it
    finally:
        engine.dispose()
        early.remember([])  # this process's other tests make their tables bare
    assert _constraints(target) == {"n_small": True}
    # The messages, not caplog.text: another test may have set the log format to JSON.
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "check m_positive not built with the table" in said
    assert 'column "m" does not exist' in said
    with pytest.raises(sa.exc.IntegrityError, match="n_small"):
        run_sql(target, "INSERT INTO items VALUES (2, 500)")

    report = build_stage(plans, (Stage.LOADED,))  # the build once the table's load is done
    assert sorted(report.built) == ["items: check n_loose"]  # n_small is not built again
    assert sorted(f.split(":")[1].strip() for f in report.failed) == [
        "check m_positive", "check n_positive"]  # fmt: skip
    assert _constraints(target) == {"n_small": True, "n_loose": False}
