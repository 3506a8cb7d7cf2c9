"""``mode: stream``: a table's rows and every change after, migrated by the daemon, exactly once.

A PostgreSQL source of the session's own (``wal_level=logical``), a target in
the machine's server. A writer inserts, updates (a version column that only
grows), deletes and re-inserts rows, hot keys many times, while the daemon
loads the table in chunks beside the stream and after; the daemon is stopped
and started again between rounds (each start resumes from the ledger's mark
and the target's position). At the end the target equals the source row by
row (deleted rows gone), a trigger on the target shows no row's version ever
went back, and ``sluice cutover`` says READY and drops sluice's slot and
publication.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.commands.cutover import run_cutover
from scheduler.daemon import Daemon
from sinks.spark import SparkSink
from sources.stream import StreamSource
from tests.helpers import stream_leftovers, write_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

COLUMNS = "id::text, v::text, name, tags::text, amount::text"
MARIADB_COLUMNS = "CAST(id AS CHAR), CAST(v AS CHAR), name, tags, CAST(amount AS CHAR)"
TABLE = {  # the source table, per engine; tags: an array in PostgreSQL, text in MariaDB
    "postgresql": "CREATE TABLE items (id integer PRIMARY KEY, v bigint NOT NULL, name text, "
                  "tags text[], amount numeric(20,6))",
    "mysql": "CREATE TABLE items (id integer PRIMARY KEY, v bigint NOT NULL, name text, "
             "tags text, amount decimal(20,6)) CHARACTER SET utf8mb4",
}  # fmt: skip
SEED = {
    "postgresql": "INSERT INTO items SELECT i, i, 'row ' || i, ARRAY['x'], i / 3.0 "
                  "FROM generate_series(1, :n) AS i",
    "mysql": "INSERT INTO items SELECT seq, seq, concat('row ', seq), 'x', seq / 3.0 "
             "FROM seq_1_to_{n}",
}  # fmt: skip


def _config(source: str, target: str) -> str:
    return f"""
ledger: sqlite:///ledger.db
sources:
  items:
    kind: sql
    url: '{source}'
    table: items
    key: id
    mode: stream
    page_size: 40
    target: wh.items
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 200, max_wait: 50ms}}
"""


def _rows(url: str, table: str = "items") -> dict[str, tuple[Any, ...]]:
    """Every row as its server prints it (MariaDB's tags as PostgreSQL would, {…})."""
    engine = sa.create_engine(url)
    mysql = engine.dialect.name == "mysql"
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text(f"SELECT {MARIADB_COLUMNS if mysql else COLUMNS} "
                                         f"FROM {table}")).all()  # fmt: skip
    finally:
        engine.dispose()
    return {r[0]: tuple(r) for r in found}


def make_source(url: str, rows: int) -> None:
    """The source table with ``rows`` rows."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(TABLE[engine.dialect.name]))
        conn.execute(sa.text(SEED[engine.dialect.name].format(n=rows)), {"n": rows})
    engine.dispose()


class Writer:
    """The application: inserts, updates of a version that only grows, deletes, re-inserts."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url)
        self.mysql = self.engine.dialect.name == "mysql"
        self.stop = threading.Event()
        self.version = 1000
        self.random = random.Random(7)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.002):  # an application's pace, not a bulk load
            self.once()

    def once(self) -> None:
        pick = self.random.random()
        key = self.random.choice([1, 2, 3]) if pick < 0.3 else self.random.randint(1, 400)
        self.version += 1
        with self.engine.begin() as conn:
            if pick < 0.6:
                conn.execute(sa.text(
                    "INSERT INTO items VALUES (:k, :v, :n, :n, :v / 7.0) ON DUPLICATE KEY UPDATE "
                    "v = VALUES(v), name = VALUES(name)" if self.mysql else
                    "INSERT INTO items VALUES (:k, :v, :n, ARRAY['a', :n], :v / 7.0) "
                    "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, name = EXCLUDED.name"
                ), {"k": key, "v": self.version, "n": f"name {self.version} 'q' \\ ✓"})  # fmt: skip
            elif pick < 0.8:
                conn.execute(sa.text("DELETE FROM items WHERE id = :k"), {"k": key})
            else:
                conn.execute(sa.text("UPDATE items SET v = :v, tags = NULL WHERE id = :k"),
                             {"k": key, "v": self.version})  # fmt: skip


