"""A PostgreSQL stream keeps every value: out-of-line values a change did not send, the
source's own output settings, and a table whose changes cannot name their row.

PostgreSQL sends a value stored out of line (TOAST) that an UPDATE left alone as
"unchanged". The target keeps its own value then; where it has none (the key moved,
or the row's chunk was being read as the change came), the stream reads the value from
the source. Judged by independent reads of both databases (``md5`` of the value, each
column as its server prints it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SqlSourceConfig
from scheduler.commands.cutover import run_cutover
from sources.pg_stream import PgBackend
from sources.sqldb import SourceDatabase
from spark_jobs.changes.change_batches import CopyRows, LoadRange
from tests.helpers import drain, stream_leftovers, write_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

ROWS = 60
BIG = "(SELECT string_agg(md5(g::text || :salt), '') FROM generate_series(1, 700) AS g)"
"""A 22 kB value, stored out of line (the column's storage is EXTERNAL: never compressed)."""


def _config(source: str, target: str, table: str = "docs") -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  docs: {{kind: sql, url: '{source}', table: {table}, key: id, mode: stream, page_size: 20,
         target: wh.docs}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 200, max_wait: 50ms}}
"""


def _run(source: str, sql: str, **params: Any) -> None:
    engine = sa.create_engine(source)
    try:
        with engine.begin() as conn:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(sa.text(statement), params)
    finally:
        engine.dispose()


def _rows(url: str) -> dict[str, tuple[Any, ...]]:
    """Each row as its server prints it; the large value by its md5 and length."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # In one set of forms on both sides: the source database's own differ.
            conn.exec_driver_sql("SET DateStyle = ISO, MDY")
            conn.exec_driver_sql("SET IntervalStyle = postgres")
            conn.exec_driver_sql("SET TimeZone = UTC")
            found = conn.execute(sa.text(
                "SELECT id::text, v::text, md5(body), length(body), at::text, span::text FROM docs"
            )).all()  # fmt: skip
    finally:
        engine.dispose()
    return {r[0]: tuple(r) for r in found}


def _make_source(url: str) -> None:
    _run(url, f"""
        CREATE TABLE docs (id integer PRIMARY KEY, v integer NOT NULL, body text,
                           at timestamptz, span interval);
        ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
        INSERT INTO docs SELECT i, 0, {BIG.replace(":salt", "i::text")},
            '2024-02-01 10:00:00+00'::timestamptz + i * interval '1 day',
            make_interval(days => i, hours => -3)
        FROM generate_series(1, {ROWS}) AS i
    """)  # fmt: skip


