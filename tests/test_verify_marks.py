"""A MariaDB stream verified while the application writes; the cutover then compares only
the rows changed since (:mod:`scheduler.verify_marks`).

Judged by the verify's own report, the mark the target keeps, and independent reads
of both databases; the cutover's compare of the changed rows is shown to catch a
changed row the target lost, and a verify that finds a difference keeps no mark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.commands.cutover import run_cutover
from scheduler.verify_tables import verify_config
from spark_jobs.changes.positions import stream_position, verified_since
from tests.helpers import drain, write_config
from tests.test_stream_source import Writer, _rows, make_source

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def _config(source: str, target: str) -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  items: {{kind: sql, url: '{source}', table: items, key: id, mode: stream, page_size: 100,
          target: wh.items}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 200, max_wait: 50ms}}
"""


def _sql(url: str, statement: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _loaded(
    tmp_path: Path, servers: Any, pg_factory: Any, spark: Any, name: str
) -> tuple[str, str, Path, Any]:
    """A MariaDB source of 500 rows (the writer changes rows 1 to 400 only) streamed into a
    PostgreSQL target until caught up: the source's and target's URLs, the config."""
    source, target = servers.create(f"{name}_src"), pg_factory.create(f"{name}_dst")
    make_source(source, 500)
    path, cfg = write_config(tmp_path, _config(source, target))
    assert drain(cfg, path, spark).exit_code == 0
    return source, target, path, cfg


def _equal(source: str, target: str) -> None:
    got, want = _rows(target), _rows(source)
    assert {k: got.get(k) for k in want if got.get(k) != want[k]} == {}
    assert set(got) == set(want)


def test_a_verify_while_the_stream_runs_leaves_the_cutover_only_the_rows_changed_since(
    tmp_path: Path, binlog_mariadb: Any, pg_factory: Any, spark: Any
) -> None:
    source, target, path, cfg = _loaded(tmp_path, binlog_mariadb, pg_factory, spark, "marks")
    engine = sa.create_engine(target)
    writer = Writer(source)
    for _ in range(60):  # changes the target does not hold yet: in flight to the verify
        writer.once()

    table = verify_config(spark, cfg).tables[0]
    assert (table.missing, table.extra, table.different) == (0, 0, 0), table
    assert table.in_flight > 0
    held = stream_position(engine, "items")
    assert held is not None
    since = verified_since(engine, "items")
    assert since is not None and since <= held[0]  # from where the target stood

    assert drain(cfg, path, spark).exit_code == 0
    for _ in range(40):
        writer.once()
    report = run_cutover(spark, cfg, path)
    assert report.ready, report.problems
    assert report.verify is not None
    table = report.verify.tables[0]
    assert f"compared now, the rest proven equal by the verify that kept {since}" in table.scope
    assert table.checked == len(_rows(source))  # every row: the rest proven before
    _equal(source, target)
    assert verified_since(engine, "items") not in (None, since)  # a new mark, further on

    # A changed row the target lost after the mark: the cutover's compare finds it.
    writer.once()
    _sql(source, "UPDATE items SET v = v + 1 WHERE id = 450")
    assert drain(cfg, path, spark).exit_code == 0
    _sql(target, "UPDATE items SET name = 'lost' WHERE id = 450")
    report = run_cutover(spark, cfg, path)
    assert report.verify is not None
    table = report.verify.tables[0]
    assert not report.ready
    assert "compared now" in table.scope
    assert table.different == 1 and table.first["different"] == [[450]], table
    assert verified_since(engine, "items") is None  # a difference: no mark kept
    engine.dispose()


def test_a_verify_that_finds_a_difference_keeps_no_mark_and_the_cutover_compares_every_row(
    tmp_path: Path, binlog_mariadb: Any, pg_factory: Any, spark: Any
) -> None:
    source, target, path, cfg = _loaded(tmp_path, binlog_mariadb, pg_factory, spark, "nomark")
    _sql(target, "UPDATE items SET v = -1 WHERE id = 450")  # the writer never changes it
    writer = Writer(source)
    for _ in range(30):
        writer.once()

    table = verify_config(spark, cfg).tables[0]
    engine = sa.create_engine(target)
    assert table.different == 1 and table.first["different"] == [[450]], table
    assert table.in_flight > 0  # the writer's changes, told apart from the difference
    assert verified_since(engine, "items") is None

    assert drain(cfg, path, spark).exit_code == 0
    report = run_cutover(spark, cfg, path)
    assert report.verify is not None
    table = report.verify.tables[0]
    assert table.scope == "every row"
    assert not report.ready
    assert table.first["different"] == [[450]]
    engine.dispose()
