"""Batch sizes by default: a config with no ``batch:`` section lets sluice size each source.

A keyset source's batches hold up to ``ROWS_BATCH`` rows, fewer for wide rows (its
width sampled from the table on a real PostgreSQL and MariaDB); sources of keys or
messages hold ``KEY_BATCH`` items; a ``max_items`` the config sets wins everywhere.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.loader import load_config_text
from config.models import BatchConfig
from config.settings import BATCH_BYTES, KEY_BATCH, ROWS_BATCH
from scheduler.batch_size import BatchSizer, largest_batches, sample_widths
from scheduler.commands.plan import make_plan, render
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from tests.helpers import drain, write_config

WIDE = 4_000
"""Characters of text in each row of the wide table."""

NARROW = 25_000
"""Rows of the narrow table: more than two batches of ``KEY_BATCH`` (the size a batch had by
default before sluice chose it)."""


def _tables(url: str) -> None:
    engine = sa.create_engine(url)
    text = "text" if engine.dialect.name == "postgresql" else "longtext"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE narrow (id bigint PRIMARY KEY, note {text})")
        conn.exec_driver_sql(f"CREATE TABLE wide (id bigint PRIMARY KEY, note {text})")
        conn.exec_driver_sql(f"CREATE TABLE empty (id bigint PRIMARY KEY, note {text})")
        numbers = (f"generate_series(1, {NARROW}) AS s(n)" if text == "text"
                   else f"(SELECT seq AS n FROM seq_1_to_{NARROW}) AS s")  # fmt: skip
        conn.exec_driver_sql(f"INSERT INTO narrow SELECT n, CONCAT('n', n) FROM {numbers}")
        # More rows than a batch's fewest (KEY_BATCH) would take whole: its width counts.
        conn.exec_driver_sql(f"INSERT INTO wide SELECT n, REPEAT('w', {WIDE}) FROM {numbers} "
                             f"WHERE n <= {KEY_BATCH}")  # fmt: skip
        conn.exec_driver_sql(f"CREATE TABLE few (id bigint PRIMARY KEY, note {text})")
        conn.exec_driver_sql(f"INSERT INTO few SELECT n, REPEAT('w', {WIDE}) FROM {numbers} "
                             "WHERE n <= 100")  # fmt: skip
        conn.exec_driver_sql("ANALYZE few" if text == "text" else "ANALYZE TABLE few")
    engine.dispose()


def _config(url: str, batch: str = "") -> Any:
    return load_config_text(f"""
ledger: 'sqlite:///:memory:'
sources:
  narrow: {{kind: sql, url: '{url}', table: narrow, key: id, target: wh.narrow}}
  wide: {{kind: sql, url: '{url}', table: wide, key: id, target: wh.wide}}
  empty: {{kind: sql, url: '{url}', table: empty, key: id, target: wh.empty}}
  few: {{kind: sql, url: '{url}', table: few, key: id, target: wh.few}}
  swept: {{kind: sql, url: '{url}', table: narrow, key: id, mode: sweep, target: wh.swept}}
  events: {{kind: sqs, queue_url: 'http://127.0.0.1:1/q', key: id, target: wh.events}}
targets:
  wh: {{kind: parquet, path: /tmp/unused}}
{batch}""")  # fmt: skip


def _largest(url: str, batch: str = "") -> dict[str, int]:
    cfg = _config(url, batch)
    queues = {
        name: QueueingLimitedSource(SqlSource(name, src), capacity=10, replenish_below=5)
        for name, src in cfg.sources.items() if src.kind == "sql"
    }  # fmt: skip
    try:
        largest_batches(cfg, queues, first=True)  # which tables are taken whole
        for thread in sample_widths(lambda: cfg, queues, BatchSizer(cfg.batch)):
            thread.join()
        return largest_batches(cfg, queues)
    finally:
        for queue in queues.values():
            queue.wrapped.close()


@pytest.mark.postgres
@pytest.mark.mariadb
@pytest.mark.parametrize("engine", ["postgresql", "mariadb"])
def test_each_source_gets_its_own_largest_batch_unless_the_config_sets_one(
    pg_factory: Any, mariadb_factory: Any, engine: str
) -> None:
    url = (pg_factory if engine == "postgresql" else mariadb_factory).create("sizes")
    _tables(url)
    largest = _largest(url)
    # Narrow rows: the most rows a batch holds. Wide rows: BATCH_BYTES of them.
    assert largest["narrow"] == ROWS_BATCH
    assert BATCH_BYTES // (WIDE + 30) <= largest["wide"] <= BATCH_BYTES // WIDE
    # Nothing to sample: the most. Keys and messages: KEY_BATCH items.
    assert largest["empty"] == ROWS_BATCH
    # A table the statistics count well under a batch's fewest rows is taken whole, however
    # wide: not sampled (PostgreSQL's reltuples; MariaDB's counts are not read).
    if engine == "postgresql":
        assert largest["few"] == ROWS_BATCH
    else:
        assert BATCH_BYTES // (WIDE + 30) <= largest["few"] <= BATCH_BYTES // WIDE
    assert largest["swept"] == largest["events"] == KEY_BATCH
    # A max_items the config sets is every source's.
    assert _largest(url, "batch: {max_items: 20000}") == {}


def test_derived_sizes_follow_the_largest_batch_a_source_may_get() -> None:
    url = "postgresql+psycopg://u@127.0.0.1:1/db"
    cfg = _config(url)
    assert cfg.batch.chosen and cfg.batch.max_items == ROWS_BATCH
    assert cfg.batch.key_items == KEY_BATCH
    # Keyset ranges in flight: room for every import slot's batch and one waiting.
    assert cfg.backpressure.max_pending == 3 * ROWS_BATCH
    assert cfg.sources["narrow"].buffer.capacity >= 4 * ROWS_BATCH
    # Keys are held one by one: two batches of KEY_BATCH, as before.
    assert cfg.sources["swept"].buffer.capacity == 2 * KEY_BATCH
    assert cfg.sources["swept"].buffer.replenish_below == KEY_BATCH
    # Without a keyset source the sizes are those of KEY_BATCH items.
    swept = f"""
