"""The changes made while a full load was read as the table then was, as each row's last
state (:mod:`sources.stream_catchup`): what a MariaDB stream hands out once its target
holds every range, so that no row goes back to a state older than its range's read."""

from __future__ import annotations

from sources.binlog_changes import RowChange
from sources.stream_backends import Txn
from sources.stream_catchup import LastStates
from sources.stream_spans import DONE, LoadProgress
from spark_jobs.changes.change_batches import StreamEvent, net_effect


def _txn(end: int, *changes: RowChange) -> Txn:
    return Txn(end, 1_700_000_000.0 + end, list(changes))


def _row(key: int, v: str) -> dict[str, str]:
    return {"id": str(key), "v": v}


def test_each_row_ends_in_its_last_state_and_a_moved_key_leaves_a_delete() -> None:
    states = LastStates(("id",))
    states.feed([
        _txn(5, RowChange("insert", "t", _row(1, "a")), RowChange("insert", "t", _row(2, "b"))),
        _txn(6, RowChange("update", "t", _row(1, "a2"), _row(1, "a"))),
        _txn(7, RowChange("update", "t", _row(3, "b"), _row(2, "b"))),  # 2 moves to 3
        _txn(8, RowChange("delete", "t", None, _row(1, "a2")),
             RowChange("insert", "t", _row(2, "new"))),  # 2 is taken again
    ])  # fmt: skip
    events = states.events()
    assert states.changes == 6
    assert events == [
        StreamEvent("update", ("3",), None, _row(3, "b")),
        StreamEvent("delete", ("1",)),
        StreamEvent("insert", ("2",), None, _row(2, "new")),
    ]
    net = net_effect(events, ("id",))
    assert net.deletes == {("1",)}
    assert net.upserts == {("3",): _row(3, "b"), ("2",): _row(2, "new")}


def test_a_truncate_forgets_the_rows_before_it_and_goes_first() -> None:
    states = LastStates(("id",))
    states.feed([_txn(5, RowChange("insert", "t", _row(1, "a")))])
    states.feed([_txn(6, RowChange("truncate", "t")),
                 _txn(7, RowChange("insert", "t", _row(4, "d")))])  # fmt: skip
    assert states.events() == [StreamEvent("truncate"),
                               StreamEvent("insert", ("4",), None, _row(4, "d"))]  # fmt: skip


def test_the_loads_progress_says_it_catches_up_after_the_streams_start() -> None:
    progress = LoadProgress.catch_up(1234)
    assert progress.catching_up == 1234
    assert not progress.done and progress.after is None
    assert LoadProgress(progress.text).catching_up == 1234  # as the ledger keeps it
    assert LoadProgress('["7"]').catching_up is None and LoadProgress(DONE).catching_up is None
