"""Batches written into MariaDB by ``LOAD DATA LOCAL INFILE``, streamed from memory; exactly once.

The encoder's text must read back as the values sent (NULLs, empty strings,
escapes, unicode, numbers, times, bytes); the server's habit of skipping a
duplicate key or cutting a value with only a warning must never pass for a
load; and a server asking for any file but sluice's own stream gets nothing.
Through Spark, the same shapes as PostgreSQL's COPY: a range straight in with
its commit record, a re-run staged and unchanged, refused rows set aside.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from spark_jobs.common.jdbc import sql_engine
from spark_jobs.common.manifest import Manifest
from spark_jobs.engines.mysql.load_data import LoadRefusedRows, encode, load_data, quoted
from spark_jobs.engines.postgresql.binarycopy import CannotEncode
from spark_jobs.jobs.import_job import target_table
from spark_jobs.load.write import write_batch
from tests.test_copy_write import orders_config, write_one
from tests.test_import_job import (
    ORDERS_DDL,
    ORDERS_INSERT,
    execute,
    make_config,
    order_rows,
    rng,
    scalar,
)

pytestmark = pytest.mark.mariadb

TRICKY = ["", "N", "\\N", "tab\there", "new\nline", "cr\rlf\r\n", "nul\0byte", "back\\slash\\",
          "l'été \"100%\" ✓ 🚀", None]  # fmt: skip
VALUES_DDL = (
    "CREATE TABLE v (id BIGINT PRIMARY KEY, s TEXT, b LONGBLOB, d DECIMAL(30,10), f DOUBLE, "
    "ok BOOLEAN, day DATE, at DATETIME(6), n INT) CHARACTER SET utf8mb4"
)


def _values() -> pa.Table:
    n = len(TRICKY)
    at = dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.UTC)
    decimals = [Decimal("1E-10"), Decimal("-12345678901234567890.0123456789"), Decimal(0)]
    return pa.table(
        {
            "id": pa.array([2**62 + i for i in range(n)], pa.int64()),
            "s": pa.array(TRICKY, pa.string()),
            "b": pa.array(
                [None if t is None else t.encode() + bytes([0, 9, 10, 92, 255]) for t in TRICKY],
                pa.binary(),
            ),  # fmt: skip
            "d": pa.array(
                [decimals[i % 3] if i % 4 else None for i in range(n)], pa.decimal128(30, 10)
            ),  # fmt: skip
            "f": pa.array([0.1, 1e300, -2.5e-300, None, 3.0] * (n // 5), pa.float64()),
            "ok": pa.array([True, False, None, True, False] * (n // 5), pa.bool_()),
            "day": pa.array(
                [
                    dt.date(1, 1, 1),
                    dt.date(9999, 12, 31),
                    None,
                    dt.date(2024, 2, 29),
                    dt.date(1970, 1, 1),
                ]
                * (n // 5),
                pa.date32(),
            ),  # fmt: skip
            "at": pa.array(
                [at, at - dt.timedelta(days=20000), None, at, at] * (n // 5),
                pa.timestamp("us", tz="UTC"),
            ),  # fmt: skip
            "n": pa.nulls(n, pa.null()),
        }
    )


def _load(url: str, table: pa.Table, into: str = "v") -> int:
    engine = sql_engine(url)
    with engine.begin() as conn:
        cursor = conn.connection.cursor()
        batches = table.to_batches(max_chunksize=3)
        return load_data(cursor, quoted(into), table.column_names, batches)


def test_every_value_reads_back_as_sent(mariadb_url: str) -> None:
    execute(mariadb_url, VALUES_DDL)
    table = _values()

    assert _load(mariadb_url, table) == len(TRICKY)

    engine = sa.create_engine(mariadb_url)
    with engine.connect() as conn:
        got = [tuple(r) for r in conn.execute(sa.text("SELECT * FROM v ORDER BY id"))]
    engine.dispose()
    sent = [
        (r["id"], r["s"], r["b"], r["d"], r["f"], None if r["ok"] is None else int(r["ok"]),
         r["day"], None if r["at"] is None else r["at"].replace(tzinfo=None), None)
        for r in table.to_pylist()
    ]  # fmt: skip
    assert got == sent


def test_decimals_go_in_plain_digits_and_separators_survive_no_backslash_escapes(
    mariadb_url: str,
) -> None:
    execute(mariadb_url, "CREATE TABLE t (id INT PRIMARY KEY, d DECIMAL(20,10), s VARCHAR(30))")
    tiny = [Decimal("1E-7"), Decimal(0).scaleb(-8), Decimal("-0.0000000123"), None]
    table = pa.table({"id": [1, 2, 3, 4], "d": pa.array(tiny, pa.decimal128(20, 10)),
                      "s": pa.array(tiny, pa.decimal128(20, 10))})  # fmt: skip
    engine = sql_engine(mariadb_url)
    mode = "SET SESSION sql_mode = {}(@@sql_mode, ',NO_BACKSLASH_ESCAPES'{})"
    with engine.begin() as conn:
        conn.exec_driver_sql(mode.format("CONCAT", ""))
        load_data(conn.connection.cursor(), quoted("t"), ["id", "d", "s"], table.to_batches())
        conn.exec_driver_sql(mode.format("REPLACE", ", ''"))  # the pooled connection's own
    got = scalar(mariadb_url, "SELECT group_concat(concat_ws('|', d, s) ORDER BY id) FROM t")
    assert got == ("0.0000001000|0.0000001000,0.0000000000|0.0000000000,"
                   "-0.0000000123|-0.0000000123,")  # fmt: skip


def test_a_duplicate_key_or_a_cut_value_is_refused_not_skipped(mariadb_url: str) -> None:
    execute(mariadb_url, "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(3))")
    execute(mariadb_url, "INSERT INTO t VALUES (2, 'old')")

    duplicate = pa.table({"id": [1, 2, 3], "s": ["a", "new", "c"]})
    with pytest.raises(LoadRefusedRows, match="1 of 3 rows skipped"):
        _load(mariadb_url, duplicate, "t")
    too_long = pa.table({"id": [4, 5], "s": ["abc", "abcd"]})
    with pytest.raises(LoadRefusedRows, match="1 warnings"):
        _load(mariadb_url, too_long, "t")

    # Each load's transaction was rolled back whole.
    assert scalar(mariadb_url, "SELECT group_concat(id, s) FROM t") == "2old"


def test_a_server_asking_for_a_local_file_gets_nothing(mariadb_url: str, tmp_path: Any) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("1\tsecret\n")
    execute(mariadb_url, "CREATE TABLE t (id INT PRIMARY KEY, s TEXT)")
    engine = sql_engine(mariadb_url)  # its connections have local_infile on
    refused = pytest.raises(sa.exc.OperationalError, match="only from its own streams")
    with refused, engine.begin() as conn:
        conn.exec_driver_sql(f"LOAD DATA LOCAL INFILE '{secret}' INTO TABLE t")
    assert scalar(mariadb_url, "SELECT count(*) FROM t") == 0


@pytest.mark.spark
def test_a_server_without_local_infile_gets_spark_jdbc_writes(
    spark: Any, mariadb_url: str, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from spark_jobs.common import jdbc
    from spark_jobs.load import bulk_paths

    # Connections without the capability: the server answers as one with
    # local_infile off does (4166 here, 1148 or 3948 on MySQL).
    monkeypatch.setattr(jdbc, "_connect_args", lambda url: {})
    monkeypatch.setattr(bulk_paths, "unavailable", set())
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": mariadb_url},
    )
    for n in (1, 2):
        frame = spark.createDataFrame([(n, f"v{n}")], "id bigint, s string")
        manifest = Manifest(f"u-{n}", "src", "wh.orders", "payloads", 1, payloads=["{}"])
        target = target_table(cfg, manifest)
        assert write_batch(spark, frame, target, manifest).method == "staged jdbc"
    assert scalar(mariadb_url, "SELECT group_concat(s ORDER BY id) FROM orders") == "v1,v2"
    warned = [r.getMessage() for r in caplog.records if "JDBC writer from now on" in r.message]
    assert len(warned) == 1 and "refuses LOAD DATA LOCAL" in warned[0]


def test_a_column_without_a_text_form_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(CannotEncode, match="column 'tags'"):
        encode(pa.table({"id": [1], "tags": pa.array([[1, 2]], pa.list_(pa.int64()))}))
    # NaN goes as text: MySQL refuses it (a rejected row, the column named), a single
    # precision value as its exact double, which MySQL rounds back to the same float.
    assert bytes(encode(pa.table({"f": pa.array([0.1, float("nan")], pa.float32())}))) == (
        b"0.10000000149011612\nnan\n")


# ------------------------------------------------------------------ through Spark


def _rows(url: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, customer, amount, created, paid, ratio, note FROM orders ORDER BY id"
        )).all()  # fmt: skip
    engine.dispose()
    return [(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows]


@pytest.mark.spark
@pytest.mark.postgres
def test_a_range_is_loaded_straight_in_and_a_rerun_leaves_the_table_unchanged(
    spark: Any, pg_url: str, mariadb_url: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(300))
    cfg = orders_config(pg_url, mariadb_url)
    first = rng("m-1", None, [200], items=200)

    written = write_one(spark, cfg, first)
    assert (written.rows, written.rejected, written.method) == (200, 0, "load data")
    assert _rows(mariadb_url) == _rows(pg_url)[:200]
    assert scalar(mariadb_url, "SELECT `rows` FROM _sluice_commits WHERE batch_id = 'm-1'") == 200

    again = write_one(spark, cfg, dataclasses.replace(first, token=2))
    assert (again.rows, again.method) == (200, "staged load data")
    assert scalar(mariadb_url, "SELECT token FROM _sluice_commits WHERE batch_id = 'm-1'") == 2
    assert _rows(mariadb_url) == _rows(pg_url)[:200]

    # A key of the next range already there (another writer): the direct
    # load is refused, rolled back, and the batch staged and upserted.
    execute(mariadb_url, "INSERT INTO orders (id, customer) VALUES (250, 'elsewhere')")
    rest = write_one(spark, cfg, rng("m-2", [200], [300], items=100))
    assert (rest.rows, rest.method) == (100, "staged load data")
    assert _rows(mariadb_url) == _rows(pg_url)
    assert scalar(mariadb_url, "SELECT count(*) FROM information_schema.tables "
                               "WHERE table_schema = DATABASE() "
                               "AND table_name LIKE '\\_sluice\\_stage%'") == 0  # fmt: skip


@pytest.mark.spark
@pytest.mark.postgres
def test_rows_the_table_refuses_in_a_load_are_set_aside_and_the_rest_commits(
    spark: Any, pg_url: str, mariadb_url: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(120))
    execute(mariadb_url, ORDERS_DDL.replace("note text", "note varchar(12)")
            .replace("double precision", "double"))  # fmt: skip
    cfg = orders_config(pg_url, mariadb_url)
    long_notes = scalar(pg_url, "SELECT count(*) FROM orders WHERE length(note) > 12")
    assert 0 < long_notes < 120

    written = write_one(spark, cfg, rng("r-1", None, [120], items=120))
    assert written.method == "staged load data"
    assert (written.rows, written.rejected) == (120 - long_notes, long_notes)
    assert scalar(mariadb_url, "SELECT count(*) FROM orders") == 120 - long_notes
    assert scalar(mariadb_url, "SELECT count(*) FROM orders WHERE length(note) > 12") == 0
    assert scalar(mariadb_url, "SELECT count(*) FROM _sluice_rejects WHERE batch_id = 'r-1'") == (
        long_notes
    )
