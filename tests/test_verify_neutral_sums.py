"""``sluice verify`` between MariaDB and PostgreSQL: proven by the servers' own sums of each
row's neutral text (:mod:`spark_jobs.engines.neutral_sql`), without Spark.

A MariaDB table of every kind whose neutral form both servers print in SQL
(awkward values: NULL beside empty text, zero dates, fractions with trailing
zeros, unsigned extremes, bytes with NUL, text with quotes, tabs and emoji,
bit strings, a uuid) is migrated into PostgreSQL by a daemon. verify must find
it equal without starting Spark, as the type matrix finds it in Spark
(``tests/test_type_matrix.py`` compares the neutral texts column by column);
every single change of a value or a row must leave it unproven; a table
with a column only Spark compares (a float) is compared in Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.commands.cutover import needs_spark_to_verify
from scheduler.verify_tables import verify_config
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import target_table
from spark_jobs.read.read_sql import table_columns
from spark_jobs.tasks.local_tasks import SessionOnDemand
from spark_jobs.verify import sums as verify_sums
from spark_jobs.verify.read import Scope
from spark_jobs.verify.sums import Proof, proven_equal
from tests.helpers import drain, run_sql, write_config
from tests.neutral_texts import differing

pytestmark = [pytest.mark.spark, pytest.mark.mariadb, pytest.mark.postgres]

COLUMNS = (
    "id bigint unsigned PRIMARY KEY, flag tinyint(1), one bit(1), bits bit(5), n int, "
    "big bigint unsigned, amount decimal(14,2), wide decimal(40,12), yr year, "
    "note varchar(40), body text, code char(4), state enum('new','paid'), data varbinary(8), "
    "born date, seen datetime(6), whole datetime, at timestamp(6) NULL, uid uuid"
)
ROWS = 120


def _seed(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("SET time_zone = '+00:00', sql_mode = ''")
        conn.exec_driver_sql(f"CREATE TABLE awkward ({COLUMNS}) CHARACTER SET utf8mb4")
        conn.exec_driver_sql(f"""
            INSERT INTO awkward SELECT seq, seq % 2, seq % 2, seq % 32,
                   IF(seq % 7 = 0, NULL, CAST(seq AS SIGNED) - 60),
                   IF(seq = 1, 18446744073709551615, seq * 1000),
                   IF(seq % 5 = 0, -0.00, seq / 4), IF(seq % 3 = 0, NULL, seq / 8),
                   IF(seq % 9 = 0, 0, 1900 + seq),
                   ELT(seq % 6 + 1, NULL, '', 'a,b', '"q" \\'s\\' \\\\N', 'tab\\there\\nnl',
                       CONCAT('ünï 😀 ', seq)),
                   REPEAT('x', seq), IF(seq % 4 = 0, 'ab', 'abcd'),
                   IF(seq % 3 = 0, 'paid', 'new'),
                   IF(seq % 4 = 0, x'00ff5c0a', IF(seq % 4 = 1, '', NULL)),
                   IF(seq % 10 = 0, '0000-00-00', '2024-02-29' + INTERVAL seq DAY),
                   IF(seq % 11 = 0, '0000-00-00 00:00:00',
                      TIMESTAMP'2024-01-01 10:00:00.500000' + INTERVAL seq * 1001 MICROSECOND),
                   '2024-01-01 10:00:00' + INTERVAL seq MINUTE,
                   IF(seq % 8 = 0, NULL,
                      TIMESTAMP'2001-05-01 08:30:00' + INTERVAL seq * 100000 MICROSECOND),
                   IF(seq % 2 = 0, NULL, CONCAT('a0eebc99-9c0b-4ef8-bb6d-6bb9bd38',
                                                LPAD(HEX(seq), 4, '0')))
            FROM seq_1_to_{ROWS}""".replace("%", "%%"))  # fmt: skip
    engine.dispose()


def _no_spark() -> Any:
    raise AssertionError("verify started Spark for a table the servers proved equal")


@pytest.fixture(scope="module")
def migrated(mariadb_factory: Any, pg_factory: Any, spark: Any,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Any]:  # fmt: skip
    source, target = mariadb_factory.create("nsum_src"), pg_factory.create("nsum_dst")
    _seed(source)
    path, cfg = write_config(tmp_path_factory.mktemp("nsum"), f"""
