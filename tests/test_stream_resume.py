"""A stream killed right after a batch's target commit resumes from the target's position.

``kill -9`` of the daemon's group at ``after_target_commit`` (a stream batch's
changes and the target's record of the stream's position are committed, the
ledger does not know yet), then a restart. A trigger on the target logs every
row it writes: each of the table's rows is written once by the full load and each
later change once, so the restart neither loads the table again nor applies a
change twice. The slot's ``confirmed_flush_lsn`` (what the source may forget) never
passes the position the target holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.commands.streams import drop_streams
from tests.chaos.procs import SLUICE, Proc, base_env
from tests.helpers import drain, scalar, write_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

ROWS = 60


def _run(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(sa.text(statement))
    finally:
        engine.dispose()




def _rows(url: str, table: str = "notes") -> dict[int, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {k: v for k, v in conn.execute(sa.text(f"SELECT id, v FROM {table}"))}
    finally:
        engine.dispose()


def _held(target: str) -> int:
    """The end LSN of the last transaction the target holds changes of (its position)."""
    text = scalar(target, "SELECT position FROM _sluice_streams WHERE source = 'resumed'")
    return int(json.loads(text)[0])


def _confirmed(source: str) -> int:
    """The slot's ``confirmed_flush_lsn``: what the source server may forget."""
    return int(scalar(source, "SELECT confirmed_flush_lsn - '0/0'::pg_lsn "
                              "FROM pg_replication_slots WHERE slot_name = 'sluice_resumed'"))


def _crash(path: Path, fault: str, log: Path) -> None:
    """``sluice run`` until it dies at ``fault``, as kill -9 of its group would."""
    crashed = Proc([SLUICE, "run", str(path), "--until-drained"], base_env(SLUICE_FAULT=fault), log)
    assert crashed.wait(240) == -9, crashed.tail()
    crashed.wait_group_gone()
    assert f"SLUICE_FAULT: crashing at {fault.partition(':')[0]}" in crashed.output()


def test_a_stream_killed_right_after_a_batch_commit_resumes_from_the_targets_position(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = logical_pg.create("resume_src"), pg_factory.create("resume_dst")
    _run(source, "CREATE TABLE notes (id integer PRIMARY KEY, v integer NOT NULL);"
                 f"INSERT INTO notes SELECT i, 0 FROM generate_series(1, {ROWS}) AS i")  # fmt: skip
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE notes (id integer PRIMARY KEY, v integer NOT NULL)"))
        conn.execute(sa.text("CREATE TABLE seen (n bigserial PRIMARY KEY, id integer, v integer)"))
        conn.execute(sa.text(
            "CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO seen (id, v) VALUES (NEW.id, NEW.v); RETURN NEW; END $$"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TRIGGER log_write AFTER INSERT OR UPDATE ON notes "
                             "FOR EACH ROW EXECUTE FUNCTION log_write()"))  # fmt: skip
    engine.dispose()
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  resumed: {{kind: sql, url: '{source}', table: notes, key: id, mode: stream, page_size: 20,
            buffer: {{capacity: 15, replenish_below: 5}},
            target: wh.notes}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 15, max_wait: 50ms}}
