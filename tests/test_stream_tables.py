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
from scheduler.commands.cutover import run_cutover
from scheduler.daemon import Daemon
from sinks.spark import SparkSink
from tests.helpers import run_sql, write_config

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
    if engine_name == "postgresql":
        assert report.streams == [f"shop.{t}: dropped slot sluice_shop_{t} and publication "
                                  f"sluice_shop_{t}" for t in sorted(TABLES)]  # fmt: skip
    else:  # one watermark table for the database's streams
        assert report.streams[0] == "shop.customers: dropped table sluice_watermarks"


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
