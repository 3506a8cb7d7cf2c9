"""A batch of stream changes reduced to each key's last state (deletes, moves, truncates)."""

from __future__ import annotations

from typing import Any

from spark_jobs.change_batches import ChunkRow, net_effect
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED, Change, Relation

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