""")  # fmt: skip
    try:
        assert drain(cfg, path, spark).exit_code == 0  # the full load: each row written once
        assert scalar(target, "SELECT count(*) FROM seen") == ROWS

        # 30 changes, one transaction each, in batches of at most 15: killed after the
        # first batch's commit, then restarted.
        for key in range(1, 31):
            _run(source, f"UPDATE notes SET v = 1 WHERE id = {key}")
        _crash(path, "after_target_commit:1", tmp_path / "crash.log")
        assert 0 < scalar(target, "SELECT count(*) FROM seen WHERE v = 1") < 30
        assert _confirmed(source) <= _held(target)
        assert drain(cfg, path, spark).exit_code == 0
        assert _rows(target) == _rows(source)
        # Each change applied once; the table not loaded again.
        assert scalar(target, "SELECT count(*) FROM seen") == ROWS + 30
        assert _confirmed(source) <= _held(target)

        # One transaction of 60 changes, split across batches of 15: killed after the
        # first, the rest of that transaction must still come from the slot.
        _run(source, "UPDATE notes SET v = 2")
        _crash(path, "after_target_commit:1", tmp_path / "split.log")
        assert scalar(target, "SELECT count(*) FROM notes WHERE v = 2") == 15
        assert _confirmed(source) <= _held(target)
        assert drain(cfg, path, spark).exit_code == 0
        assert _rows(target) == _rows(source)
        assert scalar(target, "SELECT count(*) FROM seen") == ROWS + 30 + ROWS
    finally:
        drop_streams(cfg)


def test_a_group_sharing_one_slot_resumes_after_a_kill_with_nothing_lost_or_twice(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any
) -> None:
    """Three tables of one ``tables:`` group read one slot; each says how far the slot may
    go. Killed after a batch's commit while the tables' changes interleave (one
    transaction touching all three, split across batches), the restart brings every
    change once: the slot kept what any of them still needed."""
    tables = ("a", "b", "c")
    source, target = logical_pg.create("gres_src"), pg_factory.create("gres_dst")
    _run(source, ";".join(f"CREATE TABLE {t} (id integer PRIMARY KEY, v integer NOT NULL);"
                          f"INSERT INTO {t} SELECT i, 0 FROM generate_series(1, 20) AS i"
                          for t in tables))  # fmt: skip
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE seen (n bigserial PRIMARY KEY, t text, id integer, "
                             "v integer)"))  # fmt: skip
        conn.execute(sa.text(
            "CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO seen (t, id, v) VALUES (TG_TABLE_NAME, NEW.id, NEW.v); RETURN NEW; "
            "END $$"
        ))  # fmt: skip
        for t in tables:
            conn.execute(sa.text(f"CREATE TABLE {t} (id integer PRIMARY KEY, v integer NOT NULL)"))
            conn.execute(sa.text(f"CREATE TRIGGER log_write AFTER INSERT OR UPDATE ON {t} "
                                 "FOR EACH ROW EXECUTE FUNCTION log_write()"))  # fmt: skip
    engine.dispose()
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  grp: {{kind: sql, url: '{source}', tables: ["*"], mode: stream, page_size: 20,
        buffer: {{capacity: 15, replenish_below: 5}}, target: wh}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 15, max_wait: 50ms}}
""")  # fmt: skip
    assert sorted(cfg.sources) == ["grp.a", "grp.b", "grp.c"]
    try:
        assert drain(cfg, path, spark).exit_code == 0
        assert scalar(target, "SELECT count(*) FROM seen") == 60
        for key in range(1, 11):  # one table at a time, then all three in one transaction
            _run(source, f"UPDATE {tables[key % 3]} SET v = 1 WHERE id = {key}")
        _run(source, "UPDATE a SET v = 2; UPDATE b SET v = 2; UPDATE c SET v = 2")
        _crash(path, "after_target_commit:2", tmp_path / "group.log")
        assert drain(cfg, path, spark).exit_code == 0
        for t in tables:
            assert _rows(target, t) == _rows(source, t), t
        assert scalar(target, "SELECT count(*) FROM seen") == 60 + 10 + 60
        assert scalar(target, "SELECT count(*) FROM seen WHERE v = 2") == 60
        assert scalar(source, "SELECT count(*) FROM pg_replication_slots "
                            "WHERE database = current_database()") == 1  # fmt: skip
    finally:
        drop_streams(cfg)


class _Change:
    """An insert as a decoded change looks to the stream source."""

    def __init__(self, key: int) -> None:
        self.op, self.new = "insert", {"id": str(key), "v": "0"}

    def key(self, columns: Any) -> tuple[Any, ...]:
        return (self.new["id"],)

    def old_key(self, columns: Any) -> None:
        return None


class _SharedSlotView:
    """One table's view of a group's slot: its watermarks come back, then one transaction of
    20 of its changes (commit at LSN 100, end at 120); what the table lets the slot forget
    is recorded."""

    what, reached, shared, at_end = "slot", 0, True, True
    whole_chunks = False
    snapshot = None  # its load reads between watermarks

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.acknowledged: list[int] = []
        self.sent = False

    def read(self, after: int, messages: int) -> list[Any]:
        from sources.stream_backends import Txn

        found = [Txn(10, 0.0, [], self.marks, 5)] if self.marks else []
        self.marks = []
        if not self.sent:
            found.append(Txn(120, 0.0, [_Change(k) for k in range(1, 21)], [], 100))
            self.sent = True
        return [t for t in found if t.end > after]

    def acknowledge(self, end: int) -> None:
        self.acknowledged.append(end)

    def mark(self, content: str) -> None:
        self.marks.append(content)

    def open(self) -> None: ...
    def columns(self) -> list[str]:
        return ["id", "v"]

    def chunk(self, after: Any, rows: int) -> list[dict[str, Any]]:
        return []

    def current(self, keys: Any, columns: Any) -> dict[Any, Any]:
        return {}

    def close(self) -> None: ...


def test_a_table_of_a_group_keeps_a_transaction_it_handed_out_part_of() -> None:
    """15 of a transaction's 20 changes handed out, none applied: the table lets the shared
    slot go only up to that transaction's commit (LSN 100), where the slot still has it,
    never to its end (past its commit: the server would skip it after a restart)."""
    from config.models import SqlSourceConfig
    from sources.stream import StreamSource

    cfg = SqlSourceConfig(kind="sql", url="postgresql+psycopg://u@127.0.0.1:1/db",
                          table="items", key=["id"], mode="stream", target="wh.items")  # fmt: skip
    stream = StreamSource("items", cfg, committed=lambda: None)
    view = _SharedSlotView()
    stream._stream = view  # type: ignore[assignment]  # no server
    assert sum(item.rows for item in stream.next_batch(15)) == 15
    stream.next_batch(15)
    assert view.acknowledged and max(view.acknowledged) == 100
