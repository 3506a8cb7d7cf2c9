"""``sluice verify`` between PostgreSQL tables: proven by the servers' own row sums, no Spark.

Real databases: a table of awkward values (NULL beside empty text, quotes,
commas and parentheses that a record's text must keep apart, arrays, JSON,
NaN and infinities, bytea, a uuid key) is copied as the server prints it into
a target whose columns stand in another order and case, beside a column of
its own, in a database whose own settings print times and floats otherwise.
verify must prove it equal without starting Spark; every single change of a
value, a row too many or too few, must leave it unproven (Spark then names
the keys, as ``tests/test_verify.py`` checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from scheduler.verify_tables import verify_config
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import target_table
from spark_jobs.read.read_sql import table_columns
from spark_jobs.tasks.local_tasks import SessionOnDemand
from spark_jobs.verify import sums as verify_sums
from spark_jobs.verify.read import Scope
from spark_jobs.verify.sums import Proof, proven_equal
from tests.helpers import write_config

COLUMNS = (
    "id uuid PRIMARY KEY, n bigint, note text, tags text[], doc jsonb, "
    "ratio double precision, at timestamptz, amount numeric(12,3), data bytea"
)
TARGET = (
    '"RATIO" double precision, at timestamptz, id uuid PRIMARY KEY, n bigint, '
    "note text, tags text[], doc jsonb, amount numeric(12,3), data bytea, mine int"
)
NAMES = "id, n, note, tags, doc, ratio, at, amount, data"
ROWS = 300


def _execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def _libpq(url: str) -> str:
    from spark_jobs.engines.postgresql.read import conninfo

    return conninfo(url)


def _seed(source: str, target: str) -> None:
    """Awkward rows in the source, copied into the target as the server prints them."""
    _execute(source, f"CREATE TABLE awkward ({COLUMNS})",
             f"""INSERT INTO awkward
                 SELECT md5(i::text)::uuid, i,
                        CASE i % 6 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN 'a,b'
                                   WHEN 3 THEN '"(x)"' WHEN 4 THEN 'NULL' ELSE 'ü ☃ ' || i END,
                        CASE WHEN i % 4 = 0 THEN NULL ELSE ARRAY['x', NULL, 'y,' || i] END,
                        jsonb_build_object('i', i, 'k', ARRAY[i, -i]),
                        CASE i % 5 WHEN 0 THEN 'NaN' WHEN 1 THEN '-Infinity' ELSE i / 7.0 END,
                        timestamptz '2024-05-01 08:30:00.123456+00' + i * interval '61 s',
                        i * 1.125, CASE WHEN i % 3 = 0 THEN NULL ELSE '\\x00ff'::bytea END
                 FROM generate_series(1, {ROWS}) i""")  # fmt: skip
    # The target database prints times, dates and floats otherwise by default.
    target_db = sa.make_url(target).database
    _execute(target, f"CREATE TABLE awkward ({TARGET})",
             f"ALTER DATABASE \"{target_db}\" SET timezone = 'Asia/Tokyo'",
             f"ALTER DATABASE \"{target_db}\" SET datestyle = 'SQL, DMY'",
             f"ALTER DATABASE \"{target_db}\" SET extra_float_digits = -2")  # fmt: skip
    read = f"COPY (SELECT {NAMES} FROM awkward) TO STDOUT"
    write = 'COPY awkward (id, n, note, tags, doc, "RATIO", at, amount, data) FROM STDIN'
    with (
        psycopg.connect(_libpq(source), options="-c timezone=UTC") as src,
        psycopg.connect(_libpq(target), options="-c timezone=UTC") as dst,
        src.cursor().copy(read) as out,
        dst.cursor().copy(write) as into,
    ):
        for chunk in out:
                into.write(chunk)


def _no_spark() -> Any:
    raise AssertionError("verify started Spark for a table the servers proved equal")


@pytest.fixture
def pair(pg_factory: Any, tmp_path: Path) -> tuple[str, str, Any]:
    source, target = pg_factory.create("sums_src"), pg_factory.create("sums_dst")
    _seed(source, target)
    _, cfg = write_config(tmp_path, f"""
sources:
  awk: {{kind: sql, url: '{source}', table: awkward, key: id, target: dst.awkward}}
targets:
  dst: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
    return source, target, cfg


def test_an_equal_table_is_proven_by_the_servers_without_spark(pair: Any) -> None:
    _, _, cfg = pair
    [table] = verify_config(SessionOnDemand.once(_no_spark), cfg).tables
    assert table.equal, table
    assert (table.checked, table.target_rows, table.error) == (ROWS, ROWS, None)


