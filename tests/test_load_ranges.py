"""A stream's full load as key ranges of an exported snapshot, loaded side by side.

Each range's importer reads it from the source in the snapshot and COPYs it into the
target (:mod:`spark_jobs.changes.load_ranges`): through ``psql`` or psycopg, in binary form
where every type is the same built-in one on both sides, else as text. The batches
land in any order; the target's position moves only over those that follow on without
a gap, so a batch of changes after the load waits until every range is in. Judged by
the target's own text of every value, against the source's in the snapshot.
Real PostgreSQL (two databases).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import JdbcTargetConfig
from spark_jobs.changes import load_ranges
from spark_jobs.changes.apply_changes import apply_changes
from spark_jobs.changes.change_batches import LoadRange, StreamEvent
from spark_jobs.changes.load_ranges import RangeSource, apply_ranges
from spark_jobs.changes.positions import stream_position
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed
from spark_jobs.load.target import TargetTable

pytestmark = [pytest.mark.postgres]

START = 1_000  # the slot's consistent point: every range is at [START, n]
COLUMNS = ("id", "v", "at", "amount", "mood")
TYPES = ("integer", "text", "timestamp with time zone", "numeric(10,2)", "mood")
MADE = """
    CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
    CREATE TABLE items (id integer PRIMARY KEY, v text, at timestamptz, amount numeric(10,2),
                        mood mood);
"""


@pytest.fixture
def pair(pg_factory: Any) -> Iterator[tuple[str, str]]:
    """A source of 100 rows and an empty target made alike."""
    source, target = pg_factory.create("ranges_src"), pg_factory.create("ranges_dst")
    for url in (source, target):
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(MADE)
        engine.dispose()
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO items SELECT i, 'v' || i, timestamptz '2024-01-01 00:00+00' + i * "
            "interval '1 hour 1.5 seconds', i * 1.25, (enum_range(NULL::mood))[1 + mod(i, 3)] "
            "FROM generate_series(1, 100) AS i"
        )
    engine.dispose()
    yield source, target


class Snapshot:
    """A snapshot of ``url`` exported by a transaction held open until :meth:`close`."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url)
        self.conn = self.engine.connect().execution_options(isolation_level="REPEATABLE READ")
        self.name = str(self.conn.exec_driver_sql("SELECT pg_export_snapshot()").scalar())

    def close(self) -> None:
        self.conn.close()
        self.engine.dispose()


def spans(snapshot: str, *ends: tuple[int | None, int | None, int],
          types: tuple[str, ...] = TYPES) -> list[LoadRange]:  # fmt: skip
    return [LoadRange(None if a is None else (str(a),), None if b is None else (str(b),),
                      snapshot, rows, COLUMNS, types) for a, b, rows in ends]  # fmt: skip


def batch(batch_id: str, lo: int | None, hi: int, *ranges: LoadRange) -> Manifest:
    return Manifest(batch_id=batch_id, source="shop", target="wh.items", kind="changes",
                    items=len(ranges), lo=None if lo is None else [START, lo], hi=[START, hi],
                    payloads=[StreamEvent.of(r, ["id"]).to_json() for r in ranges])  # fmt: skip


def as_text(url: str) -> dict[str, tuple[str, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SET TimeZone = 'UTC'")
            found = conn.execute(sa.text(
                "SELECT id::text, v, at::text, amount::text, mood::text FROM items")).all()
    finally:
        engine.dispose()
    return {r[0]: tuple(r) for r in found}


def into(url: str) -> tuple[sa.Engine, TargetTable]:
    return sa.create_engine(url), TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=url),
                                              None, "items", ("id",))  # fmt: skip


