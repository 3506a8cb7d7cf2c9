"""``tables:`` with ``mode: stream``: each table of the group is a stream source of its own
(its own slot and publication on PostgreSQL; one watermark table per MariaDB database), and
all of them load, follow and cut over together.

Own servers with logical decoding / a row binary log; the targets in the machine's
PostgreSQL. Rows change between two daemon runs and after the last; at the end every
target table equals its source row by row and ``sluice cutover`` leaves nothing of
sluice's on the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.loader import load_config
from config.models import SqlSourceConfig
from scheduler.commands.cutover import run_cutover
from scheduler.daemon import Daemon
from sinks.spark import SparkSink
from tests.helpers import drain, run_sql, scalar, write_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

TABLES = ("orders", "customers")


def _rows(url: str, table: str) -> dict[str, tuple[Any, ...]]:
    engine = sa.create_engine(url)
    mysql = engine.dialect.name == "mysql"
    text = "CAST({} AS CHAR)" if mysql else "{}::text"
    with engine.connect() as conn:
        found = conn.execute(
            sa.text(f"SELECT {text.format('id')}, {text.format('v')}, note FROM {table}")
        ).all()
    engine.dispose()
    return {r[0]: tuple(r) for r in found}


def _change(url: str, round_: int) -> None:
    """Inserts, updates and a delete in every table."""
    statements = []
    for table in TABLES:
        statements += [
            f"INSERT INTO {table} VALUES ({100 + round_}, {round_}, 'new {round_}')",
            f"UPDATE {table} SET v = v + 10, note = 'changed {round_}' WHERE id <= 5",
            f"DELETE FROM {table} WHERE id = {20 + round_}",
        ]
    run_sql(url, *statements)


@pytest.mark.parametrize("engine_name", ["postgresql", "mysql"])
def test_a_group_of_tables_streams_each_and_cuts_over_together(
    tmp_path: Path, engine_name: str, pg_factory: Any, spark: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    servers = request.getfixturevalue("logical_pg" if engine_name == "postgresql"
                                      else "binlog_mariadb")  # fmt: skip
    source, target = servers.create("group_src"), pg_factory.create("group_dst")
    seed = ("INSERT INTO {t} SELECT i, i, concat('row ', i) FROM generate_series(1, 60) i"
            if engine_name == "postgresql" else
            "INSERT INTO {t} SELECT seq, seq, concat('row ', seq) FROM seq_1_to_60")  # fmt: skip
    for table in TABLES:
        run_sql(source, f"CREATE TABLE {table} (id integer PRIMARY KEY, v bigint, note text)",
             seed.format(t=table))  # fmt: skip
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  shop:
    kind: sql
    url: '{source}'
    tables: ["*"]
    mode: stream
    page_size: 25
    target: wh
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100, max_wait: 50ms}}
""")  # fmt: skip
    assert sorted(cfg.sources) == ["shop.customers", "shop.orders"]
    for round_ in range(2):
        _change(source, round_)
        daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
        try:
            assert daemon.run(until_drained=True).exit_code == 0
        finally:
            daemon.close()
    # Loaded again (a restart), the group is the same tables: not sluice's watermark table.
    assert sorted(load_config(path).sources) == sorted(cfg.sources)
    _change(source, 2)
    report = run_cutover(spark, cfg, path)
    assert report.ready, report.problems
    for table in TABLES:
        assert _rows(target, table) == _rows(source, table), table
    if engine_name == "postgresql":  # one slot and one publication for the group
        assert report.streams == ["shop: dropped slot sluice_shop and publication sluice_shop "
                                  "(tables customers, orders)"]  # fmt: skip
    else:  # the load read ranges, with no watermark: nothing kept on the source
        assert report.streams == ["shop: no table sluice_watermarks of sluice's to drop "
                                  "(tables customers, orders)"]  # fmt: skip


def test_two_streams_that_would_share_a_slot_or_a_publication_are_refused_by_name() -> None:
    from config.errors import ConfigError
    from config.loader import load_config_text
    from sources.stream_backends import check_distinct

    def sources(first: str, second: str, url2: str = "db") -> dict[str, Any]:
        text = f"""
sources:
  {first}: {{kind: sql, url: 'postgresql+psycopg://u@h/db', table: a, key: id,
           mode: stream, target: wh.a}}
  {second}: {{kind: sql, url: 'postgresql+psycopg://u@h/{url2}', table: b, key: id,
            mode: stream, target: wh.b}}
targets:
  wh: {{kind: jdbc, url: 'postgresql+psycopg://u@h/wh'}}
"""
        return dict(load_config_text(text, "sluice.yaml").sources)

    with pytest.raises(ConfigError, match=r"sources Items and items would share the slot "
                                          r"'sluice_items' on h"):  # fmt: skip
        check_distinct(sources("Items", "items"))
    named = "{kind: sql, url: 'postgresql+psycopg://u@h/other', table: c, key: id, mode: stream, "
    found = sources("a", "b", url2="other")
    check_distinct(found)  # their own names: distinct
    again = load_config_text(f"""
sources:
  a: {named}target: wh.c, stream: {{publication: p1, slot: s}}}}
  b: {named}target: wh.d, stream: {{publication: p2, slot: s}}}}
targets:
  wh: {{kind: jdbc, url: 'postgresql+psycopg://u@h/wh'}}
""", "sluice.yaml")  # fmt: skip
    with pytest.raises(ConfigError, match="sources a and b would share the slot 's'"):
        check_distinct(dict(again.sources))


