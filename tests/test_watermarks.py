"""A table's full load beside its change stream, reconciled by watermarks (DBLog).

Against a PostgreSQL of the session's own with ``wal_level=logical``: while a
writer inserts, updates (a version column that only grows), deletes and
re-inserts rows, and moves keys, the table is read in key chunks between
watermark messages written into its stream (and a row of each chunk changed
after it was read, before its high watermark); the stream's changes and the
chunks' rows, merged by :class:`sources.watermarks.Reconciler` and applied
in order, leave a copy equal to the table row by row, and no key's version
ever goes back. Nothing is locked.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import sqlalchemy as sa

from sources.pg_changes import PgChangeStream, stream_names
from sources.watermarks import PREFIX, ChunkRow, Reconciler, high, low

pytestmark = pytest.mark.postgres

ROWS = 600
CHUNK = 20
COLUMNS = ("id", "version", "note")


class Copy:
    """The copy the merged stream is applied to, checking that no version goes back."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.went_back: list[str] = []

    def put(self, key: str, row: dict[str, Any]) -> None:
        held = self.rows.get(key)
        if held is not None and int(row["version"]) < int(held["version"]):
            self.went_back.append(f"{key}: {held['version']} -> {row['version']}")
        self.rows[key] = {c: row[c] for c in COLUMNS}

    def apply(self, event: Any) -> None:
        if isinstance(event, ChunkRow):
            self.put(event.key[0], event.row)
        elif event.op == "delete":
            self.rows.pop(event.key(["id"])[0], None)
        else:
            before = event.old_key(["id"])
            if before is not None:
                self.rows.pop(before[0], None)
            self.put(event.key(["id"])[0], event.new)


def _writer(engine: sa.Engine, stop: threading.Event, seed: int, done: list[int]) -> None:
    """Random inserts, updates (version + 1), deletes, re-inserts and key moves; ``done``
    counts the transactions."""
    rng = random.Random(seed)
    next_id = ROWS + 1
    while not stop.is_set():
        done[0] += 1
        i = rng.randint(1, next_id)
        roll = rng.random()
        with engine.begin() as conn:
            if roll < 0.5:
                conn.execute(sa.text("UPDATE items SET version = version + 1, note = :n "
                                     "WHERE id = :i"), {"i": i, "n": f"u{i}"})  # fmt: skip
            elif roll < 0.7:
                conn.execute(sa.text("DELETE FROM items WHERE id = :i"), {"i": i})
            elif roll < 0.9:  # a new key, or one deleted before (its version goes on)
                conn.execute(sa.text(
                    "INSERT INTO items VALUES (:i, (SELECT coalesce(max(version), 0) + 1 "
                    "FROM versions WHERE id = :i), 'new') ON CONFLICT (id) DO NOTHING"
                ), {"i": next_id if roll < 0.8 else i})  # fmt: skip
                next_id += roll < 0.8
            else:  # the key moves: a delete of the old one, an insert of the new one
                conn.execute(sa.text("UPDATE items SET id = :j, version = version + 1 "
                                     "WHERE id = :i AND NOT EXISTS (SELECT 1 FROM items "
                                     "WHERE id = :j)"), {"i": i, "j": next_id})  # fmt: skip
                next_id += 1


def test_chunks_and_changes_merged_by_watermarks_equal_the_table(logical_pg: Any) -> None:
    engine = sa.create_engine(logical_pg.create("watermarks"))
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE items (id integer PRIMARY KEY, version integer, "
                             "note text)"))  # fmt: skip
        # Versions live on after a delete: a key inserted again starts above its last.
        conn.execute(sa.text("CREATE TABLE versions (id integer, version integer)"))
        conn.execute(sa.text(
            "CREATE FUNCTION keep() RETURNS trigger AS $$ BEGIN INSERT INTO versions "
            "VALUES (OLD.id, OLD.version); RETURN OLD; END $$ LANGUAGE plpgsql"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TRIGGER keep AFTER DELETE OR UPDATE ON items "
                             "FOR EACH ROW EXECUTE FUNCTION keep()"))  # fmt: skip
        conn.execute(sa.text("INSERT INTO items SELECT i, 1, 'first' FROM "
                             "generate_series(1, :n) i"), {"n": ROWS})  # fmt: skip
    stream = PgChangeStream(engine, ["items"], stream_names("items"), "source items")
    position = stream.open()
    merge, copy = Reconciler(["id"]), Copy()

    def consume() -> None:
        nonlocal position
        for txn in stream.changes(after=position):
            marks = [c.decode() for p, c in txn.messages if p == PREFIX]
            for event in merge.feed(marks, txn.changes):
                copy.apply(event)
            position = txn.end_lsn
        stream.acknowledge(position)

    stop = threading.Event()
    written = [0]
    writer = threading.Thread(target=_writer, args=(engine, stop, 7, written))
    writer.start()
    try:
        last, chunk = 0, 0
        while True:  # the full load, chunk by chunk, while the writer writes
            stream.mark(PREFIX, low(str(chunk)))
            with engine.connect() as conn:
                rows = [dict(r._mapping) for r in conn.execute(sa.text(
                    "SELECT id::text, version::text, note FROM items "
                    "WHERE items.id > :last ORDER BY items.id LIMIT :n"
                ), {"last": last, "n": CHUNK})]  # fmt: skip
            merge.chunk(str(chunk), rows)
            if rows:  # a change between the read and the high watermark, every chunk
                with engine.begin() as conn:
                    conn.execute(sa.text("UPDATE items SET version = version + 1 WHERE id = :i"),
                                 {"i": int(rows[0]["id"])})  # fmt: skip
            stream.mark(PREFIX, high(str(chunk)))
            consume()
            if len(rows) < CHUNK:
                break
            last, chunk = int(rows[-1]["id"]), chunk + 1
        during_load = written[0]
        consume()  # the stream alone now, the writer still writing
    finally:
        stop.set()
        writer.join()
    consume()
    assert merge.pending == [] and chunk >= 5 and during_load >= 100
    with engine.connect() as conn:
        table = {r[0]: dict(zip(COLUMNS, r, strict=True)) for r in conn.execute(
            sa.text("SELECT id::text, version::text, note FROM items"))}  # fmt: skip
    assert copy.went_back == []
    assert copy.rows == table
    assert stream.drop()
    engine.dispose()


def test_a_high_watermark_needs_its_low_one_and_its_rows() -> None:
    merge = Reconciler(["id"])
    with pytest.raises(ValueError, match="chunk '3' without its low watermark"):
        merge.feed([high("3")], [])
    merge.chunk("4", [{"id": 1}])
    with pytest.raises(ValueError, match="chunk '4' without its low watermark"):
        merge.feed([high("4")], [])
