"""A PostgreSQL change stream: a logical slot with ``pgoutput``, read with SQL, decoded.

Against a PostgreSQL of the session's own with ``wal_level=logical``
(``logical_pg``, :mod:`tests.servers`): whole transactions in commit order,
values as the server's own text (``col::text``), inserts, updates (a key
changed, a TOASTed value left unchanged), deletes, truncates, rolled-back
work never seen; peeking keeps, acknowledging forgets, and sluice's own
slot and publication are dropped. The machine's server (``wal_level=replica``)
is refused with the way out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import ConfigError, SourceError
from sources.pg_changes import PgChangeStream, StreamNames, stream_names
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED, DecodeError, Decoder

pytestmark = pytest.mark.postgres

COLUMNS = "id::text, name, amount::text, at::text, tags::text, doc::text, big"
NAMES = ("id", "name", "amount", "at", "tags", "doc", "big")


@pytest.fixture
def db(logical_pg: Any) -> sa.Engine:
    engine = sa.create_engine(logical_pg.create("changes"))
    with engine.begin() as conn:
        conn.execute(sa.text(
            "CREATE TABLE t (id integer PRIMARY KEY, name text, amount numeric(12,3), "
            "at timestamptz, tags text[], doc jsonb, big text)"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE u (a text, b integer, PRIMARY KEY (a, b))"))
    yield engine
    engine.dispose()


def _rows(conn: sa.Connection) -> dict[str, dict[str, Any]]:
    """Every row of ``t`` as the server prints it, by id."""
    found = conn.execute(sa.text(f"SELECT {COLUMNS} FROM t")).all()
    return {row[0]: dict(zip(NAMES, row, strict=True)) for row in found}


def test_changes_come_whole_in_commit_order_as_the_servers_text(db: sa.Engine) -> None:
    stream = PgChangeStream(db, ["public.t", "u"], stream_names("Shop Orders"), "source shop")
    assert stream.names == StreamNames("sluice_shop_orders", "sluice_shop_orders")
    start = stream.open()
    big = "".join(f"{i:08x}" for i in range(2000))  # 16 KB: stored out of line (TOAST)
    with db.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO t VALUES (1, NULL, 'NaN', '2024-02-29 23:59:59.999999+05:30', "
            "NULL, '{\"a\": [1, 2.50]}', 'x'), "
            "(2, E'tab\\there \"quoted\" \\\\ ✓', -12.345, 'infinity', "
            "ARRAY['a,b', NULL, '{}'], 'null', :big), "
            "(3, '', 0.001, NULL, '{}', NULL, NULL)"
        ), {"big": big})  # fmt: skip
        inserted = _rows(conn)
    with db.begin() as conn:
        conn.execute(sa.text("UPDATE t SET name = 'renamed' WHERE id = 2"))
        conn.execute(sa.text("UPDATE t SET id = 30 WHERE id = 3"))
        conn.execute(sa.text("DELETE FROM t WHERE id = 1"))
        conn.execute(sa.text("INSERT INTO u VALUES ('k', 7)"))
    with db.connect() as conn, conn.begin() as txn:  # work rolled back is never streamed
        conn.execute(sa.text("INSERT INTO t (id) VALUES (99)"))
        txn.rollback()
    with db.begin() as conn:
        conn.execute(sa.text("UPDATE t SET amount = 1 WHERE id = 2"))  # big is not touched
        conn.execute(sa.text("TRUNCATE u"))

    first, second, third = stream.changes(after=start)
    assert start < first.end_lsn < second.end_lsn < third.end_lsn
    assert first.commit_lsn < first.end_lsn
    assert abs(datetime.now(UTC) - third.committed_at) < timedelta(minutes=1)
    assert [c.op for c in first.changes] == ["insert"] * 3
    assert {c.key(["id"])[0]: c.new for c in first.changes} == inserted
    renamed, rekeyed, deleted, keyed = second.changes
    assert (renamed.op, renamed.new and renamed.new["name"]) == ("update", "renamed")
    assert renamed.old_key(["id"]) is None
    assert rekeyed.key(["id"]) == ("30",) and rekeyed.old_key(["id"]) == ("3",)
    assert (deleted.op, deleted.key(["id"]), deleted.new) == ("delete", ("1",), None)
    assert (keyed.relation.qualified, keyed.key(keyed.relation.key_columns)) == ("public.u",
                                                                                 ("k", "7"))
    updated, truncated = third.changes
    assert updated.new is not None and updated.new["amount"] == "1.000"
    assert updated.new["big"] is UNCHANGED  # the reader fetches such a value from the table
    assert (truncated.op, truncated.relation.name) == ("truncate", "u")
    assert stream.drop()


def test_peeking_keeps_changes_until_they_are_acknowledged_and_drop_leaves_nothing(
    db: sa.Engine,
) -> None:
    stream = PgChangeStream(db, ["t"], stream_names("t"), "source t")
    start = stream.open()
    assert stream.open() == start  # made once, found again
    for i in (1, 2):
        with db.begin() as conn:
            conn.execute(sa.text("INSERT INTO t (id, name) VALUES (:i, 'n')"), {"i": i})
    first, second = stream.changes(after=start)
    assert [t.end_lsn for t in stream.changes(after=start)] == [first.end_lsn, second.end_lsn]
    assert stream.changes(after=first.end_lsn) == [second]
    retained = stream.retained_bytes()
    assert retained is not None and retained > 0
    stream.acknowledge(first.end_lsn)
    assert [t.end_lsn for t in stream.changes()] == [second.end_lsn]
    stream.acknowledge(start)  # never back
    assert [t.end_lsn for t in stream.changes()] == [second.end_lsn]
    assert stream.source_position() >= second.end_lsn

    assert stream.drop() and not stream.drop()
    with db.connect() as conn:
        assert conn.scalar(sa.text("SELECT count(*) FROM pg_replication_slots")) == 0
        assert conn.scalar(sa.text("SELECT count(*) FROM pg_publication")) == 0


def test_named_publication_and_slot_are_used_and_never_dropped(db: sa.Engine) -> None:
    with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("CREATE PUBLICATION theirs FOR TABLE t"))
        conn.execute(sa.text("SELECT pg_create_logical_replication_slot('their_slot', "
                             "'pgoutput')"))  # fmt: skip
    named = PgChangeStream(db, ["t"], StreamNames("theirs", "their_slot", owned=False), "src")
    start = named.open()
    with db.begin() as conn:
        conn.execute(sa.text("INSERT INTO t (id) VALUES (5)"))
    (txn,) = named.changes(after=start)
    assert txn.changes[0].key(["id"]) == ("5",)
    assert not named.drop()
    missing = PgChangeStream(db, ["t"], StreamNames("theirs", "nope", owned=False), "source x")
    with pytest.raises(ConfigError, match="source x: replication slot 'nope' does not exist"):
        missing.open()
    with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT pg_drop_replication_slot('their_slot')"))
        conn.execute(sa.text("DROP PUBLICATION theirs"))


def test_a_server_without_logical_decoding_is_refused_with_the_way_out(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (id integer PRIMARY KEY)"))
    stream = PgChangeStream(engine, ["t"], stream_names("t"), "source t")
    with pytest.raises(ConfigError, match=r"source t: .* runs with wal_level=replica: a change "
                                          r"stream needs wal_level=logical"):  # fmt: skip
        stream.open()
    engine.dispose()
    dead = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/x")
    with pytest.raises(SourceError, match="source t: cannot reach the database"):
        PgChangeStream(dead, ["t"], stream_names("t"), "source t").open()


def test_a_message_that_cannot_be_read_says_what_and_where() -> None:
    with pytest.raises(DecodeError, match="unknown message kind 'Z'"):
        Decoder().feed([b"Z"])
    with pytest.raises(DecodeError, match="message ends at byte 3"):
        Decoder().feed([b"B\x00\x00"])
    with pytest.raises(DecodeError, match="message 'I' outside a transaction"):
        Decoder().feed([b"I\x00\x00\x00\x01N\x00\x00"])