@pytest.mark.parametrize("load", ["snapshot", "watermarks"])
def test_out_of_line_values_stay_through_updates_key_moves_and_both_in_one_transaction(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any,
    monkeypatch: pytest.MonkeyPatch, load: str,
) -> None:  # fmt: skip
    """The full load reads the slot's snapshot (a start that made the slot) or, as after a
    restart part way, between watermarks: the changes during it and after end alike."""
    source, target = logical_pg.create(f"toast_{load}"), pg_factory.create(f"toast_{load}_dst")
    _make_source(source)
    # Printed in forms the target would read wrongly, were they not pinned by the stream.
    database = sa.make_url(source).database
    _run(source, f"ALTER DATABASE {database} SET DateStyle = 'SQL, DMY';"
                 f"ALTER DATABASE {database} SET IntervalStyle = 'sql_standard';"
                 f"ALTER DATABASE {database} SET TimeZone = 'Asia/Kathmandu'")  # fmt: skip
    path, cfg = write_config(tmp_path, _config(source, target))

    # While the full load reads its second chunk (ids 21-40), rows of that chunk change:
    # between watermarks, before its high one (their chunk rows are dropped, the changes
    # bring them); in the snapshot, after it (the changes come after the load).
    read = PgBackend.chunk
    chunks: list[int] = []

    def chunk_then_change(self: PgBackend, after: Any, rows: int, **kw: Any) -> CopyRows:
        got = read(self, after, rows, **kw)
        chunks.append(got.rows)
        if len(chunks) == 2:
            _run(source, "UPDATE docs SET v = v + 1 WHERE id IN (21, 22);"
                         "UPDATE docs SET id = id + 500 WHERE id IN (23, 24)")  # fmt: skip
        return got

    ranges = PgBackend.load_range

    def range_then_change(self: PgBackend, after: Any, rows: int, snapshot: str) -> LoadRange:
        got = ranges(self, after, rows, snapshot)
        chunks.append(got.rows)
        if len(chunks) == 2:  # read by their importers later: in the snapshot all the same
            _run(source, "UPDATE docs SET v = v + 1 WHERE id IN (21, 22);"
                         "UPDATE docs SET id = id + 500 WHERE id IN (23, 24)")  # fmt: skip
        return got

    monkeypatch.setattr(PgBackend, "chunk", chunk_then_change)
    monkeypatch.setattr(PgBackend, "load_range", range_then_change)
    if load == "watermarks":  # as where no snapshot serves
        monkeypatch.setattr(PgBackend, "snapshot", property(lambda self: None))
    assert drain(cfg, path, spark).exit_code == 0
    monkeypatch.undo()
    assert len(chunks) >= 2

    # Then, with every row in the target: changes that leave the large value alone.
    _run(source, "UPDATE docs SET v = v + 1 WHERE id BETWEEN 1 AND 10;"  # kept by the target
                 "UPDATE docs SET id = id + 1000 WHERE id BETWEEN 11 AND 15")  # fmt: skip
    _run(source, "UPDATE docs SET body = body || 'x', v = 7 WHERE id BETWEEN 16 AND 18;"
                 "UPDATE docs SET id = id + 2000 WHERE id BETWEEN 16 AND 18")  # both at once
    _run(source, "UPDATE docs SET id = id + 3000 WHERE id BETWEEN 25 AND 27;"
                 "UPDATE docs SET v = 9 WHERE id BETWEEN 3025 AND 3027")  # fmt: skip
    for step in (4000, 5000):  # a key moved twice, in two transactions
        _run(source, f"UPDATE docs SET id = id + {step} WHERE id IN (28, 29, {28 + 4000}, "
                     f"{29 + 4000})")  # fmt: skip
    _run(source, f"UPDATE docs SET body = {BIG} WHERE id = 30", salt="new")
    assert drain(cfg, path, spark).exit_code == 0

    got, want = _rows(target), _rows(source)
    assert {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v} == {}
    assert set(got) == set(want)
    assert {"1", "1011", "2016", "3025", "9028", "21", "523"} <= set(got)
    assert all(row[3] >= 22_000 for row in got.values())  # no large value lost
    report = run_cutover(spark, cfg, path)
    assert report.ready, report.problems
    assert stream_leftovers(source) == []


def test_a_start_refused_part_way_leaves_no_slot_and_names_the_table(
    tmp_path: Path, logical_pg: Any, pg_factory: Any
) -> None:
    """The second of two streams is a table whose changes would not carry their key (and
    publishing it would make the application's own updates fail): the start is refused
    by name, and the first stream's slot and publication, made by this start, are gone."""
    from scheduler.daemon import Daemon

    source, target = logical_pg.create("ident_src"), pg_factory.create("ident_dst")
    _run(source, "CREATE TABLE fine (id integer PRIMARY KEY, v integer);"
                 "CREATE TABLE docs (id integer NOT NULL, v integer, body text)")  # fmt: skip
    text = _config(source, target).replace("sources:\n", f"""sources:
  fine: {{kind: sql, url: '{source}', table: fine, key: id, mode: stream, target: wh.fine}}
""")  # fmt: skip
    path, cfg = write_config(tmp_path, text)
    assert list(cfg.sources) == ["fine", "docs"]
    with pytest.raises(ConfigError, match=r"source docs: table public.docs has no primary key.*"
                                          r"REPLICA IDENTITY FULL"):  # fmt: skip
        Daemon(cfg, config_path=str(path)).run(until_drained=True)
    assert stream_leftovers(source) == []

    _run(source, "ALTER TABLE docs REPLICA IDENTITY FULL")  # every column in the old row
    cfg_docs = cfg.sources["docs"]
    assert isinstance(cfg_docs, SqlSourceConfig)
    engine = sa.create_engine(source)
    try:
        backend = PgBackend("docs", cfg_docs, SourceDatabase("docs", cfg_docs, engine))
        backend.open()
        assert sorted(stream_leftovers(source)) == ["sluice_docs", "sluice_docs"]
        assert backend.undo() == ["slot sluice_docs", "publication sluice_docs"]
    finally:
        engine.dispose()
    assert stream_leftovers(source) == []