ledger: 'sqlite:///:memory:'
sources:
  swept: {{kind: sql, url: '{url}', table: t, key: id, mode: sweep, target: wh.t}}
targets:
  wh: {{kind: parquet, path: /tmp/unused}}
"""  # fmt: skip
    only_keys = load_config_text(swept)
    set_to = load_config_text(swept + f"batch: {{max_items: {KEY_BATCH}}}\n")
    assert only_keys.backpressure == set_to.backpressure
    assert only_keys.sources["swept"].buffer == set_to.sources["swept"].buffer
    assert not set_to.batch.chosen and set_to.batch.key_items == KEY_BATCH


def test_a_source_s_own_largest_batch_bounds_its_adaptive_size() -> None:
    batch = BatchConfig(target_latency=1.0, min_items=100)
    sizer = BatchSizer(batch, largest={"wide": 20_000})
    assert (sizer.size("wide"), sizer.size("narrow")) == (20_000, ROWS_BATCH)
    sizer.observe("wide", 20_000, 4.0)  # 5,000 would have fit
    assert sizer.size("wide") == 10_000  # at most a halving
    for _ in range(40):
        sizer.observe("wide", sizer.size("wide"), 0.1)
    assert sizer.size("wide") == 20_000  # back up to its own most, not max_items
    sizer.configure(batch, {"wide": 5_000})
    assert sizer.size("wide") == 5_000


@pytest.mark.spark
@pytest.mark.postgres
def test_a_config_without_batch_moves_a_table_in_a_few_big_batches(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("dflt_src"), pg_factory.create("dflt_dst")
    _tables(source)
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  narrow: {{kind: sql, url: '{source}', table: narrow, key: id, target: wh.narrow}}
  wide: {{kind: sql, url: '{source}', table: wide, key: id, target: wh.wide}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
    assert "batches chosen by sluice: keyset up to 2,000,000 rows" in render(make_plan(cfg), "c")
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0, summary
    ledger = sa.create_engine(cfg.ledger)
    with ledger.connect() as conn:
        batches = dict(conn.exec_driver_sql(
            "SELECT source, count(*) FROM sluice_batches GROUP BY source").all())  # fmt: skip
    ledger.dispose()
    # Each table in one batch, or its end shared by the two import slots: no more.
    assert set(batches) == {"narrow", "wide"} and max(batches.values()) <= 2, batches
    engine = sa.create_engine(target)
    with engine.connect() as conn:
        counts = [conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() for t in
                  ("narrow", "wide")]  # fmt: skip
    engine.dispose()
    assert counts == [NARROW, KEY_BATCH]


@pytest.mark.postgres
def test_a_table_loaded_since_it_was_analyzed_is_not_taken_for_small(pg_url: str) -> None:
    """The statistics' rows per page times the pages the table has now, as the planner
    counts: a table that grew after ANALYZE is counted at its size, not at its old one."""
    from spark_jobs.engines import engine_of

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE grown (id bigint PRIMARY KEY, note text)")
        conn.exec_driver_sql("CREATE TABLE kept (id bigint PRIMARY KEY, note text)")
        for table in ("grown", "kept"):
            conn.exec_driver_sql(f"INSERT INTO {table} SELECT n, md5(n::text) "
                                 "FROM generate_series(1, 1000) n")  # fmt: skip
            conn.exec_driver_sql(f"ANALYZE {table}")
        conn.exec_driver_sql("INSERT INTO grown SELECT n, md5(n::text) "
                             "FROM generate_series(1001, 30000) n")  # fmt: skip
        conn.exec_driver_sql("CREATE TABLE never (id bigint PRIMARY KEY)")
        counted = engine_of(pg_url).row_estimates(conn, ["grown", "public.kept", "never"])
    engine.dispose()
    assert counted["grown"] > KEY_BATCH
    assert 900 <= counted["public.kept"] <= 1100
    assert "never" not in counted or counted["never"] == 0  # empty: nothing to size


class _SlowWidth(SqlSource):
    """A source whose row width takes until the test lets it go (a slow ``where:``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked = threading.Event()
        self.go = threading.Event()

    def row_bytes(self, ask: bool = True) -> float | None:
        if ask and not self.go.is_set():
            self.asked.set()
            self.go.wait(30)
            self._row_bytes = 4_000.0
        return super().row_bytes(ask=False)


def test_row_widths_are_sampled_off_the_loop_and_size_batches_once_known() -> None:
    cfg = _config("postgresql+psycopg://u@127.0.0.1:1/db")
    slow = _SlowWidth("wide", cfg.sources["wide"])
    queues = {"wide": QueueingLimitedSource(slow, capacity=10, replenish_below=5)}
    # The loop's sizes need no answer from the table: the most until the width is known.
    assert largest_batches(cfg, queues)["wide"] == ROWS_BATCH
    sizes = BatchSizer(cfg.batch, largest=largest_batches(cfg, queues))
    threads = sample_widths(lambda: cfg, queues, sizes)
    assert slow.asked.wait(10) and sizes.largest("wide") == ROWS_BATCH
    slow.go.set()
    for thread in threads:
        thread.join(10)
    assert sizes.largest("wide") == BATCH_BYTES // 4_000
    slow.close()
