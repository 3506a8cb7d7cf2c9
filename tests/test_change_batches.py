"""A batch of stream changes reduced to each key's last state (deletes, moves, truncates),
and whole chunks between them."""

from __future__ import annotations

from typing import Any

from spark_jobs.changes.change_batches import (
    ChunkRow,
    CopyRows,
    NetBatch,
    StreamEvent,
    net_effect,
    segments,
)
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED, Change, Relation
from spark_jobs.engines.postgresql.textcopy import line_keys

ITEMS = Relation(1, "public", "items", "d", ())


def change(op: str, new: dict[str, Any] | None = None, old: dict[str, Any] | None = None) -> Any:
    return Change(op, ITEMS, new, old)


def test_each_key_is_written_once_with_its_last_state() -> None:
    net = net_effect([
        change("insert", {"id": "1", "v": "1", "big": "x" * 10}),
        change("update", {"id": "1", "v": "2", "big": UNCHANGED}),
        change("update", {"id": "1", "v": "3", "big": UNCHANGED}),
        change("insert", {"id": "2", "v": "1", "big": "y"}),
        change("delete", None, {"id": "2", "v": None, "big": None}),
        change("insert", {"id": "3", "v": "1", "big": "z"}),
        change("delete", None, {"id": "3", "v": None, "big": None}),
        change("insert", {"id": "3", "v": "2", "big": "z2"}),  # deleted, then back
        change("update", {"id": "40", "v": "5", "big": UNCHANGED},
               {"id": "4", "v": None, "big": None}),  # the key moved
        ChunkRow(("5",), {"id": "5", "v": "1", "big": "w"}),
        change("update", {"id": "6", "v": "9", "big": UNCHANGED}),  # only the stream knows
    ], ["id"], UNCHANGED)  # fmt: skip
    assert not net.truncate
    assert net.deletes == {("2",), ("4",)}
    assert net.upserts == {
        ("1",): {"id": "1", "v": "3", "big": "x" * 10},  # the value sent before in the batch
        ("3",): {"id": "3", "v": "2", "big": "z2"},
        ("40",): {"id": "40", "v": "5", "big": UNCHANGED},  # the target keeps its value
        ("5",): {"id": "5", "v": "1", "big": "w"},
        ("6",): {"id": "6", "v": "9", "big": UNCHANGED},
    }


def test_a_truncate_voids_what_came_before_it() -> None:
    net = net_effect([
        change("insert", {"id": "1"}),
        change("delete", None, {"id": "7"}),
        change("truncate"),
        change("insert", {"id": "2"}),
    ], ["id"])  # fmt: skip
    assert net.truncate and net.deletes == set() and list(net.upserts) == [("2",)]


def test_a_whole_chunk_splits_the_batch_into_segments_applied_in_order() -> None:
    """A chunk read whole (COPY text) is one event: the changes before it and after it are
    netted on their own, and the chunk goes in between, as it travels in a batch."""
    block = CopyRows(("id", "v"), "1\tone\n2\ttwo\\tand tab\n", 2, (("1",), ("2",)))
    events = [
        StreamEvent("insert", ("9",), None, {"id": "9", "v": "x"}),
        StreamEvent.from_json(StreamEvent.of(block, ["id"]).to_json()),
        StreamEvent("delete", ("1",)),
        StreamEvent("update", ("2",), None, {"id": "2", "v": "later"}),
    ]
    parts = list(segments(events, ["id"], UNCHANGED))
    assert [type(p).__name__ for p in parts] == ["NetBatch", "CopyRows", "NetBatch"]
    before, rows, after = parts
    assert isinstance(before, NetBatch) and isinstance(after, NetBatch)
    assert isinstance(rows, CopyRows)
    assert list(before.upserts) == [("9",)]
    assert (rows.columns, rows.text, rows.rows) == (block.columns, block.text, 2)
    assert after.deletes == {("1",)} and after.upserts == {("2",): {"id": "2", "v": "later"}}
    assert sum(e.rows for e in events) == 5


def test_a_whole_chunk_loses_the_lines_of_keys_changed_while_it_was_read() -> None:
    text = "1\ta\n2\tb\\\\c\n3\tc\n"
    keys = line_keys(text, [0])
    assert keys == [("1",), ("2",), ("3",)]
    block = CopyRows(("id", "v"), text, 3, tuple(keys))
    assert block.without({("7",)}) is block
    kept = block.without({("2",)})
    assert (kept.text, kept.rows, kept.keys) == ("1\ta\n3\tc\n", 2, (("1",), ("3",)))
    # A key with a tab or backslash in it is printed escaped; its key is the value.
    assert line_keys("a\\tb\t1\n", [0, 1]) == [("a\tb", "1")]