sources:
  awk: {{kind: sql, url: '{source}', table: awkward, key: id, target: dst.awkward}}
targets:
  dst: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 1000, max_wait: 200ms}}
spark: {{master: "local[2]", max_concurrent_imports: 1}}
""")  # fmt: skip
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0, summary
    return source, target, cfg


def test_a_mariadb_table_in_postgresql_is_proven_by_the_servers_without_spark(
    migrated: Any,
) -> None:
    source, target, cfg = migrated
    assert not needs_spark_to_verify(cfg)
    assert differing(source, target, "awkward") == {}
    [table] = verify_config(SessionOnDemand.once(_no_spark), cfg).tables
    assert table.equal, table
    assert (table.checked, table.target_rows, table.error) == (ROWS, ROWS, None)


CHANGES = [  # (SET …, the SET that undoes it, the row's key)
    ("flag = NOT flag", "flag = NOT flag", 3),
    ("bits = B'00000'", "bits = B'00101'", 5),
    ("n = NULL", "n = -52", 8),
    ("big = big - 1", "big = big + 1", 1),
    ("amount = amount + 0.01", "amount = amount - 0.01", 10),
    ("note = ''", "note = NULL", 6),
    ("note = 'a, b'", "note = 'a,b'", 8),
    ("code = 'abc'", "code = 'abcd'", 1),
    ("data = '\\x00ff5c0b'", "data = '\\x00ff5c0a'", 4),
    ("born = NULL", "born = '2024-03-11'", 11),
    ("seen = seen + interval '1 microsecond'", "seen = seen - interval '1 microsecond'", 12),
    ("at = at + interval '1 hour'", "at = at - interval '1 hour'", 13),
    ("uid = NULL", "uid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd38000f'", 15),
]


@pytest.mark.parametrize("change, undo", [
    *[(f"UPDATE awkward SET {s} WHERE id = {k}", f"UPDATE awkward SET {u} WHERE id = {k}")
      for s, u, k in CHANGES],
    ("DELETE FROM awkward WHERE id = 20", None),
    ("INSERT INTO awkward (id, flag, one, bits, big, body, code, state, whole) "
     "VALUES (1000, true, true, B'00001', 1, 'x', 'abcd', 'new', now())",
     "DELETE FROM awkward WHERE id = 1000"),
])  # fmt: skip
def test_any_change_of_a_value_or_a_row_leaves_the_table_unproven(
    migrated: Any, change: str, undo: str | None
) -> None:
    source, target, cfg = migrated
    table = target_table(cfg, Manifest("verify", "awk", "dst.awkward", "keys", 0))
    awk = cfg.sources["awk"]
    assert proven_equal(awk, table, Scope(), 2) is not None
    run_sql(target, change)
    assert proven_equal(awk, table, Scope(), 2) is None, change
    # The deleted row goes from the source too: the two sides are equal again.
    run_sql(*((source, "DELETE FROM awkward WHERE id = 20") if undo is None else (target, undo)))
    assert proven_equal(awk, table, Scope(), 2) is not None


def test_a_column_only_spark_compares_sends_the_table_to_spark(
    mariadb_factory: Any, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = mariadb_factory.create("nsum_fsrc"), pg_factory.create("nsum_fdst")
    run_sql(source, "CREATE TABLE f (id int PRIMARY KEY, x double)",
             "INSERT INTO f VALUES (1, 0.1)")  # fmt: skip
    run_sql(target, "CREATE TABLE f (id int PRIMARY KEY, x double precision)",
             "INSERT INTO f VALUES (1, 0.1)")  # fmt: skip
    _, cfg = write_config(tmp_path, f"""
