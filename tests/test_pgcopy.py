"""The binary COPY encoder against PostgreSQL itself.

Each value is written twice into tables of the same columns: once by the
encoder (binary COPY), once by psycopg's own INSERT. PostgreSQL then renders
both tables as text, and they must be equal row for row: NULLs, empty
strings, unicode, signs, scales, microseconds, dates before 2000.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pytest
import sqlalchemy as sa

from spark_jobs.engines.postgresql.binarycopy import (
    HEADER,
    TRAILER,
    BinaryCopyEncoder,
    CannotEncode,
    table_columns,
)

pytestmark = pytest.mark.postgres

UTC = dt.UTC
D = decimal.Decimal

# (column SQL type, Arrow type, values)
CASES: list[tuple[str, pa.DataType, list[Any]]] = [
    ("smallint", pa.int64(), [0, -32768, 32767, None]),
    ("integer", pa.int32(), [1, -(2**31), 2**31 - 1, None]),
    ("bigint", pa.int64(), [2**63 - 1, -(2**63), 0, None]),
    ("real", pa.float32(), [1.5, -0.0, float("inf"), None]),
    ("double precision", pa.float64(), [0.1, float("nan"), -1e300, None]),
    ("numeric(12,2)", pa.decimal128(12, 2),
     [D("0.01"), D("-9999999999.99"), D("0.00"), None]),
    ("numeric(14,4)", pa.decimal128(12, 2), [D("12.30"), D("-0.05"), D("9999999999.99"), None]),
    # Spark reads an unconstrained numeric as decimal(38,18): 18 places, as written.
    ("numeric", pa.decimal128(38, 18),
     [D("1.230000000000000000"), D("-0.000000000000000001"), D("7.500000000000000000"), None]),
    ("numeric(20,0)", pa.decimal128(20, 0), [D("123456789012345678"), D("-1"), D("0"), None]),
    ("numeric(30,10)", pa.int64(), [42, -(2**62), 0, None]),
    ("boolean", pa.bool_(), [True, False, None, True]),
    ("text", pa.large_string(), ["", "ünïcødé \"q\", 日本語 'x'\n\ttab\\", None, "a" * 3000]),
    ("varchar(10)", pa.string(), ["short", "", None, "ten chars."]),
    ("char(5)", pa.string(), ["ab", "", None, "abcde"]),
    ("json", pa.string(), ['{"a": [1, 2]}', "null", None, '"ü"']),
    ("jsonb", pa.large_string(), ['{"b": 1, "a": "é"}', "[]", None, "3.5"]),
    ("bytea", pa.large_binary(), [b"\x00\xff\x10", b"", None, bytes(range(256))]),
    ("date", pa.date32(), [dt.date(2000, 1, 1), dt.date(1969, 7, 20), None, dt.date(9999, 12, 31)]),
    ("timestamp", pa.timestamp("us"),
     [dt.datetime(2024, 3, 1, 12, 0, 0, 123456), dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
      None, dt.datetime(1900, 1, 1)]),
    ("timestamptz", pa.timestamp("us", tz="UTC"),
     [dt.datetime(2024, 3, 1, 12, 0, 0, 1, tzinfo=UTC), dt.datetime(1970, 1, 1, tzinfo=UTC),
      None, dt.datetime(2000, 1, 1, tzinfo=UTC)]),
    ("timestamptz", pa.timestamp("us"), [dt.datetime(2024, 3, 1, 12, 0, 0, 1), None, None, None]),
    ("integer", pa.null(), [None, None, None, None]),
]  # fmt: skip


@pytest.fixture
def pg(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    url = sa.make_url(pg_url)
    with psycopg.connect(host=url.host, port=url.port, user=url.username,
                         dbname=url.database) as conn:  # fmt: skip
        conn.execute("SET TIME ZONE 'UTC'")
        yield conn


def _create(conn: psycopg.Connection[Any], name: str) -> None:
    columns = ", ".join(f"c{i} {sql}" for i, (sql, _, _) in enumerate(CASES))
    conn.execute(f"CREATE TABLE {name} (n integer, {columns})")


def _copy(conn: psycopg.Connection[Any], table: str, batch: pa.Table) -> None:
    with conn.cursor() as cursor:
        encoder = BinaryCopyEncoder(batch.schema, table_columns(cursor, table, batch.column_names))
        payload = encoder.encode(batch)
        with cursor.copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy:
            copy.write(HEADER + payload.to_pybytes() + TRAILER)


def _as_text(conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [row[0] for row in conn.execute(f"SELECT t::text FROM {table} t ORDER BY n")]


def test_every_type_reads_back_as_an_insert_of_the_same_values_would(
    pg: psycopg.Connection[Any],
) -> None:
    _create(pg, "copied")
    _create(pg, "inserted")
    rows = len(CASES[0][2])
    arrays = [pa.array(range(rows), pa.int32())]
    arrays += [pa.array(values, arrow) for _, arrow, values in CASES]
    names = ["n", *[f"c{i}" for i in range(len(CASES))]]
    _copy(pg, "copied", pa.table(arrays, names=names))

    # Each value as text or bytes, cast by PostgreSQL: no encoder of ours involved.
    placeholders = ", ".join(["%s", *[f"%s::{sql}" for sql, _, _ in CASES]])
    for r in range(rows):
        values = [r] + [values[r] for _, _, values in CASES]
        pg.execute(f"INSERT INTO inserted VALUES ({placeholders})", values)
    assert _as_text(pg, "copied") == _as_text(pg, "inserted")


def test_a_batch_of_many_rows_with_nulls_in_every_column_round_trips(
    pg: psycopg.Connection[Any],
) -> None:
    pg.execute("CREATE TABLE wide (n bigint PRIMARY KEY, t text, x numeric(12,2), "
               "at timestamptz)")  # fmt: skip
    n = 5000
    batch = pa.table({
        "n": pa.array(range(n), pa.int64()),
        "t": pa.array([None if i % 7 == 0 else f"row {i} ü" * (i % 5) for i in range(n)]),
        "x": pa.array([None if i % 3 == 0 else D(i - 2500) / 100 for i in range(n)],
                      pa.decimal128(12, 2)),
        "at": pa.array([None if i % 11 == 0 else dt.datetime(2024, 1, 1, tzinfo=UTC)
                        + dt.timedelta(microseconds=i * 1_000_321) for i in range(n)],
                       pa.timestamp("us", tz="UTC")),
    })  # fmt: skip
    _copy(pg, "wide", batch.slice(1))  # an offset into the arrays' buffers, too
    got = pg.execute(
        "SELECT count(*), count(t), sum(x), max(at), min(n) FROM wide"
    ).fetchone()
    assert got == (
        n - 1,
        sum(1 for i in range(1, n) if i % 7),
        sum(D(i - 2500) / 100 for i in range(1, n) if i % 3),
        dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=4999 * 1_000_321),
        1,
    )


@pytest.mark.parametrize(
    ("sql", "array", "problem"),
    [
        ("smallint", pa.array([1, 40000], pa.int64()), "16-bit"),
        ("numeric(12,2)", pa.array([D("1.125")], pa.decimal128(12, 3)), "rounded"),
        ("numeric(38,0)", pa.array([D(10**20)], pa.decimal128(38, 0)), "18 digits"),
    ],
)
def test_values_it_cannot_write_exactly_are_refused_before_a_byte_is_sent(
    pg: psycopg.Connection[Any], sql: str, array: pa.Array, problem: str
) -> None:
    pg.execute(f"CREATE TABLE t (c {sql})")
    batch = pa.table({"c": array})
    with pg.cursor() as cursor:
        encoder = BinaryCopyEncoder(batch.schema, table_columns(cursor, "t", ["c"]))
    with pytest.raises(CannotEncode, match=f"column 'c'.*{problem}"):
        encoder.encode(batch)


def test_a_type_pair_it_does_not_know_is_refused_when_the_encoder_is_built(
    pg: psycopg.Connection[Any],
) -> None:
    pg.execute("CREATE TABLE t (u inet, i integer)")
    batch = pa.table({"u": pa.array(["10.1.2.3/8"]), "i": [1]})
    with pg.cursor() as cursor, pytest.raises(CannotEncode, match="column 'u'"):
        BinaryCopyEncoder(batch.schema, table_columns(cursor, "t", ["u", "i"]))
