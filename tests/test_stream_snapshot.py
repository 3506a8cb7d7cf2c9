"""A stream's full load reads the snapshot its slot was made with (PostgreSQL).

A slot made by the start exports its snapshot: the tables as they were where
the slot's changes begin. The full load reads its chunks in that snapshot,
each handed out at the slot's start position before every change, with no
watermark written into the stream; the changes made after the slot, during
the load, come after it from the slot, each once. Every table of a
``tables:`` group is published before the slot is made, so one snapshot
serves them all; the snapshot is let go once every load is done. Where none
serves (a slot made by an earlier start), the load reads between watermarks,
as before. Real PostgreSQL with logical decoding (``logical_pg``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import SqlSourceConfig
from sources.abc import Item
from sources.stream import StreamSource
from spark_jobs.changes.change_batches import StreamEvent
from tests.helpers import scalar

pytestmark = [pytest.mark.postgres]


def _cfg(url: str, table: str, group: str | None = None) -> SqlSourceConfig:
    cfg = SqlSourceConfig(kind="sql", url=url, table=table, key=["id"], mode="stream",
                          page_size=30, target=f"wh.{table}")  # fmt: skip
    return cfg if group is None else cfg.in_group(group)


def _seed(url: str, *tables: str, rows: int = 100) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table in tables:
            conn.execute(sa.text(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)"))
            conn.execute(sa.text(f"INSERT INTO {table} SELECT i, 'v' || i "
                                 f"FROM generate_series(1, {rows}) AS i"))  # fmt: skip
    engine.dispose()


def _drain(source: StreamSource) -> Iterator[Item]:
    """Every item the source hands out until it is at its end."""
    for _ in range(200):
        yield from source.next_batch(1_000)
        if source.exhausted:
            return
    raise AssertionError("the stream never reached its end")


def _events(items: list[Item]) -> list[StreamEvent]:
    return [StreamEvent.from_json(text) for item in items for text in item.payload]


def _rows_of(events: list[StreamEvent]) -> dict[str, str]:
    """The load's rows (id → v) in the whole chunks among ``events``."""
    found: dict[str, str] = {}
    for event in events:
        if event.block is not None:
            for line in event.block.text.splitlines():
                key, value = line.split("\t")
                found[key] = value
    return found


def test_the_full_load_reads_the_slots_snapshot_and_the_changes_after_it_come_once(
    logical_pg: Any,
) -> None:
    url = logical_pg.create("snap_one")
    _seed(url, "items")
    source = StreamSource("items", _cfg(url, "items"))
    try:
        source.check()  # makes the slot, which exports its snapshot
        assert source.backend.snapshot is not None
        start = source.backend.snapshot[1]
        engine = sa.create_engine(url)
        with engine.begin() as conn:  # after the slot, before any chunk is read
            conn.execute(sa.text("UPDATE items SET v = 'changed' WHERE id = 90"))
            conn.execute(sa.text("DELETE FROM items WHERE id = 95"))
            conn.execute(sa.text("INSERT INTO items VALUES (200, 'new')"))
        engine.dispose()
        items = list(_drain(source))
    finally:
        source.drop()
        source.close()

    load = [i for i in items if tuple(i.key)[0] == start]
    changes = [i for i in items if tuple(i.key)[0] != start]
    # The load: the table as it was where the slot starts, in chunks at [start, n].
    rows = _rows_of(_events(load))
    assert len(rows) == 100 and rows["90"] == "v90" and "95" in rows and "200" not in rows
    assert [tuple(i.key) for i in load] == sorted(tuple(i.key) for i in load)
    assert all(tuple(i.key) > (start, 0) for i in load)
    assert load[-1].version == "done"
    # Then the changes, after every chunk, each once.
    assert items[: len(load)] == load
    ops = [(e.op, e.key_values) for e in _events(changes)]
    assert ops == [("update", ("90",)), ("delete", ("95",)), ("insert", ("200",))]
    assert all(tuple(i.key)[0] > start for i in changes)


def test_a_group_is_loaded_from_one_snapshot_without_watermarks_then_lets_it_go(
    logical_pg: Any,
) -> None:
    url = logical_pg.create("snap_group")
    _seed(url, "a", "b", rows=70)
    a, b = (StreamSource(t, _cfg(url, t, group="grp")) for t in ("a", "b"))
    try:
        a.check()
        b.check()
        assert a.backend.snapshot is not None and a.backend.snapshot == b.backend.snapshot
        # Both published before the slot was made: changes of b right after it are in it.
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE b SET v = 'late' WHERE id = 1"))
        engine.dispose()
        assert scalar(url, "SELECT count(*) FROM pg_publication_tables") == 2
        got_a, got_b = list(_drain(a)), list(_drain(b))
        assert a.backend.snapshot is None  # both loads done: the snapshot was let go
        assert scalar(url, "SELECT count(*) FROM pg_stat_replication") == 0
        # No watermark went into the stream: a slot of the group's holds one change only.
        assert scalar(url, "SELECT count(*) FROM pg_logical_slot_peek_binary_changes("
                            "'sluice_grp', NULL, NULL, 'proto_version', '1', "
                            "'publication_names', 'sluice_grp', 'messages', 'true') "
                            "WHERE get_byte(data, 0) = ascii('M')") == 0  # fmt: skip
    finally:
        a.drop()
        a.close()
        b.close()
    assert len(_rows_of(_events(got_a))) == 70
    assert _rows_of(_events(got_b))["1"] == "v1"
    assert [(e.op, e.key_values) for e in _events(got_b) if e.block is None] == [
        ("update", ("1",))]


def test_a_slot_made_by_an_earlier_start_loads_between_watermarks(logical_pg: Any) -> None:
    url = logical_pg.create("snap_later")
    _seed(url, "items", rows=40)
    first = StreamSource("items", _cfg(url, "items"))
    first.check()
    first.close()  # a start that stopped before any chunk: its snapshot is gone
    source = StreamSource("items", _cfg(url, "items"))
    try:
        source.check()
        assert source.backend.snapshot is None and not source.backend.made_slot
        items = list(_drain(source))
    finally:
        source.drop()
        source.close()
    assert len(_rows_of(_events(items))) == 40