MANY = 50


def test_fifty_tables_stream_through_one_slot_and_one_publication(
    tmp_path: Path, logical_pg: Any, pg_factory: Any, spark: Any
) -> None:
    """More tables than the server has replication slots, streamed under a writer: one slot
    and one publication the whole time; after cutover every table equals its source and
    nothing of sluice's is left on the server."""
    import random
    import threading

    source, target = logical_pg.create("many_src"), pg_factory.create("many_dst")
    names = [f"t{n:02d}" for n in range(MANY)]
    run_sql(source, *[statement for t in names for statement in (
        f"CREATE TABLE {t} (id integer PRIMARY KEY, v bigint, note text)",
        f"INSERT INTO {t} SELECT i, i, concat('row ', i) FROM generate_series(1, 20) i",
    )])  # fmt: skip
    assert int(scalar(source, "SHOW max_replication_slots")) < MANY
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  shop: {{kind: sql, url: '{source}', tables: ["t*"], mode: stream, page_size: 25, target: wh}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100, max_wait: 50ms}}
""")  # fmt: skip
    assert len(cfg.sources) == MANY

    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    rng = random.Random(11)

    def write() -> None:
        engine = sa.create_engine(source)
        n = 100
        while not stop.wait(0.005):
            t, n = rng.choice(names), n + 1
            with engine.begin() as conn:
                conn.execute(sa.text(f"INSERT INTO {t} VALUES ({n}, {n}, 'new')"))
                conn.execute(sa.text(f"UPDATE {t} SET v = v + 1 WHERE id = {rng.randint(1, 20)}"))
                conn.execute(sa.text(f"DELETE FROM {t} WHERE id = {rng.randint(1, 20)}"))
        engine.dispose()

    def watch() -> None:
        while not stop.wait(0.2):
            seen.append((int(scalar(source, "SELECT count(*) FROM pg_replication_slots "
                                          "WHERE database = current_database()")),
                         int(scalar(source, "SELECT count(*) FROM pg_publication"))))  # fmt: skip

    threads = [threading.Thread(target=write), threading.Thread(target=watch)]
    for thread in threads:
        thread.start()
    try:
        # The writer goes on for the first seconds of the run; then the run drains.
        stopper = threading.Timer(8.0, stop.set)
        stopper.start()
        summary = drain(cfg, path, spark)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert summary.exit_code == 0
    # Before the start made them, none (the watcher may look first); never more than one.
    assert seen and seen[-1] == (1, 1) and all(s <= 1 and p <= 1 for s, p in seen), seen
    assert int(scalar(source, "SELECT count(*) FROM pg_publication_tables")) == MANY

    run_sql(source, *[f"UPDATE {t} SET note = 'last' WHERE id = 3" for t in names[::7]])
    report = run_cutover(spark, cfg, path)
    assert report.ready, report.problems
    for table in names:
        assert _rows(target, table) == _rows(source, table), table
    assert scalar(source, "SELECT count(*) FROM pg_replication_slots "
                        "WHERE database = current_database()") == 0
    assert report.streams == [f"shop: dropped slot sluice_shop and publication sluice_shop "
                              f"(tables {', '.join(names)})"]  # fmt: skip




def test_the_tables_of_a_mariadb_group_read_the_binary_log_once_for_all(
    tmp_path: Path, binlog_mariadb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tables of one group: one read of the log brings the changes of both, each table
    gets its own, and the second asks the server nothing while that read is fresh."""
    from sources.binlog_changes import BinlogChangeStream
    from sources.sqldb import SourceDatabase
    from sources.stream import backend_of

    source = binlog_mariadb.create("share_src")
    run_sql(source, "CREATE TABLE a (id integer PRIMARY KEY, v integer)",
            "CREATE TABLE b (id integer PRIMARY KEY, v integer)")  # fmt: skip
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  grp: {{kind: sql, url: '{source}', tables: ["a", "b"], mode: stream, target: wh}}
targets:
  wh: {{kind: jdbc, url: 'postgresql+psycopg://u@127.0.0.1:1/db'}}
""")  # fmt: skip
    reads: list[str] = []
    changes = BinlogChangeStream.changes

    def counted(self: BinlogChangeStream, after: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(after)
        return changes(self, after, *args, **kwargs)

    monkeypatch.setattr(BinlogChangeStream, "changes", counted)
    monkeypatch.setattr("sources.binlog_hub.REFRESH", 30.0)  # fresh however slow the machine
    backends = []
    for name in ("grp.a", "grp.b"):
        src = cfg.sources[name]
        assert isinstance(src, SqlSourceConfig)
        backends.append(backend_of(name, src, SourceDatabase(name, src, None)))
    try:
        for backend in backends:
            backend.open()
        run_sql(source, "INSERT INTO a VALUES (1, 1)", "INSERT INTO b VALUES (2, 2)",
                "INSERT INTO a VALUES (3, 3)")  # fmt: skip
        got = [[c.new for t in backend.read(0, 100) for c in t.changes] for backend in backends]
        assert got == [[{"id": "1", "v": "1"}, {"id": "3", "v": "3"}], [{"id": "2", "v": "2"}]]
        assert len(reads) == 1
    finally:
        for backend in backends:
            backend.close()
