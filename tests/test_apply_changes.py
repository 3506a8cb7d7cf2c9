"""A change stream's batches applied to a PostgreSQL target: net effect, types, order, once.

Every result is read back as the database prints it (``col::text``), never through
sluice's own read path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import TargetError
from config.models import JdbcTargetConfig
from spark_jobs.changes.apply_changes import apply_changes
from spark_jobs.changes.change_batches import CopyRows, StreamEvent
from spark_jobs.changes.positions import forget_stream, stream_position
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED
from spark_jobs.load.target import StaleToken, TargetTable

SOURCE = "shop"
DEADLINE = 10.0  # seconds for a waiting importer to show up; far more than it takes


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    """A fresh database with ``items`` (id, v, big with a default) and three rows."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE items (id integer PRIMARY KEY, v text, big text DEFAULT 'default')"
            )
        )
        conn.execute(
            sa.text("INSERT INTO items VALUES (1, 'a', 'big1'), (2, 'b', 'big2'), (3, 'c', 'big3')")
        )
    yield engine
    engine.dispose()


def target(engine: sa.Engine, table: str = "items") -> TargetTable:
    url = engine.url.render_as_string(hide_password=False)
    return TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=url), None, table, ("id",))


def ev(op: str, key: Any = None, new: dict[str, Any] | None = None, moved: Any = None) -> str:
    """A change as its batch carries it (keys and values as text)."""
    keys = () if key is None else (str(key),)
    return StreamEvent(op, keys, None if moved is None else (str(moved),), new).to_json()


def row(id_: int, v: str | None, big: Any = UNCHANGED) -> dict[str, Any]:
    return {"id": str(id_), "v": v, "big": big}


def batch(batch_id: str, lo: list[int] | None, hi: list[int], *events: str,
          token: int = 1) -> Manifest:  # fmt: skip
    return Manifest(batch_id, SOURCE, "wh.items", "changes", len(events), token, lo, hi,
                    payloads=list(events))  # fmt: skip


def items(engine: sa.Engine) -> dict[str, tuple[str | None, ...]]:
    with engine.connect() as conn:
        found = conn.execute(sa.text("SELECT id::text, v::text, big::text FROM items"))
        return {r[0]: tuple(r[1:]) for r in found}


def commit_rows(engine: sa.Engine, batch_id: str) -> tuple[int, int] | None:
    """The (token, rows) ``_sluice_commits`` records for the batch."""
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT token, rows FROM _sluice_commits WHERE batch_id = :b"), {"b": batch_id}
        ).first()
    return None if found is None else (found[0], found[1])