def _watch_versions(target: str, engine_name: str = "postgresql") -> None:
    """A log of every version the target's rows take, to check none goes back; the table in
    the types sluice would create from a source of ``engine_name``."""
    engine = sa.create_engine(target)
    tags, key = ("text[]", "integer") if engine_name == "postgresql" else ("text", "bigint")
    with engine.begin() as conn:
        conn.execute(sa.text(
            f"CREATE TABLE items (id {key} PRIMARY KEY, v bigint NOT NULL, name text, "
            f"tags {tags}, amount numeric(20,6))"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE seen (n bigserial PRIMARY KEY, id integer, v bigint)"))
        conn.execute(sa.text(
            "CREATE FUNCTION log_v() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO seen (id, v) VALUES (NEW.id, NEW.v); RETURN NEW; END $$"
        ))  # fmt: skip
        conn.execute(sa.text("CREATE TRIGGER log_v AFTER INSERT OR UPDATE ON items "
                             "FOR EACH ROW EXECUTE FUNCTION log_v()"))  # fmt: skip
    engine.dispose()


def versions_only_grow(target: str) -> None:
    """Every row's versions, as the target's trigger logged them, only grew."""
    engine = sa.create_engine(target)
    with engine.connect() as conn:
        seen = conn.execute(sa.text("SELECT id, v FROM seen ORDER BY n")).all()
    engine.dispose()
    last: dict[int, int] = {}
    for key, version in seen:
        assert version >= last.get(key, 0), f"row {key} went back from {last[key]} to {version}"
        last[key] = version




@pytest.mark.parametrize("engine_name", ["postgresql", "mysql"])
def test_a_live_table_is_loaded_and_followed_exactly_once_across_restarts(
    tmp_path: Path, engine_name: str, pg_factory: Any, spark: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    servers = request.getfixturevalue("logical_pg" if engine_name == "postgresql"
                                      else "binlog_mariadb")  # fmt: skip
    source, target = servers.create("stream_src"), pg_factory.create("stream_dst")
    make_source(source, 300)
    _watch_versions(target, engine_name)
    path, cfg = write_config(tmp_path, _config(source, target))
    writer = Writer(source)
    writer.thread.start()
    try:
        for _ in range(3):  # each run stops when caught up; the next resumes
            daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
            try:
                assert daemon.run(until_drained=True).exit_code == 0
            finally:
                daemon.close()
    finally:
        writer.stop.set()
        writer.thread.join()
    for _ in range(30):  # and after the writes stop
        writer.once()

    report = run_cutover(spark, cfg, path)
    got, want = _rows(target), _rows(source)
    assert {k: got.get(k) for k in want if got.get(k) != want[k]} == {}
    assert set(got) == set(want)
    assert report.ready, report.problems
    versions_only_grow(target)
    if engine_name == "postgresql":
        assert report.streams == ["items: dropped slot sluice_items and publication sluice_items"]
        assert stream_leftovers(source) == []
    else:  # the load read ranges, with no watermark: nothing kept on the source
        assert report.streams == ["items: no table sluice_watermarks of sluice's to drop"]


def test_a_stream_source_says_what_it_cannot_do(tmp_path: Path) -> None:
    from config.errors import ConfigError
    from config.loader import load_config_text

    text = _config("sqlite:///x.db", "postgresql+psycopg://x@h/db")
    with pytest.raises(ConfigError, match="logical replication or MariaDB's binary log"):
        load_config_text(text, "sluice.yaml")
    text = _config("postgresql+psycopg://x@h/db", "postgresql+psycopg://x@h/db")
    with pytest.raises(ConfigError, match="where: cannot be used"):
        load_config_text(text.replace("page_size: 40", "where: 'id > 1'"), "sluice.yaml")
    with pytest.raises(ConfigError, match="name both publication and slot"):
        load_config_text(text.replace("page_size: 40", "stream: {slot: s}"), "sluice.yaml")
    assert StreamSource.weighs_rows