@pytest.mark.parametrize("change, undo", [
    ("UPDATE awkward SET note = '' WHERE note IS NULL AND n = 6",
     "UPDATE awkward SET note = NULL WHERE n = 6"),
    ("UPDATE awkward SET note = 'a\",b' WHERE n = 2",
     "UPDATE awkward SET note = 'a,b' WHERE n = 2"),
    ("UPDATE awkward SET tags = ARRAY['x', 'NULL', 'y,7'] WHERE n = 7",
     "UPDATE awkward SET tags = ARRAY['x', NULL, 'y,7'] WHERE n = 7"),
    ("UPDATE awkward SET \"RATIO\" = 'Infinity' WHERE n = 11",
     "UPDATE awkward SET \"RATIO\" = '-Infinity' WHERE n = 11"),
    ("UPDATE awkward SET at = at + interval '1 microsecond' WHERE n = 12",
     "UPDATE awkward SET at = at - interval '1 microsecond' WHERE n = 12"),
    ("UPDATE awkward SET amount = amount + 0.001 WHERE n = 2",
     "UPDATE awkward SET amount = amount - 0.001 WHERE n = 2"),
    ("UPDATE awkward SET doc = doc || '{\"z\": 1}' WHERE n = 4",
     "UPDATE awkward SET doc = doc - 'z' WHERE n = 4"),
    ("UPDATE awkward SET mine = 1", "UPDATE awkward SET mine = NULL"),  # not compared
    ("DELETE FROM awkward WHERE n = 5", None),
    ("INSERT INTO awkward (id, n) VALUES (gen_random_uuid(), 0)",
     "DELETE FROM awkward WHERE n = 0"),
])  # fmt: skip
def test_any_change_of_a_value_or_a_row_leaves_the_table_unproven(
    pair: Any, change: str, undo: str | None
) -> None:
    source, target, cfg = pair
    table = target_table(cfg, Manifest("verify", "awk", "dst.awkward", "keys", 0))
    source_cfg = cfg.sources["awk"]
    assert proven_equal(source_cfg, table, Scope(), 2) == Proof(ROWS)
    _execute(target, change)
    unchanged = "mine" in change  # a column only the target has is not compared
    assert (proven_equal(source_cfg, table, Scope(), 2) is not None) == unchanged, change
    if undo is None:  # put the deleted row back as the source has it
        _execute(source, "DELETE FROM awkward WHERE n = 5")
    else:
        _execute(target, undo)
    assert proven_equal(source_cfg, table, Scope(), 2) is not None


def test_a_big_tables_key_ranges_cover_keys_past_either_end_and_keep_to_the_scope(
    pg_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = pg_factory.create("sums_rsrc"), pg_factory.create("sums_rdst")
    for url in (source, target):
        _execute(url, "CREATE TABLE t (id bigint PRIMARY KEY, v text)",
                 "INSERT INTO t SELECT i, 'v' || i FROM generate_series(100, 1099) i",
                 "ANALYZE t")  # fmt: skip
    monkeypatch.setattr(verify_sums, "SPLIT_ROWS", 500)
    _, cfg = write_config(tmp_path, f"""
sources:
  s: {{kind: sql, url: '{source}', table: t, key: id, target: dst.t}}
targets:
  dst: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
    table = target_table(cfg, Manifest("verify", "s", "dst.t", "keys", 0))
    s = cfg.sources["s"]
    assert len(verify_sums._ranges(s, table_columns(source, "t"), table, Scope(), 4)) == 4
    assert proven_equal(s, table, Scope(), 4) == Proof(1000)
    for extra in (5, 5000):  # below the first key and past the last: still in a range
        _execute(target, f"INSERT INTO t VALUES ({extra}, 'x')")
        assert proven_equal(s, table, Scope(), 4) is None, extra
        _execute(target, f"DELETE FROM t WHERE id = {extra}")
    # Done up to key 600: the source's later rows and, while a range is open, the target's
    # are out of scope; once every range is done the target's later rows count.
    _execute(source, "DELETE FROM t WHERE id > 900")
    _execute(target, "UPDATE t SET v = 'changed' WHERE id > 900")
    assert proven_equal(s, table, Scope(upto=[600]), 4) == Proof(501)
    assert proven_equal(s, table, Scope(upto=[600], target_open=True), 4) is None
    assert proven_equal(s, table, Scope(nothing=True), 4) == Proof(0)
