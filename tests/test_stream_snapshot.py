"""A stream's full load reads the snapshot its slot was made with (PostgreSQL).

A slot made by the start exports its snapshot: the tables as they were where
the slot's changes begin. The full load is handed out as key ranges of that
snapshot, each at the slot's start position before every change, with no
watermark written into the stream; their importers read them in the snapshot
(:mod:`spark_jobs.changes.load_ranges`, done here by the test as soon as a range is
handed out, the target's position then moved past it). The changes made after
the slot, during the load, come after it from the slot, each once, once the
target holds every range. Every table of a ``tables:`` group is published
before the slot is made, so one snapshot serves them all; the snapshot is let
go once every load is in. Where none serves (a slot made by an earlier start),
the load reads between watermarks, as before. Real PostgreSQL with logical
decoding (``logical_pg``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import SqlSourceConfig
from sources.abc import Item
from sources.stream import StreamSource
from spark_jobs.changes.change_batches import LoadRange, StreamEvent
from spark_jobs.changes.load_ranges import RangeSource, range_lines
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


class Target:
    """What a target does with a stream's items, for the source's sake: a range's rows read
    (in its snapshot) as it is handed out, and the position moved past each item."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.position: list[int] | None = None
        self.rows: dict[str, dict[str, str]] = {}  # table → id → v, the load's

    def __call__(self) -> list[int] | None:
        return self.position

    def drain(self, source: StreamSource, room: int = 1_000) -> Iterator[Item]:
        """Every item ``source`` hands out, asked for ``room`` rows at a time, until it is at
        its end."""
        for _ in range(200):
            yield from self.step(source, room)
            if source.exhausted:
                return
        raise AssertionError("the stream never reached its end")

    def step(self, source: StreamSource, room: int = 1_000) -> list[Item]:
        """What one ask of ``source`` hands out, each range read and the position moved."""
        items = source.next_batch(room)
        for item in items:
            for event in _events([item]):
                if event.span is not None:
                    self._read(source.cfg.table, event.span)
            self.position = list(tuple(item.key))
        return items

    def _read(self, table: str, span: LoadRange) -> None:
        with range_lines(RangeSource(self.url, table), span, ["id"]) as lines:
            for line in lines:
                key, value = bytes(line).decode().rstrip("\n").split("\t")
                self.rows.setdefault(table, {})[key] = value


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
    target = Target(url)
    source = StreamSource("items", _cfg(url, "items"), committed=target)
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
        items = list(target.drain(source))
        assert source.backend.snapshot is None  # the target holds the load: let go
    finally:
        source.drop()
        source.close()

    load = [i for i in items if tuple(i.key)[0] == start]
    changes = [i for i in items if tuple(i.key)[0] != start]
    # The load: the table as it was where the slot starts, in ranges at [start, n] of
    # page_size rows, read by their importer.
    spans = [e.span for e in _events(load)]
    assert [s.rows for s in spans if s is not None] == [30, 30, 30, 10]
    rows = target.rows["items"]
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
    targets = {t: Target(url) for t in ("a", "b")}
    a, b = (StreamSource(t, _cfg(url, t, group="grp"), committed=targets[t]) for t in ("a", "b"))
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
        got_a: list[Item] = []
        got_b: list[Item] = []
        for _ in range(200):  # as a daemon asks them: in turn (b's load holds the snapshot)
            got_a += targets["a"].step(a)
            got_b += targets["b"].step(b)
            if a.exhausted and b.exhausted:
                break
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
    assert len(targets["a"].rows["a"]) == 70 and got_a
    assert targets["b"].rows["b"]["1"] == "v1"
    assert [(e.op, e.key_values) for e in _events(got_b) if e.span is None] == [
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
        items = list(Target(url).drain(source))
    finally:
        source.drop()
        source.close()
    assert len(_rows_of(_events(items))) == 40
