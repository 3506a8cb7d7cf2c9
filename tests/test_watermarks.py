"""A table's full load beside its change stream, reconciled by watermarks (DBLog).

Against servers of the session's own, PostgreSQL with ``wal_level=logical``
and MariaDB with a row binary log: while a writer inserts, updates (a version
column that only grows), deletes and re-inserts rows, and moves keys, the
table is read in key chunks between watermark messages written into its
stream (and a row of each chunk changed after it was read, before its high
watermark); the stream's changes and the chunks' rows, merged by
:class:`sources.watermarks.Reconciler` and applied in order, leave a copy
equal to the table row by row, and no key's version ever goes back. Nothing
is locked.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from typing import Any

import pytest
import sqlalchemy as sa

from sources.binlog_changes import BinlogChangeStream
from sources.pg_changes import PgChangeStream, stream_names
from sources.stream import LoadProgress, take_spans
from sources.watermarks import PREFIX, ChunkRow, Reconciler, high, low
from spark_jobs.changes.change_batches import CopyRows, StreamEvent
from spark_jobs.engines.postgresql.pgoutput import Change, Relation

ROWS = 600
CHUNK = 40
COLUMNS = ("id", "version", "note")
ITEMS = Relation(1, "public", "items", "d", ())


class Copy:
    """The copy the merged stream is applied to, checking that no version goes back."""

    def __init__(self) -> None:
        self.rows: dict[Any, dict[str, Any]] = {}
        self.went_back: list[str] = []

    def put(self, key: Any, row: dict[str, Any]) -> None:
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


class Postgres:
    """The table, its stream and its SQL on PostgreSQL: values as the server's text."""

    select = "SELECT items.id::text AS id, version::text AS version, note FROM items"
    insert = "INSERT INTO items VALUES ({}) ON CONFLICT (id) DO NOTHING"

    def __init__(self, engine: sa.Engine) -> None:
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
        self.stream = PgChangeStream(engine, ["items"], stream_names("items"), "source items")
        self.position: Any = self.stream.open()

    def changes(self) -> list[Any]:
        found = self.stream.changes(after=self.position)
        if found:
            self.position = found[-1].end_lsn
            self.stream.acknowledge(self.position)
        return found

    def drop(self) -> bool:
        return self.stream.drop()


class MariaDB:
    """The table, its stream and its SQL on MariaDB: values as Python's, from PyMySQL."""

    select = "SELECT id, version, note FROM items"
    insert = "INSERT IGNORE INTO items VALUES ({})"

    def __init__(self, engine: sa.Engine) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE items (id int PRIMARY KEY, version int, note text)"))
            conn.execute(sa.text("CREATE TABLE versions (id int, version int)"))
            for event in ("UPDATE", "DELETE"):
                conn.execute(sa.text(f"CREATE TRIGGER keep_{event} AFTER {event} ON items FOR "
                                     "EACH ROW INSERT INTO versions VALUES (OLD.id, OLD.version)"))
            conn.execute(sa.text("INSERT INTO items SELECT seq, 1, 'first' FROM seq_1_to_600"))
        self.stream = BinlogChangeStream(engine.url, ["items"], "source items")
        self.position: Any = self.stream.check()

    def changes(self) -> list[Any]:
        read = self.stream.changes(self.position)
        self.position = read.position
        return read.transactions

    def drop(self) -> bool:
        return self.stream.drop()


def _writer(engine: sa.Engine, insert: str, stop: threading.Event, done: list[int]) -> None:
    """Random inserts, updates (version + 1), deletes, re-inserts and key moves; ``done``
    counts the transactions."""
    rng = random.Random(7)
    next_id = ROWS + 1
    while not stop.wait(0.001):  # a busy application, not a flood
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
                conn.execute(sa.text(insert.format(
                    ":i, (SELECT coalesce(max(version), 0) + 1 FROM versions WHERE id = :i), "
                    "'new'")), {"i": next_id if roll < 0.8 else i})  # fmt: skip
                next_id += roll < 0.8
            else:  # the key moves: a delete of the old one, an insert of the new one
                conn.execute(sa.text("UPDATE items SET id = :j, version = version + 1 "
                                     "WHERE id = :i"), {"i": i, "j": next_id})  # fmt: skip
                next_id += 1


@pytest.mark.parametrize("kind", [pytest.param(Postgres, marks=pytest.mark.postgres, id="pg"),
                                  pytest.param(MariaDB, marks=pytest.mark.mariadb, id="mariadb")])