def change(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(sql)
    engine.dispose()


@pytest.mark.parametrize("reader", ["psql", "psycopg"])
@pytest.mark.parametrize("types", ["built-in", "enum"])
def test_ranges_land_in_any_order_as_the_snapshot_holds_them_and_changes_wait_for_all(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch, reader: str, types: str,
) -> None:  # fmt: skip
    """``built-in``: every column of the same built-in type on both sides (binary COPY);
    ``enum``: one of a type each database defines (text COPY)."""
    source, target_url = pair
    if types == "built-in":
        for url in pair:
            change(url, "ALTER TABLE items ALTER mood TYPE text")
    monkeypatch.setattr(load_ranges, "PSQL_ROWS", 0 if reader == "psql" else 10**9)
    forms: list[bool] = []
    same = load_ranges._same_built_in_types
    monkeypatch.setattr(load_ranges, "_same_built_in_types",
                        lambda *a: forms.append(same(*a)) or forms[-1])  # fmt: skip
    snapshot = Snapshot(source)
    expected = as_text(source)
    # After the snapshot: none of it may show in the load.
    change(source, "UPDATE items SET v = 'later' WHERE id IN (5, 60); DELETE FROM items "
                   "WHERE id = 70; INSERT INTO items (id, v) VALUES (500, 'new')")  # fmt: skip
    kinds = TYPES if types == "enum" else (*TYPES[:-1], "text")
    first, second, third = spans(snapshot.name, (None, 40, 40), (40, 80, 40), (80, None, 20),
                                 types=kinds)  # fmt: skip
    engine, target = into(target_url)
    range_source = RangeSource(source, "items")
    try:
        # Out of order: the last two first. The position stays put until the first is in.
        written = apply_ranges(engine, target, batch("b3", 2, 3, third), range_source)
        assert written.rows == 20 and written.method == "full load ranges"
        assert apply_ranges(engine, target, batch("b2", 1, 2, second), range_source).rows == 40
        assert stream_position(engine, "shop") is None
        # A batch of changes after the load waits for every range before it.
        changes = Manifest(batch_id="c1", source="shop", target="wh.items", kind="changes",
                           items=1, lo=[START, 3], hi=[START + 10, 1],
                           payloads=[StreamEvent("delete", ("1",)).to_json()])  # fmt: skip
        with pytest.raises(BatchImportFailed, match="waits for the batch before it"):
            apply_changes(engine, target, changes)
        assert apply_ranges(engine, target, batch("b1", None, 1, first), range_source).rows == 40
        assert stream_position(engine, "shop") == [START, 3]
        # Again: recorded as committed before, nothing written twice.
        assert apply_ranges(engine, target, batch("b2", 1, 2, second),
                            range_source).method == "committed before"  # fmt: skip
        assert as_text(target_url) == expected  # the table as the snapshot held it
        assert forms == [types == "built-in"] * 3
        apply_changes(engine, target, changes)
        assert "1" not in as_text(target_url)
    finally:
        engine.dispose()
        snapshot.close()


def test_a_range_whose_snapshot_is_gone_is_read_as_the_table_is_now(
    pair: tuple[str, str], caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    source, target_url = pair
    snapshot = Snapshot(source)
    name = snapshot.name
    snapshot.close()  # its daemon stopped: a retry of the batch reads the table as it is
    change(source, "UPDATE items SET v = 'later' WHERE id = 5")
    engine, target = into(target_url)
    try:
        with caplog.at_level(logging.WARNING, logger="spark_jobs.changes.load_ranges"):
            [only] = spans(name, (None, None, 100))
            apply_ranges(engine, target, batch("b1", None, 1, only), RangeSource(source, "items"))
    finally:
        engine.dispose()
    assert "its snapshot is gone" in caplog.text
    assert as_text(target_url) == as_text(source)


def test_a_range_holding_rows_there_already_is_upserted(pair: tuple[str, str]) -> None:
    source, target_url = pair
    change(target_url, "INSERT INTO items (id, v) VALUES (10, 'stale')")
    snapshot = Snapshot(source)
    engine, target = into(target_url)
    try:
        [only] = spans(snapshot.name, (None, None, 100))
        apply_ranges(engine, target, batch("b1", None, 1, only), RangeSource(source, "items"))
    finally:
        engine.dispose()
        snapshot.close()
    assert as_text(target_url) == as_text(source)


def test_follow_on_moves_over_what_follows_without_a_gap() -> None:
    follow = load_ranges.follow_on
    a, b, c = [START, 1], [START, 2], [START, 3]
    assert follow(None, [(b, c)]) == (None, [(b, c)])
    assert follow(None, [(b, c), (None, a)]) == (a, [(b, c)])
    assert follow(a, [(b, c), (a, b)]) == (c, [])
    assert follow(c, []) == (c, [])