sources:
  f: {{kind: sql, url: '{source}', table: f, key: id, target: dst.f}}
targets:
  dst: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
    assert needs_spark_to_verify(cfg)
    table = target_table(cfg, Manifest("verify", "f", "dst.f", "keys", 0))
    assert proven_equal(cfg.sources["f"], table, Scope(), 2) is None


def test_a_big_mariadb_table_is_summed_in_key_ranges_that_cover_both_sides(
    mariadb_factory: Any, pg_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = mariadb_factory.create("nsum_rsrc"), pg_factory.create("nsum_rdst")
    run_sql(source, "CREATE TABLE t (id bigint PRIMARY KEY, v text)",
             "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_100_to_1099",
             "ANALYZE TABLE t")  # fmt: skip
    run_sql(target, "CREATE TABLE t (id bigint PRIMARY KEY, v text)",
             "INSERT INTO t SELECT i, 'v' || i FROM generate_series(100, 1099) i")  # fmt: skip
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
        run_sql(target, f"INSERT INTO t VALUES ({extra}, 'x')")
        assert proven_equal(s, table, Scope(), 4) is None, extra
        run_sql(target, f"DELETE FROM t WHERE id = {extra}")
    assert proven_equal(s, table, Scope(upto=[600]), 4) == Proof(501)


def test_a_value_too_long_for_the_server_to_print_whole_sends_the_table_to_spark(
    mariadb_factory: Any, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = mariadb_factory.create("nsum_lsrc"), pg_factory.create("nsum_ldst")
    engine = sa.create_engine(source)
    with engine.connect() as conn:
        packet = int(conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
    engine.dispose()
    # Its hex is past max_allowed_packet: MariaDB prints it as NULL, as a NULL would print.
    run_sql(source, "CREATE TABLE b (id int PRIMARY KEY, data longblob)",
             f"INSERT INTO b VALUES (1, REPEAT(x'ab', {packet // 2 + 16}))")  # fmt: skip
    run_sql(target, "CREATE TABLE b (id int PRIMARY KEY, data bytea)",
             "INSERT INTO b VALUES (1, NULL)")  # fmt: skip
    _, cfg = write_config(tmp_path, f"""
sources:
  b: {{kind: sql, url: '{source}', table: b, key: id, target: dst.b}}
targets:
  dst: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
    table = target_table(cfg, Manifest("verify", "b", "dst.b", "keys", 0))
    assert proven_equal(cfg.sources["b"], table, Scope(), 2) is None


def test_the_servers_neutral_texts_do_not_depend_on_how_the_session_reads_backslashes(
    mariadb_factory: Any,
) -> None:
    from spark_jobs.engines import engine_of
    from spark_jobs.engines.neutral_sql import MYSQL, neutral_sql
    from spark_jobs.read.read_sql import table_columns

    url = mariadb_factory.create("nsum_modes")
    run_sql(url, "CREATE TABLE t (id int PRIMARY KEY, at datetime(6), yr year, n int zerofill)",
             "INSERT INTO t VALUES (1, '2024-01-01 10:00:00.500000', 2024, 7), "
             "(2, '2024-01-01 10:00:00', 0, 0)")  # fmt: skip
    columns = table_columns(url, "t")
    exprs = [neutral_sql(MYSQL, c, engine_of(url).text_sql(c, f"`{c.name}`"), "postgresql")
             for c in columns]  # fmt: skip
    query = f"SELECT {', '.join(e for e in exprs if e)} FROM t ORDER BY id"
    found = []
    for mode in ("", "NO_BACKSLASH_ESCAPES"):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SET sql_mode = '{mode}'")
            found.append([tuple(r) for r in conn.exec_driver_sql(query.replace("%", "%%"))])
        engine.dispose()
    assert found[0] == found[1] == [("1", "2024-01-01 10:00:00.5", "2024", "7"),
                                    ("2", "2024-01-01 10:00:00", "0", "0")]  # fmt: skip