def test_chunks_and_changes_merged_by_watermarks_equal_the_table(
    kind: Any, request: pytest.FixtureRequest
) -> None:
    servers = request.getfixturevalue("logical_pg" if kind is Postgres else "binlog_mariadb")
    engine = sa.create_engine(servers.create("watermarks"))
    source = kind(engine)
    merge, copy = Reconciler(["id"]), Copy()

    def consume() -> None:
        for txn in source.changes():
            marks = [c.decode() for p, c in txn.messages if p == PREFIX]
            for event in merge.feed(marks, txn.changes):
                copy.apply(event)

    stop, written = threading.Event(), [0]
    writer = threading.Thread(target=_writer, args=(engine, source.insert, stop, written))
    writer.start()
    try:
        # The load reads the keys there were at its start; newer rows are the stream's.
        with engine.connect() as conn:
            upto = conn.execute(sa.text("SELECT max(id) FROM items")).scalar_one()
        last, chunk = 0, 0
        while True:  # the full load, chunk by chunk, while the writer writes
            source.stream.mark(PREFIX, low(str(chunk)))
            with engine.connect() as conn:
                rows = [dict(r._mapping) for r in conn.execute(sa.text(
                    f"{source.select} WHERE items.id > :last AND items.id <= :upto "
                    "ORDER BY items.id LIMIT :n"
                ), {"last": last, "upto": upto, "n": CHUNK})]  # fmt: skip
            merge.chunk(str(chunk), rows)
            if rows:  # a change between the read and the high watermark, every chunk
                with engine.begin() as conn:
                    conn.execute(sa.text("UPDATE items SET version = version + 1 WHERE id = :i"),
                                 {"i": int(rows[0]["id"])})  # fmt: skip
            source.stream.mark(PREFIX, high(str(chunk)))
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
    assert merge.pending == [] and chunk >= 5 and during_load >= 20
    with engine.connect() as conn:
        table = {r[0]: dict(zip(COLUMNS, r, strict=True))
                 for r in conn.execute(sa.text(source.select))}  # fmt: skip
    assert copy.went_back == []
    assert copy.rows == table
    assert source.drop()
    engine.dispose()


def test_a_high_watermark_needs_its_low_one_and_its_rows() -> None:
    merge = Reconciler(["id"])
    with pytest.raises(ValueError, match="chunk '3' without its low watermark"):
        merge.feed([high("3")], [])
    merge.chunk("4", [{"id": 1}])
    with pytest.raises(ValueError, match="chunk '4' without its low watermark"):
        merge.feed([high("4")], [])


def test_a_chunk_read_whole_comes_out_whole_at_its_high_watermark_less_what_changed() -> None:
    """A PostgreSQL chunk (COPY text, one event): a change in its window drops that key's
    line; a truncate in its window drops them all; a chunk of keys no change touched comes
    out as it was read."""
    merge = Reconciler(["id"])
    text = "1\ta\n2\tb\n3\tc\n"
    merge.feed([low("1")], [])
    merge.chunk("1", CopyRows(("id", "v"), text, 3, (("1",), ("2",), ("3",))))
    assert merge.holds_back(("2",)) and not merge.holds_back(("4",))
    moved = Change("update", ITEMS, {"id": "9", "v": "b"}, {"id": "2"})
    out = merge.feed([high("1")], [moved])
    assert out[0] is moved
    assert [(b.text, b.rows) for b in out[1:]] == [("1\ta\n3\tc\n", 2)]
    merge.feed([low("2")], [])
    merge.chunk("2", CopyRows(("id", "v"), "4\td\n", 1, (("4",),)))
    assert merge.feed([high("2")], [])[0].text == "4\td\n"  # untouched: as read
    merge.feed([low("3")], [])
    merge.chunk("3", CopyRows(("id", "v"), "5\te\n", 1, (("5",),)))
    assert merge.feed([high("3")], [Change("truncate", ITEMS, None, None)])[1:] == []


def test_a_whole_chunk_waits_for_room_in_the_buffer() -> None:
    """A span never holds more rows than the buffer has room for (a buffer of rows would
    refuse it): a whole chunk past the room stays until there is room."""
    block = StreamEvent("copy", block=CopyRows(("id",), "1\n2\n3\n", 3, (("1",), ("2",), ("3",))))
    change = StreamEvent("insert", ("0",), None, {"id": "0"})
    out: deque[Any] = deque([((10, 1), change, LoadProgress()), ((20, 1), block, LoadProgress())])
    first = take_spans(out, "t", 2, 0)
    assert [(i.key, i.rows) for i in first] == [((10, 1), 1)] and len(out) == 1
    assert take_spans(out, "t", 2, 0) == [] and len(out) == 1  # three rows, room for two
    assert [(i.key, i.rows) for i in take_spans(out, "t", 3, 0)] == [((20, 1), 3)]