@pytest.mark.parametrize("engine_name", ["postgresql", "mysql"])
def test_reset_of_a_stream_drops_what_it_keeps_on_the_source_and_its_position(
    tmp_path: Path, engine_name: str, pg_factory: Any, spark: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """``sluice reset --source``: the slot and publication (PostgreSQL) or the watermark
    table (MariaDB) go, and the target forgets how far the stream is applied."""
    from tests.chaos.procs import sluice

    servers = request.getfixturevalue("logical_pg" if engine_name == "postgresql"
                                      else "binlog_mariadb")  # fmt: skip
    source, target = servers.create("reset_src"), pg_factory.create("reset_dst")
    _run(source, "CREATE TABLE notes (id integer PRIMARY KEY, v integer);"
                 "INSERT INTO notes VALUES (1, 1), (2, 2), (3, 3)")  # fmt: skip
    path, cfg = write_config(tmp_path, _config(source, target, table="notes"))
    assert drain(cfg, path, spark).exit_code == 0
    _run(source, "UPDATE notes SET v = 5 WHERE id = 2")
    assert drain(cfg, path, spark).exit_code == 0
    assert _position(target) is not None
    if engine_name == "postgresql":
        assert _kept_on(source) != []
    else:
        # A MariaDB stream's load reads ranges, with no watermark: nothing on the source.
        # The table an earlier load between watermarks made is sluice's to drop all the same.
        assert _kept_on(source) == []
        from sources.binlog_changes import BinlogChangeStream

        BinlogChangeStream(sa.make_url(source), ["notes"], "test").mark("sluice", "low:x")
        assert _kept_on(source) == ["sluice_watermarks"]
    if engine_name == "postgresql":
        # The slot dropped behind sluice's back: the changes since the ledger's mark are in
        # no slot. A start is refused, names the way out, and leaves no new slot behind.
        _run(source, "SELECT pg_drop_replication_slot('sluice_docs')")
        from scheduler.daemon import Daemon

        with pytest.raises(ConfigError, match="sluice reset --source docs"):
            Daemon(cfg, config_path=str(path)).run(until_drained=True)
        assert _kept_on(source) == ["sluice_docs"]  # the publication, made before

    done = sluice("reset", str(path), "--source", "docs", "--yes")
    assert done.returncode == 0, done.stderr
    kept = ("slot sluice_docs and publication sluice_docs" if engine_name == "postgresql"
            else "table sluice_watermarks")  # fmt: skip
    assert f"docs: dropped {kept}; forgot its position in the target" in done.stdout
    assert _kept_on(source) == []
    assert _position(target) is None


def _kept_on(url: str) -> list[str]:
    """What a stream keeps on ``url``'s database: slots and publications, or sluice's
    watermark table."""
    if sa.make_url(url).get_backend_name() == "postgresql":
        return stream_leftovers(url)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.scalars(sa.text(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = 'sluice_watermarks'"
            )))  # fmt: skip
    finally:
        engine.dispose()


def _position(target: str) -> str | None:
    """The stream position the target records for source ``docs``."""
    engine = sa.create_engine(target)
    try:
        with engine.connect() as conn:
            return conn.scalar(sa.text("SELECT position FROM _sluice_streams "
                                       "WHERE source = 'docs'"))  # fmt: skip
    finally:
        engine.dispose()
