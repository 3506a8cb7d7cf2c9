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
from tests.helpers import drain, write_config

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


def _one(url: str, query: str) -> Any:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(query)).scalar()
    finally:
        engine.dispose()


def _rows(url: str) -> dict[int, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT id, v FROM notes")).tuples().all())
    finally:
        engine.dispose()


def _held(target: str) -> int:
    """The end LSN of the last transaction the target holds changes of (its position)."""
    text = _one(target, "SELECT position FROM _sluice_streams WHERE source = 'resumed'")
    return int(json.loads(text)[0])


def _confirmed(source: str) -> int:
    """The slot's ``confirmed_flush_lsn``: what the source server may forget."""
    return int(_one(source, "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
                            "WHERE slot_name = 'sluice_resumed'"))  # fmt: skip


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
        assert _one(target, "SELECT count(*) FROM seen") == ROWS

        # 30 changes, one transaction each, in batches of at most 15: killed after the
        # first batch's commit, then restarted.
        for key in range(1, 31):
            _run(source, f"UPDATE notes SET v = 1 WHERE id = {key}")
        _crash(path, "after_target_commit:1", tmp_path / "crash.log")
        assert 0 < _one(target, "SELECT count(*) FROM seen WHERE v = 1") < 30
        assert _confirmed(source) <= _held(target)
        assert drain(cfg, path, spark).exit_code == 0
        assert _rows(target) == _rows(source)
        # Each change applied once; the table not loaded again.
        assert _one(target, "SELECT count(*) FROM seen") == ROWS + 30
        assert _confirmed(source) <= _held(target)

        # One transaction of 60 changes, split across batches of 15: killed after the
        # first, the rest of that transaction must still come from the slot.
        _run(source, "UPDATE notes SET v = 2")
        _crash(path, "after_target_commit:1", tmp_path / "split.log")
        assert _one(target, "SELECT count(*) FROM notes WHERE v = 2") == 15
        assert _confirmed(source) <= _held(target)
        assert drain(cfg, path, spark).exit_code == 0
        assert _rows(target) == _rows(source)
        assert _one(target, "SELECT count(*) FROM seen") == ROWS + 30 + ROWS
    finally:
        drop_streams(cfg)
