"""MySQL's and MariaDB's rows read natively (ConnectorX, inside the load's task).

The native reader must carry every value of every type in the catalogue as
Spark's JDBC reader carries it (the reader it replaces), keep every digit of
a decimal, give the transforms a load's own task applies the values Spark's
would, and raise the server's errors as SQLAlchemy's. A MariaDB →
PostgreSQL run with the defaults must never start Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from config.models import SqlSourceConfig
from spark_jobs.common.jdbc import JdbcEndpoint
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.mysql import ENGINE
from spark_jobs.engines.transforms import for_target
from spark_jobs.read import extract
from spark_jobs.read.read_sql import (
    batch_schema,
    forget_columns,
    jdbc_catalogued_frame,
    native_read,
    table_columns,
)
from tests.type_matrix import MARIADB_TYPES, mariadb_create_source

pytestmark = pytest.mark.mariadb

SLUICE = str(Path(sys.executable).with_name("sluice"))
_TASKS = pa.record_batch([pa.array([0, 1], pa.int64())], names=["id"])


def _native(url: str, table: str, where: list[str], **how: Any) -> pa.Table:
    forget_columns(url, table)
    columns = table_columns(url, table)
    _, queries = native_read(url, f"`{table}`", columns, where, **how)
    tasks = pa.record_batch([pa.array(range(len(where)), pa.int64())], names=["id"])
    return pa.Table.from_batches(list(queries.rows([tasks]))).sort_by("id")


def _values(table: pa.Table) -> dict[str, list[str]]:
    # repr: -0.0 is not 0.0, 1.0 is not 1
    return {name: [repr(v) for v in table.column(name).to_pylist()] for name in table.column_names}


def test_every_type_arrives_as_the_jdbc_reader_carries_it(mariadb_url: str, spark: Any) -> None:
    mariadb_create_source(mariadb_url, "matrix", MARIADB_TYPES)
    where = ["`id` < 40", "`id` >= 40"]  # two queries, as two batches' tasks
    native = _native(mariadb_url, "matrix", where)
    columns = table_columns(mariadb_url, "matrix")
    endpoint = JdbcEndpoint.from_url(mariadb_url)
    jdbc = jdbc_catalogued_frame(
        spark, mariadb_url, "`matrix`", columns, ["id"], where, endpoint.read_url,
        endpoint.connection_properties(fetchsize="1000"),
    ).toArrow().sort_by("id")  # fmt: skip
    assert native.num_rows == jdbc.num_rows > len(MARIADB_TYPES)
    assert native.schema.types == [f.type for f in jdbc.schema]
    assert _values(native) == _values(jdbc)


def test_a_decimal_keeps_every_digit_and_a_wide_integer_its_range(mariadb_url: str) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE d (id int PRIMARY KEY, a decimal(38,20), "
                             "b decimal(12,2), u bigint unsigned, t tinyint)"))  # fmt: skip
        conn.execute(sa.text(
            "INSERT INTO d VALUES (1, 123456789012345678.12345678901234567890, -9999999999.99, "
            "18446744073709551615, -128), (2, -0.00000000000000000001, 0, 0, NULL)"))
    engine.dispose()
    rows = _native(mariadb_url, "d", ["1 = 1"])
    assert rows.column("a").to_pylist() == [Decimal("123456789012345678.12345678901234567890"),
                                            Decimal("-0.00000000000000000001")]  # fmt: skip
    assert rows.column("b").to_pylist() == [Decimal("-9999999999.99"), Decimal("0.00")]
    assert rows.column("u").to_pylist() == [18446744073709551615, 0]
    assert rows.schema.field("u").type == pa.decimal128(20, 0)
    assert rows.column("t").to_pylist() == [-128, None]


def test_a_load_s_own_task_applies_the_transforms_spark_would(
    mariadb_url: str, spark: Any
) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("SET SESSION sql_mode = ''"))
        conn.execute(sa.text("CREATE TABLE z (id int PRIMARY KEY, d date, t datetime(6), "
                             "s set('a','b','c\"\\\\'), n varchar(5))"))  # fmt: skip
        conn.execute(sa.text(
            "INSERT INTO z VALUES (1, '0000-00-00', '2024-00-10 00:00:00', 'a,c\"\\\\', 'x'), "
            "(2, '2024-02-29', '0000-00-00 00:00:00', '', NULL), (3, NULL, NULL, NULL, '')"))
    engine.dispose()
    columns = table_columns(mariadb_url, "z")
    for target, zero_dates in [("postgresql", "null"), ("postgresql", "reject"), ("mysql", "null")]:
        rows = _native(mariadb_url, "z", ["1 = 1"], target=target, zero_dates=zero_dates)
        plain = _native(mariadb_url, "z", ["1 = 1"])
        frame = spark.createDataFrame(plain.to_pylist(), batch_schema(ENGINE, columns))
        in_spark = for_target(frame, target, zero_dates)
        assert _values(rows) == _values(in_spark.toArrow().sort_by("id")), (target, zero_dates)
    rows = _native(mariadb_url, "z", ["1 = 1"], target="postgresql", zero_dates="null")
    assert rows.column("d").to_pylist() == [None, "2024-02-29", None]
    assert rows.column("_sluice_zero__t").to_pylist() == [1, 1, 0]
    assert rows.column("s").to_pylist() == ['{"a","c\\"\\\\"}', "{}", None]


def test_the_servers_errors_come_as_sqlalchemys(mariadb_url: str) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE e (id int PRIMARY KEY)"))
    engine.dispose()
    columns = table_columns(mariadb_url, "e")
    _, queries = native_read(mariadb_url, "`e`", columns, ["`nope` = 1"])
    with pytest.raises(sa.exc.DBAPIError, match="Unknown column 'nope'") as bad:
        list(queries.rows([_TASKS.slice(0, 1)]))
    assert bad.value.orig.args[0] == 1054  # type: ignore[union-attr]
    dead = sa.make_url(mariadb_url).set(port=1)
    _, queries = native_read(dead.render_as_string(hide_password=False), "`e`", columns, ["1=1"])
    with pytest.raises(sa.exc.OperationalError, match="cannot connect"):
        list(queries.rows([_TASKS.slice(0, 1)]))


@pytest.mark.postgres
def test_a_mariadb_copy_with_the_defaults_never_starts_spark(
    mariadb_url: str, pg_target: str, tmp_path: Path
) -> None:
    source = sa.create_engine(mariadb_url)
    with source.begin() as conn:
        conn.execute(sa.text("SET SESSION sql_mode = ''"))
        conn.execute(sa.text("CREATE TABLE items (id bigint PRIMARY KEY, name varchar(40), "
                             "n decimal(30,10), d date, s set('x','y'))"))  # fmt: skip
        conn.execute(sa.text(
            "INSERT INTO items SELECT seq, CONCAT('item\\t', seq), seq / 7, IF(seq % 1000 = 0, "
            "'0000-00-00', '2024-01-01' + INTERVAL seq DAY), IF(seq % 2, 'x,y', '') "
            "FROM seq_1_to_5000"))
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  items: {{kind: sql, url: "{mariadb_url}", table: items, key: id, target: out.items}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained", "-v"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "Spark session starting" not in said
    assert "zero dates" in said and "items.d" in said, said[-3000:]
    with source.connect() as conn:
        expected = [tuple(r) for r in conn.execute(sa.text(
            "SELECT id, name, CAST(n AS CHAR), IF(MONTH(d) = 0 OR DAY(d) = 0, NULL, "
            "CAST(d AS CHAR)), IF(s = '', '{}', '{x,y}') FROM items ORDER BY id"))]
    target = sa.create_engine(pg_target)
    with target.connect() as conn:
        copied = [tuple(r) for r in conn.execute(sa.text(
            "SELECT id, name, n::text, d::text, s::text FROM items ORDER BY id"))]
    assert copied == expected
    source.dispose()
    target.dispose()


def test_a_batch_read_in_pieces_reads_its_range_exactly(
    mariadb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE p (id bigint PRIMARY KEY, v int)"))
        conn.execute(sa.text(  # sparse keys, bunched at the ends
            "INSERT INTO p SELECT IF(seq < 1000, seq, seq * seq), seq FROM seq_1_to_3000"))
    engine.dispose()
    monkeypatch.setattr(extract, "PIECE_ROWS", 300)
    source = SqlSourceConfig(kind="sql", url=mariadb_url, table="p", key="id", target="t.p")
    batches = [Manifest("p-1", "p", "t.p", "range", 1500, lo=None, hi=[1000 * 1000]),
               Manifest("p-2", "p", "t.p", "range", 1500, lo=[1000 * 1000], hi=[3000 * 3000])]
    _, queries = extract.native_ranges(source, batches, "postgresql", "null")
    assert [len(q) for q in queries.queries] == [5, 5]  # type: ignore[union-attr]
    for i, (lo, hi) in enumerate([(0, 1000 * 1000), (1000 * 1000, 3000 * 3000)]):
        tasks = pa.record_batch([pa.array([i], pa.int64())], names=["id"])
        keys = pa.Table.from_batches(list(queries.rows([tasks]))).column("id").to_pylist()
        assert sorted(keys) == [k for k in (j if j < 1000 else j * j for j in range(1, 3001))
                                if lo < k <= hi]  # fmt: skip


def test_without_connectorx_pymysql_reads_the_same_values(
    mariadb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb_create_source(mariadb_url, "matrix", MARIADB_TYPES)
    where = ["`id` < 40", "`id` >= 40"]
    by_connectorx = _native(mariadb_url, "matrix", where)
    monkeypatch.setitem(sys.modules, "connectorx", None)  # an executor without it
    by_pymysql = _native(mariadb_url, "matrix", where)
    assert by_pymysql.schema == by_connectorx.schema
    assert _values(by_pymysql) == _values(by_connectorx)


@pytest.mark.parametrize("reader", ["connectorx", "pymysql"])
def test_a_read_cut_short_by_the_server_raises_its_error(
    mariadb_url: str, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE k (id int PRIMARY KEY, v varchar(10))"))
        conn.execute(sa.text("INSERT INTO k SELECT seq, 'v' FROM seq_1_to_200000"))
    if reader == "pymysql":
        monkeypatch.setitem(sys.modules, "connectorx", None)
    columns = table_columns(mariadb_url, "k")
    # The server pauses a second every 50,000 rows: the query is still running when
    # the first rows have arrived, and is killed then.
    _, queries = native_read(mariadb_url, "`k`", columns, ["`id` % 50000 <> 0 OR SLEEP(1) = 0"])
    rows = queries.rows([_TASKS.slice(0, 1)])
    first = next(rows)
    assert first.num_rows > 0
    with engine.connect() as conn:
        running = conn.execute(sa.text(
            "SELECT id FROM information_schema.processlist WHERE info LIKE '%SLEEP(1)%' "
            "AND info NOT LIKE '%processlist%'")).scalars().all()
        assert running
        for process in running:
            conn.execute(sa.text(f"KILL QUERY {process}"))
    engine.dispose()
    with pytest.raises(sa.exc.OperationalError, match="interrupted"):
        list(rows)