def test_a_batch_applies_its_net_effect(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO items VALUES (4, 'd', 'big4')"))
    written = apply_changes(engine, target(engine), batch("b1", None, [1, 7],
        ev("insert", 5, row(5, "e", "big5")),
        ev("update", 1, row(1, "a2", "big1")),
        ev("update", 1, row(1, "a3", "big1")),
        ev("delete", 2),
        ev("update", 30, row(30, "c", "big3"), moved=3),  # the key moved
        ev("insert", 6, row(6, "f", "big6")),
        ev("delete", 6),  # in and out within the batch
        ev("delete", 99),  # never there
        ev("update", 4, row(4, None, "big4")),
    ))  # fmt: skip
    assert items(engine) == {
        "1": ("a3", "big1"),
        "30": ("c", "big3"),
        "4": (None, "big4"),
        "5": ("e", "big5"),
    }
    # Four keys written, two rows deleted (2 and the old 3); 6 and 99 were not there.
    assert written.rows == 6
    assert commit_rows(engine, "b1") == (1, 6)
    assert stream_position(engine, SOURCE) == [1, 7]


def test_a_truncate_empties_the_table_first(engine: sa.Engine) -> None:
    apply_changes(engine, target(engine), batch("b1", None, [3],
        ev("insert", 4, row(4, "d", "x")),
        ev("truncate"),
        ev("insert", 5, row(5, "e", "x")),
        ev("update", 5, row(5, "e2", UNCHANGED)),
    ))  # fmt: skip
    assert items(engine) == {"5": ("e2", "x")}
    apply_changes(engine, target(engine), batch("b2", [3], [4], ev("truncate")))
    assert items(engine) == {}


def test_unchanged_values_keep_the_targets(engine: sa.Engine) -> None:
    written = apply_changes(engine, target(engine), batch("b1", None, [1],
        ev("update", 1, row(1, "a2", UNCHANGED)),
        ev("update", 2, row(2, "b2", "new2")),
        ev("update", 3, {"id": "3", "v": UNCHANGED, "big": "new3"}),
        ev("insert", 4, row(4, "d", UNCHANGED)),  # not in a correct stream: the default
    ))  # fmt: skip
    assert items(engine) == {
        "1": ("a2", "big1"),
        "2": ("b2", "new2"),
        "3": ("c", "new3"),
        "4": ("d", "default"),
    }
    assert written.rows == 4


COLUMNS = {
    "id": "uuid PRIMARY KEY", "ints": "integer[]", "texts": "text[]", "amount": "numeric",
    "price": "numeric(30, 10)", "at": "timestamptz", "at_local": "timestamp",
    "span": "interval", "blob": "bytea", "doc": "jsonb", "raw": "json", "feeling": "mood",
    "day": "date", "ratio": "double precision", "note": "text", "code": "char(5)",
    "flags": "bit varying(8)", "big": "bigint", "ok": "boolean", "tm": "timetz",
    "addr": "inet", "r": "int4range",
}  # fmt: skip
TYPES = ", ".join(f"{name} {type_}" for name, type_ in COLUMNS.items())
ROWS = [
    """('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,NULL,3}', '{"a b","c\\"d",NULL,"NULL",""}',
        12345678901234567890.123456789012345678901234567890, 1234567890.0123456789,
        '2024-02-29 23:59:59.999999+05:30', 'infinity', '1 year 2 mons -3 days 04:05:06.789',
        '\\x00ff5c27', '{"b": [1, 2.50, "x\\"y"], "a": null}', '{"keep" :  "spacing", "a":1}',
        'it''s "odd"', 'infinity', 'NaN', E'it''s a "quote" \\\\ back\\nnew\\tline\\r',
        'ab', B'101', -9223372036854775808, true, '12:00:00.5+03', '192.168.0.1/24', '[1,5)')""",
    """('00000000-0000-0000-0000-000000000000', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    """('ffffffff-ffff-ffff-ffff-ffffffffffff', '{}', '{}', 'NaN', 0.0000000001,
        '-infinity', '1999-12-31 23:59:59.5', '-178000000 years', '\\x', '[]', '"s"',
        'happy', '-infinity', '-Infinity', '', '', B'', 0, false, '00:00:00-14', '::1',
        'empty')""",
]


def as_text(engine: sa.Engine, table: str, columns: list[str]) -> dict[str, dict[str, Any]]:
    """Every row of ``table`` as the database prints it, in a time zone of an odd offset."""
    with engine.begin() as conn:
        conn.execute(sa.text("SET LOCAL TIME ZONE 'America/St_Johns'"))
        found = conn.execute(
            sa.text(f"SELECT {', '.join(f'{c}::text AS {c}' for c in columns)} FROM {table}")
        )
        return {r["id"]: dict(r) for r in found.mappings()}


def test_values_of_every_type_arrive_as_the_source_prints_them(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("""CREATE TYPE mood AS ENUM ('happy', 'it''s "odd"')"""))
        conn.execute(sa.text(f"CREATE TABLE source ({TYPES})"))
        conn.execute(sa.text(f"CREATE TABLE dest ({TYPES})"))
        for values in ROWS:
            conn.exec_driver_sql(f"INSERT INTO source VALUES {values}")  # literals, as written
        # A row the batch updates (to NULLs): the upsert's UPDATE path parses the same way.
        conn.execute(
            sa.text(
                "INSERT INTO dest (id, note, doc, amount) VALUES "
                "('00000000-0000-0000-0000-000000000000', 'x', '{}', 1)"
            )
        )
    columns = list(COLUMNS)
    source = as_text(engine, "source", columns)
    events = [ev("insert", key, values) for key, values in source.items()]
    dest = TargetTable("wh", target(engine).config, None, "dest", ("id",))
    written = apply_changes(engine, dest, batch("b1", None, [1], *events))
    assert written.rows == 3
    assert as_text(engine, "dest", columns) == source
    assert source["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]["doc"].startswith('{"a": null')


def test_the_same_batch_twice_changes_nothing_the_second_time(engine: sa.Engine) -> None:
    b1 = batch("b1", None, [5], ev("insert", 4, row(4, "d", "x")), ev("delete", 1))
    assert apply_changes(engine, target(engine), b1).rows == 2
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE items SET v = 'touched' WHERE id = 4"))
    again = apply_changes(engine, target(engine), b1)
    assert again.rows == 2  # as recorded
    assert items(engine) == {"2": ("b", "big2"), "3": ("c", "big3"), "4": ("touched", "x")}
    assert commit_rows(engine, "b1") == (1, 2)
    assert stream_position(engine, SOURCE) == [5]


def test_a_batch_waits_for_the_one_before_it(engine: sa.Engine) -> None:
    early = batch("b2", [1, 9], [1, 20], ev("insert", 7, row(7, "g", "x")))
    with pytest.raises(BatchImportFailed) as caught:
        apply_changes(engine, target(engine), early)  # the stream's first batch is not in
    assert caught.value.transient
    apply_changes(engine, target(engine), batch("b1", None, [1, 5], ev("delete", 1)))
    with pytest.raises(BatchImportFailed) as caught:
        apply_changes(engine, target(engine), early)  # the one between is not in
    message = str(caught.value)
    assert caught.value.transient and "waits for the batch before it" in message
    for part in ("b2", SOURCE, "wh.items", "[1, 5]", "[1, 9]"):
        assert part in message
    assert "7" not in items(engine) and "1" not in items(engine)
    assert commit_rows(engine, "b2") is None
    assert stream_position(engine, SOURCE) == [1, 5]


def test_a_batch_the_position_is_inside_of_is_terminal(engine: sa.Engine) -> None:
    apply_changes(engine, target(engine), batch("b1", None, [10], ev("delete", 1)))
    with pytest.raises(BatchImportFailed) as caught:
        apply_changes(engine, target(engine), batch("x", [5], [15], ev("delete", 2)))
    assert not caught.value.transient
    assert "2" in items(engine) and commit_rows(engine, "x") is None


def test_a_batch_the_table_holds_already_is_committed_without_change(engine: sa.Engine) -> None:
    apply_changes(engine, target(engine), batch("b1", None, [1, 9], ev("delete", 1)))
    apply_changes(engine, target(engine), batch("b2", [1, 9], [1, 10], ev("delete", 2)))
    for batch_id, hi in (("old", [1, 9]), ("older", [1, 3])):  # [1, 10] is past [1, 9]
        stale = batch(batch_id, None, hi, ev("insert", 1, row(1, "again", "x")))
        written = apply_changes(engine, target(engine), stale)
        assert written.rows == 0
        assert commit_rows(engine, batch_id) == (1, 0)
    assert items(engine) == {"3": ("c", "big3")}
    assert stream_position(engine, SOURCE) == [1, 10]


def test_a_stale_token_is_refused(engine: sa.Engine) -> None:
    apply_changes(engine, target(engine), batch("b1", None, [5], ev("delete", 1), token=3))
    with pytest.raises(StaleToken):
        apply_changes(engine, target(engine),
                      batch("b1", None, [5], ev("delete", 2), token=2))  # fmt: skip
    assert set(items(engine)) == {"2", "3"}
    assert commit_rows(engine, "b1") == (3, 1)


def test_a_chain_of_batches_ends_in_the_last_state(engine: sa.Engine) -> None:
    chain = [
        batch("b1", None, [1, 9], ev("insert", 4, row(4, "d", "x")), ev("delete", 1)),
        batch("b2", [1, 9], [1, 10], ev("update", 4, row(4, "d2", UNCHANGED)),
              ev("update", 20, row(20, "b", "big2"), moved=2)),
        batch("b3", [1, 10], [2, 0], ev("update", 20, row(20, "b3", UNCHANGED)),
              ev("insert", 5, row(5, "e", None)), ev("delete", 3)),
    ]  # fmt: skip
    for manifest in chain:
        apply_changes(engine, target(engine), manifest)
    assert items(engine) == {"4": ("d2", "x"), "20": ("b3", "big2"), "5": ("e", None)}
    assert stream_position(engine, SOURCE) == [2, 0]
    assert [commit_rows(engine, m.batch_id) for m in chain] == [(1, 2), (1, 3), (1, 3)]


def test_importers_of_one_stream_take_turns(engine: sa.Engine) -> None:
    apply_changes(engine, target(engine), batch("b1", None, [10], ev("delete", 1)))
    outcome: list[Any] = []
    second = batch("b2", [10], [20], ev("insert", 7, row(7, "g", "x")))
    with engine.connect() as holder:
        # Another importer of the stream, in its transaction: it applied up to 20.
        holder.execute(
            sa.text("SELECT 1 FROM _sluice_streams WHERE source = :s FOR UPDATE"), {"s": SOURCE}
        )
        holder.execute(
            sa.text("UPDATE _sluice_streams SET position = '[20]' WHERE source = :s"), {"s": SOURCE}
        )
        worker = threading.Thread(target=lambda: outcome.append(
            apply_changes(engine, target(engine), second)))  # fmt: skip
        worker.start()
        deadline = time.monotonic() + DEADLINE
        while not _someone_waits_on_a_lock(engine):
            assert time.monotonic() < deadline, "the second importer never waited"
            worker.join(timeout=0.02)
        holder.commit()
    worker.join(timeout=DEADLINE)
    assert not worker.is_alive()
    assert outcome[0].rows == 0  # it saw the other's position, not the one before
    assert "7" not in items(engine)


def _someone_waits_on_a_lock(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar()
        )


def test_a_missing_table_is_a_target_error(engine: sa.Engine) -> None:
    with pytest.raises(TargetError, match="wh.nothere: the table does not exist"):
        apply_changes(engine, target(engine, "nothere"),
                      batch("b1", None, [1], ev("delete", 1)))  # fmt: skip
    assert commit_rows(engine, "b1") is None
    assert stream_position(engine, SOURCE) is None


def test_other_engines_are_refused() -> None:
    mariadb = sa.create_engine("mysql+pymysql://nobody@127.0.0.1:9/none")  # never connected
    with pytest.raises(TargetError, match="PostgreSQL only for now"):
        apply_changes(mariadb, target(mariadb), batch("b1", None, [1], ev("delete", 1)))


def test_a_forgotten_stream_has_no_position(engine: sa.Engine) -> None:
    assert stream_position(engine, SOURCE) is None  # no _sluice_streams yet
    forget_stream(engine, SOURCE)
    apply_changes(engine, target(engine), batch("b1", None, [4, 2], ev("delete", 1)))
    assert stream_position(engine, SOURCE) == [4, 2]
    forget_stream(engine, SOURCE)
    assert stream_position(engine, SOURCE) is None


def chunk(text: str, rows: int, bounds: tuple[str, str] | None) -> str:
    """A whole chunk of a full load as its batch carries it (COPY text of id, v, big)."""
    ends = None if bounds is None else ((bounds[0],), (bounds[1],))
    block = CopyRows(("id", "v", "big"), text, rows, bounds=ends)
    return StreamEvent("copy", block=block).to_json()


def test_whole_chunks_go_in_between_the_changes_around_them(engine: sa.Engine) -> None:
    """A chunk over keys the table lacks goes straight in; one over keys it holds (or whose
    bounds miss a row it holds: the straight COPY's unique violation is rolled back to its
    savepoint) is upserted; the changes after a chunk apply on top of it."""
    written = apply_changes(engine, target(engine), batch("b1", None, [5, 1],
        ev("update", 1, row(1, "a2", "big1")),
        chunk("10\tj\t\\N\n11\tk\tx\\ty\n", 2, ("10", "11")),  # no row there: COPYed in
        chunk("1\tfrom chunk\tb1\n12\tl\tb12\n", 2, ("12", "13")),  # 1 is there after all
        chunk("2\tb2\tB2\n3\tc2\tB3\n", 2, ("2", "3")),  # rows there: upserted
        ev("update", 11, row(11, "k2", UNCHANGED)),
        ev("delete", 10),
    ))  # fmt: skip
    assert items(engine) == {
        "1": ("from chunk", "b1"), "2": ("b2", "B2"), "3": ("c2", "B3"),
        "11": ("k2", "x\ty"), "12": ("l", "b12"),
    }  # fmt: skip
    assert written.rows == 1 + 2 + 2 + 2 + 1 + 1
    assert stream_position(engine, SOURCE) == [5, 1]
