"""A column that cannot go into its target is found before any batch runs, and a batch
that meets one anyway dies at its first attempt, naming the table, the column and both
types: no retry can change a column's type (a retry with backoff took minutes to say so)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers import drain, write_config

SLUICE = str(Path(sys.executable).parent / "sluice")


def _execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


@pytest.mark.spark
@pytest.mark.postgres
def test_a_type_mismatch_is_a_plan_error_and_kills_the_first_batch_at_once(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("fit_src"), pg_factory.create("fit_dst")
    _execute(source,
             "CREATE TABLE events (id uuid PRIMARY KEY, at timestamptz, note text)",
             "INSERT INTO events SELECT gen_random_uuid(), now(), 'n' || i "
             "FROM generate_series(1, 50) AS i")  # fmt: skip
    # The operator's table: "at" is an integer, which no timestamp is.
    _execute(target, "CREATE TABLE events (id uuid PRIMARY KEY, at integer, note text)")
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  events: {{kind: sql, url: '{source}', table: events, key: id, target: wh.events}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip

    plan = subprocess.run([SLUICE, "plan", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert plan.returncode == 1, plan.stdout + plan.stderr
    lines = [" ".join(line.split()) for line in plan.stdout.splitlines()]
    assert "at timestamp with time zone: ERROR: integer in the target table, and no timestamp " \
        "with time zone value is one; change the table's column, or convert the values with " \
        "columns:" in lines, plan.stdout
    assert "id uuid -> uuid" in lines and "note text -> text" in lines

    # Retries as configured by default (5 attempts, 10 s apart): one attempt is made.
    summary = drain(cfg, path, spark, timeout=120)
    assert summary.exit_code == 1 and summary.stats.batches_dead == 1, summary
    assert summary.stats.batches_failed == 0, summary
    engine = sa.create_engine(cfg.ledger)
    with engine.connect() as conn:
        [(attempts, error)] = conn.execute(
            sa.text("SELECT attempts, error FROM sluice_batches")).all()  # fmt: skip
    engine.dispose()
    assert attempts == 1
    assert "wh.events: column 'at' is integer in the table but timestamp with time zone in " \
        "the source" in error, error


@pytest.mark.spark
@pytest.mark.postgres
def test_a_uuid_keyed_table_migrates_and_plans_its_types(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("uuid_src"), pg_factory.create("uuid_dst")
    _execute(source,
             "CREATE TABLE events (id uuid PRIMARY KEY, at timestamptz, tags text[])",
             "INSERT INTO events SELECT gen_random_uuid(), now() - i * interval '1 hour', "
             "ARRAY['a' || i, NULL] FROM generate_series(1, 2000) AS i")  # fmt: skip
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  events: {{kind: sql, url: '{source}', table: events, key: id, target: wh.events}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 300, max_wait: 100ms}}
""")  # fmt: skip
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0 and summary.stats.batches_done >= 6, summary
    query = "SELECT id::text, at::text, tags::text FROM events ORDER BY id"
    rows = []
    for url in (source, target):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SET TimeZone = 'UTC'")
            rows.append(conn.exec_driver_sql(query).all())
        engine.dispose()
    assert len(rows[0]) == 2000 and rows[0] == rows[1]
