"""The Spark import job against the real databases on loopback.

"Same content" is DESIGN.md's: every target row equals its source row,
column by column, compared as text by the databases themselves.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import TargetError
from config.models import SluiceConfig
from sinks.abc import MemorySink, SinkClosed
from spark_jobs.common.jdbc import JdbcEndpoint
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import (
    BatchImportFailed,
    ImportResult,
    is_committed,
    main,
    run_import,
    target_table,
)
from spark_jobs.load.staging import staging_table_name
from spark_jobs.load.write import StaleToken, write_batch
from spark_jobs.load.write_parquet import BatchFiles
from spark_jobs.read.extract import extract
from spark_jobs.read.payloads import BadPayload, parse_payloads, payload_schema

# ------------------------------------------------------------------ helpers


def make_config(source: dict[str, Any], target: dict[str, Any], **extra: Any) -> SluiceConfig:
    """A config with one source ``src``; its target (default ``wh.orders``) names ``target``."""
    source = {"target": "wh.orders", **source}
    name = source["target"].split(".")[0]
    return SluiceConfig.model_validate(
        {"sources": {"src": source}, "targets": {name: target}, **extra}
    )


def rng(batch: str, lo: list[Any] | None, hi: list[Any], token: int = 1, **kw: Any) -> Manifest:
    """A range manifest of source ``src``."""
    target, items = kw.pop("target", "wh.orders"), kw.pop("items", 0)
    return Manifest(batch, "src", target, "range", items, token, lo, hi, **kw)


def text_rows(url: str, table: str, key: list[str], where: str | None = None) -> dict[tuple, tuple]:
    """Every row of ``table`` as text (cast by its own database), by key."""
    engine = sa.create_engine(url)
    try:
        columns = [c["name"] for c in sa.inspect(engine).get_columns(table)]
        cast = [sa.cast(sa.column(c), sa.String()) for c in columns]
        query = sa.select(*cast).select_from(sa.table(table))
        if where:
            query = query.where(sa.text(where))
        with engine.connect() as conn:
            rows = conn.execute(query).all()
    finally:
        engine.dispose()
    positions = [columns.index(k) for k in key]
    return {tuple(r[i] for i in positions): tuple(r) for r in rows}


def execute(url: str, *statements: str, rows: list[dict[str, Any]] | None = None) -> None:
    """Run DDL statements, then insert ``rows`` with the last statement when given."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements[:-1] if rows else statements:
            conn.execute(sa.text(statement))
        if rows:
            conn.execute(sa.text(statements[-1]), rows)
    engine.dispose()


def scalar(url: str, sql: str) -> Any:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        value = conn.execute(sa.text(sql)).scalar()
    engine.dispose()
    return value


# ---------------------------------------------------- PostgreSQL → PostgreSQL

ORDERS_DDL = (
    "CREATE TABLE orders (id integer PRIMARY KEY, customer text NOT NULL, "
    "amount numeric(12,3), created timestamp, paid boolean, ratio double precision, note text)"
)
ORDERS_INSERT = (
    "INSERT INTO orders VALUES (:id, :customer, :amount, :created, :paid, :ratio, :note)"
)


def order_rows(n: int) -> list[dict[str, Any]]:
    start = dt.datetime(2024, 2, 28, 23, 59, 59, 123456)
    return [
        {
            "id": i,
            "customer": f"c{i % 17}",
            "amount": Decimal(i) / 8,
            "created": start + dt.timedelta(hours=i, microseconds=i),
            "paid": i % 3 == 0,
            "ratio": i / 3,
            "note": None if i % 5 == 0 else f'l\'été {i} 100% "quoted" \\',
        }
        for i in range(1, n + 1)
    ]


@pytest.mark.spark
@pytest.mark.postgres
def test_pg_range_batches_reach_pg_target_once(spark: Any, pg_url: str, pg_target: str) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(300))
    where = "id % 7 <> 0 AND customer LIKE 'c%'"  # '%' must reach the database as is
    cfg = make_config(
        {
            "kind": "sql",
            "url": pg_url,
            "table": "orders",
            "key": "id",
            "where": where,
            "read": {"num_partitions": 3, "fetchsize": 50},
        },
        {"kind": "jdbc", "url": pg_target, "write": {"batchsize": 64, "num_partitions": 2}},
    )
    first, second = rng("b-1", None, [150], items=150), rng("b-2", [150], [300])

    # (150, 300] splits into 3 sub-ranges, one JDBC query each; so does the
    # first range of the walk, open below, guessed from its 150 items.
    assert extract(spark, cfg.sources["src"], second).rdd.getNumPartitions() == 3
    assert extract(spark, cfg.sources["src"], first).rdd.getNumPartitions() == 3
    assert extract(spark, cfg.sources["src"], rng("b-0", None, [1])).rdd.getNumPartitions() == 1
    results = [run_import(spark, cfg, first), run_import(spark, cfg, second)]

    expected = text_rows(pg_url, "orders", ["id"], where)
    assert text_rows(pg_target, "orders", ["id"]) == expected
    assert [r.rows_written for r in results] == [129, 129]  # 150 ids each, 21 multiples of 7
    assert [r.rows_read for r in results] == [129, 129]
    assert is_committed(cfg, first) and is_committed(cfg, second)
    assert not is_committed(cfg, rng("b-3", [300], [400]))
    assert (
        scalar(
            pg_target, "SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_sluice\\_stage%'"
        )
        == 0
    )

    # Re-running a committed batch reconciles: nothing is read or written again,
    # and the staging table an older attempt left (it crashed right after the
    # target commit) goes.
    leftover = staging_table_name("b-1", first.token - 1, "dead01")
    execute(pg_target, f"CREATE TABLE {leftover} (id integer)")
    again = run_import(spark, cfg, first)
    assert again == ImportResult("b-1", 0, 129, "wh.orders", skipped=True)
    assert text_rows(pg_target, "orders", ["id"]) == expected
    stages = "SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_sluice\\_stage%'"
    assert scalar(pg_target, stages) == 0
    assert scalar(pg_target, "SELECT count(*) FROM _sluice_commits WHERE batch_id = 'b-1'") == 1

    # An importer holding an older token is refused before it reads anything...
    with pytest.raises(StaleToken, match="stale fencing token"):
        run_import(spark, cfg, dataclasses.replace(first, token=0))

    # ... and at commit time, inside the target transaction.
    changed = spark.createDataFrame([(1, "changed")], "id int, customer string")
    target = target_table(cfg, first)
    with pytest.raises(StaleToken, match="stale fencing token"):
        write_batch(spark, changed, target, dataclasses.replace(first, token=0))
    assert text_rows(pg_target, "orders", ["id"]) == expected

    # A newer token commits over the old one; the commit table keeps one row.
    write_batch(spark, changed, target, dataclasses.replace(first, token=2))
    assert text_rows(pg_target, "orders", ["id"])[("1",)][1] == "changed"
    assert scalar(pg_target, "SELECT token FROM _sluice_commits WHERE batch_id = 'b-1'") == 2
    assert scalar(pg_target, "SELECT count(*) FROM _sluice_commits") == 2


@pytest.mark.spark
@pytest.mark.postgres
def test_existing_target_with_other_columns_is_refused(spark: Any, pg_target: str) -> None:
    execute(pg_target, "CREATE TABLE orders (id bigint PRIMARY KEY, label text NOT NULL)")
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": pg_target},
    )
    batch = Manifest("p-1", "src", "wh.orders", "payloads", 1, payloads=['{"id": 1, "name": "a"}'])

    with pytest.raises(TargetError, match="column 'name' of the batch is not in the table"):
        run_import(spark, cfg, batch)
    assert not is_committed(cfg, batch)


@pytest.mark.spark
@pytest.mark.postgres
def test_schema_qualified_target(spark: Any, pg_target: str) -> None:
    execute(pg_target, "CREATE SCHEMA sales")
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "target": "wh.sales.events"},
        {"kind": "jdbc", "url": pg_target},
    )
    bodies = [json.dumps({"id": i, "Mixed Case": f"v{i}"}) for i in range(3)]
    batch = Manifest("s-1", "src", "wh.sales.events", "payloads", 3, payloads=bodies)

    assert run_import(spark, cfg, batch).rows_written == 3
    assert scalar(
        pg_target, "SELECT string_agg(\"Mixed Case\", ',' ORDER BY id) FROM sales.events"
    ) == ("v0,v1,v2")
    assert scalar(pg_target, "SELECT count(*) FROM public._sluice_commits") == 1


@pytest.mark.spark
def test_errors_say_whether_a_retry_can_help(spark: Any, tmp_path: Path) -> None:
    lake = {"kind": "parquet", "path": str(tmp_path)}
    bad_mapping = make_config(
        {
            "kind": "sqs",
            "queue_url": "http://127.0.0.1:1/q",
            "columns": {"id": "no_such_col"},
            "target": "lake.t",
        },
        lake,
    )
    batch = Manifest("e-1", "src", "lake.t", "payloads", 1, payloads=['{"id": 1}'])
    with pytest.raises(BatchImportFailed, match="no_such_col") as bad:
        run_import(spark, bad_mapping, batch)
    assert not bad.value.transient

    down = make_config(
        {
            "kind": "sql",
            "url": "postgresql+psycopg://u:hunter2@127.0.0.1:1/db",
            "table": "t",
            "key": "id",
            "target": "lake.t",
        },
        lake,
    )
    with pytest.raises(BatchImportFailed, match="connect") as lost:
        run_import(spark, down, rng("e-2", None, [10], target="lake.t"))
    assert lost.value.transient and "hunter2" not in str(lost.value)


# ---------------------------------------------------------- MariaDB → PostgreSQL


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.mariadb
def test_mariadb_types_survive_into_pg(spark: Any, mariadb_url: str, pg_target: str) -> None:
    execute(
        mariadb_url,
        "CREATE TABLE orders (id INT PRIMARY KEY, flag TINYINT(1), price DECIMAL(10,2), "
        "placed DATETIME, label VARCHAR(40)) CHARACTER SET utf8mb4",
        "INSERT INTO orders VALUES (:id, :flag, :price, :placed, :label)",
        rows=[
            {
                "id": i,
                "flag": [0, 1, 2, 127, -5, None][i % 6],
                "price": Decimal(i * 101) / 100,
                "placed": dt.datetime(2023, 12, 31, 22, 0, 0) + dt.timedelta(minutes=7 * i),
                "label": None if i % 9 == 0 else f"ünï {i} 'x'",
            }
            for i in range(1, 201)
        ],
    )
    cfg = make_config(
        {"kind": "sql", "url": mariadb_url, "table": "orders", "key": "id"},
        {"kind": "jdbc", "url": pg_target},
    )

    result = run_import(spark, cfg, rng("m-1", None, [200]))

    # TINYINT(1) is a boolean (pgloader's rule, the catalogue's): 0 and 1 go in as false
    # and true; 2, 127 and -5 are no booleans, and their rows are rejects naming the column.
    assert (result.rows_written, result.rows_rejected) == (100, 100)
    flag_type = "SELECT data_type FROM information_schema.columns WHERE column_name = 'flag'"
    assert scalar(pg_target, flag_type) == "boolean"
    source = text_rows(mariadb_url, "orders", ["id"])
    kept = {k: v for k, v in source.items() if v[1] in ("0", "1", None)}
    as_bool = {k: (v[0], {"0": "false", "1": "true"}.get(v[1]), *v[2:]) for k, v in kept.items()}
    assert text_rows(pg_target, "orders", ["id"]) == as_bool
    reasons = [r for (r,) in sa.create_engine(pg_target).connect().execute(
        sa.text("SELECT reason FROM _sluice_rejects")).all()]  # fmt: skip
    assert len(reasons) == 100 and all(r.startswith("column 'flag': ") for r in reasons), reasons[0]


# ------------------------------------------------------- composite key ranges


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.mariadb
@pytest.mark.parametrize("db", ["postgresql", "mariadb"])
def test_composite_key_range(
    spark: Any, db: str, request: pytest.FixtureRequest, pg_target: str
) -> None:
    source_url = request.getfixturevalue("pg_url" if db == "postgresql" else "mariadb_url")
    rows = [
        {"region": region, "id": i, "qty": i * 10 + len(region)}
        for region in ("ap", "eu", "us")
        for i in range(1, 61)
    ]
    execute(
        source_url,
        "CREATE TABLE orders (region VARCHAR(8), id INT, qty INT, PRIMARY KEY (region, id))",
        "INSERT INTO orders VALUES (:region, :id, :qty)",
        rows=rows,
    )
    cfg = make_config(
        {"kind": "sql", "url": source_url, "table": "orders", "key": ["region", "id"]},
        {"kind": "jdbc", "url": pg_target},
    )

    run_import(spark, cfg, rng("c-1", ["eu", 10], ["us", 20]))

    wanted = {
        (r["region"], str(r["id"]))
        for r in rows
        if ("eu", 10) < (r["region"], r["id"]) <= ("us", 20)
    }
    assert set(text_rows(pg_target, "orders", ["region", "id"])) == wanted
    assert len(wanted) == 50 + 20
    source = text_rows(source_url, "orders", ["region", "id"])
    assert text_rows(pg_target, "orders", ["region", "id"]) == {k: source[k] for k in wanted}


# ------------------------------------------------------------------ keys batch


@pytest.mark.spark
@pytest.mark.postgres
def test_keys_batch_imports_exactly_those_rows_into_sqlite(
    spark: Any, pg_url: str, sqlite_url: Callable[[str], str]
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(300))
    target_url = sqlite_url("warehouse")
    cfg = make_config(
        {
            "kind": "sql",
            "url": pg_url,
            "table": "orders",
            "key": "id",
            "mode": "sweep",
            "columns": {"id": "id", "customer": "customer", "paid": "paid"},
        },
        {"kind": "jdbc", "url": target_url},
    )
    keys = [[299], [5], [17], [123], [124], [5], [1000]]  # unsorted, a duplicate, one absent
    batch = Manifest("k-1", "src", "wh.orders", "keys", len(keys), keys=keys)

    result = run_import(spark, cfg, batch)

    assert (result.rows_read, result.rows_written) == (5, 5)
    got = text_rows(target_url, "orders", ["id"])
    assert sorted(int(k[0]) for k in got) == [5, 17, 123, 124, 299]
    assert got[("17",)] == ("17", "c0", "0")  # SQLite keeps booleans as 0/1
    assert is_committed(cfg, batch)


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.mariadb
def test_text_keys_batch_does_not_depend_on_collation(
    spark: Any, mariadb_url: str, pg_target: str
) -> None:
    codes = ["B", "a", "C", "b2", "Zz", "ö", "é1", "_x", "0"] + [f"k{i:03d}" for i in range(100)]
    execute(
        mariadb_url,
        # Case-insensitive collation: 'a' < 'B' here, but 'B' < 'a' in Python.
        "CREATE TABLE orders (code VARCHAR(10) PRIMARY KEY, n INT) "
        "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        "INSERT INTO orders VALUES (:code, :n)",
        rows=[{"code": c, "n": i} for i, c in enumerate(codes)],
    )
    cfg = make_config(
        {"kind": "sql", "url": mariadb_url, "table": "orders", "key": "code", "mode": "sweep"},
        {"kind": "jdbc", "url": pg_target},
    )
    keys = [["B"], ["a"], ["ö"], ["Zz"], ["_x"], ["k042"]]

    run_import(spark, cfg, Manifest("t-1", "src", "wh.orders", "keys", 6, keys=keys))

    assert sorted(text_rows(pg_target, "orders", ["code"])) == sorted((k[0],) for k in keys)


# -------------------------------------------------------------- payloads batch

PAYLOADS = [
    {"id": 1, "price": 9.5, "ok": True, "name": "a", "tags": ["x", "y"], "meta": {"k": 1}},
    {"id": 2, "price": 3, "ok": False, "name": "b"},
    {"id": 3, "name": None, "extra": "only here"},
    {"id": 2, "price": 4.25, "ok": True, "name": "b2"},  # a later body of key 2 wins
]


def test_payload_schema_is_inferred_in_python() -> None:
    records = parse_payloads([json.dumps(p) for p in PAYLOADS], "id")
    schema = payload_schema(records)
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("id", "bigint"),
        ("price", "double"),
        ("ok", "boolean"),
        ("name", "string"),
        ("tags", "string"),
        ("meta", "string"),
        ("extra", "string"),
    ]
    assert [r["id"] for r in records] == [1, 3, 2]
    mixed = payload_schema([{"v": 1}, {"v": "one"}, {"n": None}])
    assert [f.dataType.simpleString() for f in mixed.fields] == ["string", "void"]
    with pytest.raises(BadPayload, match="not an object"):
        parse_payloads(["[1]"], "id")
    with pytest.raises(BadPayload, match="no key field"):
        parse_payloads(['{"name": "x"}'], "id")


@pytest.mark.spark
@pytest.mark.postgres
def test_payloads_batch_into_pg(spark: Any, pg_target: str) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": pg_target},
    )
    bodies = [json.dumps(p) for p in PAYLOADS]
    batch = Manifest("p-1", "src", "wh.orders", "payloads", len(bodies), payloads=bodies)

    result = run_import(spark, cfg, batch)

    assert (result.rows_read, result.rows_written) == (4, 3)
    types = (
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'orders'"
    )
    engine = sa.create_engine(pg_target)
    with engine.connect() as conn:
        assert dict(conn.execute(sa.text(types)).all()) == {
            "id": "bigint",
            "price": "double precision",
            "ok": "boolean",
            "name": "text",
            "tags": "text",
            "meta": "text",
            "extra": "text",
        }
        rows = {r.id: r for r in conn.execute(sa.text("SELECT * FROM orders"))}
    engine.dispose()
    assert (rows[1].price, rows[1].ok, json.loads(rows[1].tags), json.loads(rows[1].meta)) == (
        9.5,
        True,
        ["x", "y"],
        {"k": 1},
    )
    assert (rows[2].price, rows[2].name, rows[2].extra) == (4.25, "b2", None)
    assert (rows[3].name, rows[3].price, rows[3].extra) == (None, None, "only here")


@pytest.mark.spark
@pytest.mark.mariadb
def test_payloads_into_mariadb_target_upsert(spark: Any, mariadb_url: str) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "code"},
        {"kind": "jdbc", "url": mariadb_url},
    )
    bodies = [json.dumps({"code": f"k{i}", "n": i, "ok": i % 2 == 0}) for i in range(30)]
    batch = Manifest("m-1", "src", "wh.orders", "payloads", 30, payloads=bodies)

    assert run_import(spark, cfg, batch).rows_written == 30
    newer = spark.createDataFrame([("k1", 100, True)], "code string, n bigint, ok boolean")
    write_batch(spark, newer, target_table(cfg, batch), dataclasses.replace(batch, token=2))

    rows = text_rows(mariadb_url, "orders", ["code"])
    assert len(rows) == 30 and rows[("k1",)] == ("k1", "100", "1") and rows[("k2",)][1] == "2"
    assert scalar(mariadb_url, "SELECT token FROM _sluice_commits WHERE batch_id = 'm-1'") == 2
    assert scalar(mariadb_url, "SELECT count(*) FROM _sluice_commits") == 1


@pytest.mark.spark
@pytest.mark.parametrize("db", ["postgres", "mariadb", "sqlite"])
def test_a_field_null_in_a_whole_batch_is_written_as_null_whatever_the_column_type(
    spark: Any, db: str, request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]
) -> None:
    if db == "sqlite":
        url = sqlite_url("target")
    else:
        request.applymarker(getattr(pytest.mark, db))
        url = request.getfixturevalue("pg_target" if db == "postgres" else "mariadb_url")
    execute(
        url,
        "CREATE TABLE orders (id bigint PRIMARY KEY, n bigint, at timestamp NULL, "
        "ok boolean, t varchar(20))",
        "INSERT INTO orders VALUES (:id, :n, :at, :ok, :t)",
        rows=[{"id": 1, "n": 5, "at": dt.datetime(2024, 1, 2), "ok": True, "t": "x"}],
    )
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": url},
    )
    bodies = [json.dumps({"id": 1, "n": None, "at": None, "ok": None, "t": None}),
              json.dumps({"id": 2, "n": None})]  # fmt: skip
    batch = Manifest("v-1", "src", "wh.orders", "payloads", 2, payloads=bodies)

    result = run_import(spark, cfg, batch)

    assert (result.rows_written, result.rows_rejected) == (2, 0)
    # Every column took NULL, the existing row's values included (an upsert).
    assert text_rows(url, "orders", ["id"]) == {
        ("1",): ("1", None, None, None, None),
        ("2",): ("2", None, None, None, None),
    }
    # A table created by a batch whose field is null throughout gets text there.
    fresh = Manifest("v-2", "src", "wh.fresh", "payloads", 1,
                     payloads=[json.dumps({"id": 7, "z": None})])  # fmt: skip
    assert run_import(spark, cfg, fresh).rows_written == 1
    engine = sa.create_engine(url)
    columns = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns("fresh")}
    engine.dispose()
    assert isinstance(columns["z"], sa.Text | sa.String), columns


@pytest.mark.spark
def test_a_field_null_in_a_whole_batch_takes_the_parquet_table_s_type(
    spark: Any, tmp_path: Path
) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": str(tmp_path)},
    )
    batches = [
        [{"id": 1, "n": 5, "z": None}],  # z: no table yet, so text
        [{"id": 2, "n": None}, {"id": 3}],  # n: the bigint of the file already there
        [{"id": 4, "z": "zz", "n": 6}],
    ]
    for i, records in enumerate(batches):
        bodies = [json.dumps(r) for r in records]
        run_import(spark, cfg, Manifest(f"n{i}", "src", "lake.ev", "payloads", 1, payloads=bodies))

    read = spark.read.parquet(str(tmp_path / "ev"))
    assert dict(read.dtypes) == {"id": "bigint", "n": "bigint", "z": "string"}
    assert sorted(tuple(r) for r in read.select("id", "n", "z").collect()) == [
        (1, 5, None),
        (2, None, None),
        (3, None, None),
        (4, 6, "zz"),
    ]


# ------------------------------------------------------------ SQLite → Parquet


@pytest.mark.spark
def test_sqlite_batches_to_parquet_read_back_once(
    spark: Any, sqlite_url: Callable[[str], str], tmp_path: Path
) -> None:
    source_url = sqlite_url("source")
    execute(
        source_url,
        "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT, score REAL)",
        "INSERT INTO events VALUES (:id, :name, :score)",
        rows=[{"id": i, "name": f"e{i}", "score": i / 4} for i in range(1, 251)],
    )
    lake = tmp_path / "lake"
    cfg = make_config(
        {
            "kind": "sql",
            "url": source_url,
            "table": "events",
            "key": "id",
            "columns": {"id": "id", "name": "upper(name)", "score": "score"},
            "target": "lake.events",
        },
        {"kind": "parquet", "path": str(lake)},
    )
    batches = [
        rng(f"s/{i}", lo, hi, target="lake.events")
        for i, (lo, hi) in enumerate([(None, [100]), ([100], [200]), ([200], [300])])
    ]

    results = [run_import(spark, cfg, b) for b in batches]
    # A re-run of a published batch replaces its file: still every row once.
    table = target_table(cfg, batches[1])
    again = spark.read.parquet(BatchFiles.of(str(lake), None, "events", "s/1").final)
    write_batch(spark, again, table, dataclasses.replace(batches[1], token=2))

    read = spark.read.parquet(str(lake / "events"))
    rows = sorted(read.collect())  # one Spark job for every check below
    assert [r.rows_written for r in results] == [100, 100, 50]
    assert read.columns == ["id", "name", "score"]  # no column added by the layout
    assert [r.id for r in rows] == list(range(1, 251))  # every row, once
    assert rows[6] == (7, "E7", 1.75)
    assert sorted(p.name for p in (lake / "events").iterdir()) == [
        "_sluice_commits",
        "batch-s_2f0.parquet",
        "batch-s_2f1.parquet",
        "batch-s_2f2.parquet",
    ]
    assert all(is_committed(cfg, b) for b in batches)
    assert run_import(spark, cfg, batches[0]) == ImportResult(
        "s/0", 0, 100, "lake.events", skipped=True
    )
    # The restart after a crash between the rename and the ledger update
    # carries a newer token: it reconciles from the published file, and
    # removes the staging folder the crashed attempt left.
    files = BatchFiles.of(str(lake), None, "events", "s/2")
    Path(files.stage(batches[2].token)).mkdir()
    assert run_import(spark, cfg, dataclasses.replace(batches[2], token=9)) == ImportResult(
        "s/2", 0, 50, "lake.events", skipped=True
    )
    assert not [p for p in (lake / "events").iterdir() if p.name.startswith("_stage-")]
    with pytest.raises(StaleToken):
        run_import(spark, cfg, batches[1])  # committed with token 2 above


@pytest.mark.spark
def test_parquet_through_hadoop_filesystem(spark: Any, tmp_path: Path) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": f"file://{tmp_path}/lake"},
    )
    for n in range(2):
        bodies = [json.dumps({"id": n * 10 + i, "v": "x"}) for i in range(10)]
        run_import(spark, cfg, Manifest(f"h{n}", "src", "lake.ev", "payloads", 10, payloads=bodies))

    assert spark.read.parquet(f"file://{tmp_path}/lake/ev").count() == 20
    assert is_committed(cfg, Manifest("h1", "src", "lake.ev", "payloads", 0))


@pytest.mark.spark
def test_main_runs_one_batch_like_spark_submit(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sluice.yaml").write_text(
        "sources:\n"
        "  ev: {kind: sqs, queue_url: 'http://127.0.0.1:1/q', target: lake.ev}\n"
        "targets:\n"
        "  lake: {kind: parquet, path: out}\n"
    )
    bodies = [json.dumps({"id": i}) for i in range(5)]
    manifest = Manifest("cli-1", "ev", "lake.ev", "payloads", 5, payloads=bodies)
    (tmp_path / "batch.json").write_text(manifest.to_json())
    args = ["--config", str(tmp_path / "sluice.yaml"), "--manifest", str(tmp_path / "batch.json")]

    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert isinstance(printed.pop("seconds"), float)  # the import's own time
    assert printed == {
        "batch_id": "cli-1",
        "rows_read": 5,
        "rows_written": 5,
        "target": "lake.ev",
        "skipped": False,
        "rows_rejected": 0,
        "zero_dates": {},
    }
    assert (tmp_path / "out" / "ev" / "batch-cli-1.parquet").exists()  # next to the config
    assert main([*args[:3], str(tmp_path / "missing.json")]) == 2


# ---------------------------------------------------------------- the sinks


@pytest.mark.spark
def test_spark_sink_runs_batches_concurrently(spark: Any, tmp_path: Path) -> None:
    from sinks.spark import SparkSink

    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": str(tmp_path)},
        spark={"max_concurrent_imports": 2},
    )
    # Imports 0 and 1 each wait at the barrier before their Spark work: it
    # opens only once both are inside an import at the same time (and this
    # thread has seen that), so a sink that ran them one after the other
    # breaks it after its timeout. Import 2 waits for ``third``, so that the
    # moment between "0 and 1 done" and "2 done" is one this thread chooses.
    both_running = threading.Barrier(3, timeout=60)
    third = threading.Event()
    started: list[int] = []

    class Watched(SparkSink):
        def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
            started.append(ticket)
            if ticket < 2:
                both_running.wait()
            elif not third.wait(60):
                raise TimeoutError("import 2 was never let through")
            return super()._run(ticket, manifest)

    sink = Watched(cfg, spark)
    seen_in_flight: list[int] = []
    finished = [threading.Event() for _ in range(3)]

    def on_done(n: int) -> Callable[[Any], None]:
        def record(_future: Any) -> None:
            seen_in_flight.append(sink.in_flight())  # list.append is atomic
            finished[n].set()

        return record

    futures = []
    try:
        for n in range(3):
            bodies = [json.dumps({"id": n * 100 + i}) for i in range(20)]
            future = sink.submit(
                Manifest(f"f{n}", "src", "lake.ev", "payloads", 20, payloads=bodies)
            )
            future.add_done_callback(on_done(n))
            futures.append(future)

        both_running.wait()  # imports 0 and 1 run at once; nothing has finished
        assert sorted(started) == [0, 1]  # two threads: import 2 waits for one of them
        assert (sink.in_flight(), sink.pending_items()) == (3, 60)
        # A callback runs after the sink stopped counting its batch.
        assert finished[0].wait(120) and finished[1].wait(120)
        assert (sink.in_flight(), sink.pending_items()) == (1, 20)  # import 2 is held
        third.set()
        results = [f.result(timeout=120) for f in futures]
        assert finished[2].wait(120)
    finally:
        third.set()
        both_running.abort()  # a failed assertion above must not leave imports waiting
        sink.close(wait=True)

    assert [r.rows_written for r in results] == [20, 20, 20]
    assert sorted(started) == [0, 1, 2]
    # A batch's own callback never sees it counted; the last one sees none.
    # Imports 0 and 1 end while 2 is held: the later of their callbacks sees
    # only import 2, the earlier one the other too unless it was forgotten first.
    assert seen_in_flight[2] == 0 and sorted(seen_in_flight[:2]) in ([1, 1], [1, 2])
    assert (sink.in_flight(), sink.pending_items()) == (0, 0)
    assert spark.read.parquet(str(tmp_path / "ev")).count() == 60
    tracker = spark.sparkContext.statusTracker()
    assert all(tracker.getJobIdsForGroup(sink.job_group(n)) for n in range(3))
    with pytest.raises(SinkClosed):
        sink.submit(Manifest("f9", "src", "lake.ev", "payloads", 1, payloads=['{"id": 1}']))


def test_memory_sink_holds_completes_and_fails() -> None:
    sink = MemorySink(auto_complete=False)
    a = Manifest("a", "src", "wh.t", "keys", 3, keys=[[1], [2], [3]])
    b = Manifest("b", "src", "wh.t", "keys", 2, keys=[[4], [5]])
    sink.fail("c", ValueError("boom"))
    fa, fb = sink.submit(a), sink.submit(b)
    fc = sink.submit(Manifest("c", "src", "wh.t", "keys", 1, keys=[[6]]))

    assert (sink.in_flight(), sink.pending_items(), sink.held()) == (2, 5, ["a", "b"])
    assert isinstance(fc.exception(timeout=1), ValueError)
    sink.complete("a")
    sink.fail("b")
    assert fa.result(timeout=1) == ImportResult("a", 3, 3, "wh.t")
    assert isinstance(fb.exception(timeout=1), RuntimeError)
    assert (sink.in_flight(), sink.pending_items()) == (0, 0)
    assert MemorySink().submit(a).result(timeout=1).rows_written == 3
    held = sink.submit(a)
    sink.close()
    assert isinstance(held.exception(timeout=1), SinkClosed)
    with pytest.raises(SinkClosed):
        sink.submit(a)
    assert [m.batch_id for m in sink.submitted] == ["a", "b", "c", "a"]


@pytest.mark.spark
@pytest.mark.postgres
def test_pg_rows_are_read_as_the_server_prints_them(spark: Any, pg_url: str) -> None:
    """Reads are PostgreSQL's own COPY output: every awkward value comes out as the server
    prints it (``col::text``), or as the exact value where Spark holds it (integers,
    floating point, booleans, bytea)."""
    execute(
        pg_url,
        "CREATE TABLE odd (id bigint PRIMARY KEY, d date, ts timestamp, tz timestamptz, "
        "n numeric(30,10), f float8, r real, b boolean, s smallint, i integer, u uuid, "
        "j jsonb, t text, c char(3), by bytea, tm time)",
        "INSERT INTO odd VALUES (1, '1900-01-01', '1899-12-31 23:59:59.999999', "
        "'1970-01-01 00:00:00+00', 12345678901234567890.0123456789, 'NaN', '-Infinity', true, "
        "-32768, 2147483647, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"k\": [1, 2]}', "
        "'', 'ab', '\\x00ff', '23:59:59.999999'), "
        "(2, '2024-02-29', '2024-03-31 02:30:00', '2024-10-27 01:30:00+02', -0.0000000001, "
        "1e308, 1.5, false, 0, -1, NULL, 'null', 'ünï\"\\n\t\\', NULL, '', '00:00'), "
        "(3, 'infinity', '-infinity', '0044-03-15 12:00:00 BC', 'NaN', NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    cfg = make_config({"kind": "sql", "url": pg_url, "table": "odd", "key": "id"}, {
        "kind": "jdbc", "url": pg_url})  # fmt: skip
    native = extract(spark, cfg.sources["src"], rng("b-1", None, [3], items=3))
    names = native.columns
    exact = {"f", "r", "b", "s", "i", "by", "id", "c"}  # c: char(3) as printed, padded
    texts = ", ".join(f"{n}::text" if n not in exact else n for n in names)
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        conn.execute(sa.text("SET TimeZone = 'UTC'"))
        expected = [tuple(r) for r in conn.execute(sa.text(f"SELECT {texts} FROM odd ORDER BY id"))]
    engine.dispose()
    got = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)
           for row in sorted(native.collect())]  # fmt: skip
    for a, b in zip(got, expected, strict=True):
        assert repr(a) == repr(b)  # repr: NaN equals NaN
    assert len(got) == 3


@pytest.mark.spark
@pytest.mark.postgres
def test_reads_reuse_a_table_schema_until_a_failed_batch_forgets_it(
    spark: Any, pg_url: str, pg_target: str
) -> None:
    """The table's columns are looked up once, not per batch; a batch that
    fails (here: a column dropped under it) forgets them, so its retry reads
    the table as it is now."""
    from spark_jobs.read import jdbc_read

    execute(pg_url, "CREATE TABLE grow (id bigint PRIMARY KEY, a text, b text)",
            "INSERT INTO grow SELECT i, 'a' || i, 'b' || i FROM generate_series(1, 6) AS i")
    cfg = make_config({"kind": "sql", "url": pg_url, "table": "grow", "key": "id"},
                      {"kind": "jdbc", "url": pg_target})  # fmt: skip
    assert run_import(spark, cfg, rng("g-1", None, [2], items=2)).rows_written == 2
    assert jdbc_read._direct  # this Spark lets sluice build the relation with a known schema
    execute(pg_url, "ALTER TABLE grow ADD COLUMN c int DEFAULT 7")
    reused = extract(spark, cfg.sources["src"], rng("g-2", [2], [4], items=2))
    assert reused.columns == ["id", "a", "b"]  # no look-up: the schema of the first batch
    assert sorted(tuple(r) for r in reused.collect()) == [(3, "a3", "b3"), (4, "a4", "b4")]

    execute(pg_url, "ALTER TABLE grow DROP COLUMN b")
    with pytest.raises(BatchImportFailed, match='"b"'):
        run_import(spark, cfg, rng("g-2", [2], [4], items=2))
    execute(pg_target, "ALTER TABLE orders DROP COLUMN b", "ALTER TABLE orders ADD COLUMN c int")
    assert run_import(spark, cfg, rng("g-2", [2], [4], items=2, token=2)).rows_written == 2
    assert text_rows(pg_target, "orders", ["id"]) == {
        ("1",): ("1", "a1", None), ("2",): ("2", "a2", None),
        ("3",): ("3", "a3", "7"), ("4",): ("4", "a4", "7"),
    }  # fmt: skip


@pytest.mark.spark
@pytest.mark.postgres
def test_a_range_copied_straight_in_is_read_by_one_query(spark: Any, pg_url: str) -> None:
    execute(pg_url, "CREATE TABLE split (id bigint PRIMARY KEY)",
            "INSERT INTO split SELECT generate_series(1, 100)")  # fmt: skip
    cfg = make_config({"kind": "sql", "url": pg_url, "table": "split", "key": "id"},
                      {"kind": "jdbc", "url": pg_url})  # fmt: skip
    batch = rng("s-1", [10], [90], items=80)
    spread = extract(spark, cfg.sources["src"], batch)
    single = extract(spark, cfg.sources["src"], batch, one_task=True)
    assert (spread.rdd.getNumPartitions(), single.rdd.getNumPartitions()) == (2, 1)
    assert sorted(spread.collect()) == sorted(single.collect()) and single.count() == 80


@pytest.mark.spark
@pytest.mark.postgres
def test_reads_fall_back_to_spark_s_own_only_when_spark_has_no_such_relation(
    spark: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from py4j.protocol import Py4JError, Py4JJavaError

    from spark_jobs.read import jdbc_read

    endpoint = JdbcEndpoint.from_url(pg_url)
    properties = endpoint.connection_properties()
    with pytest.raises(Py4JJavaError, match="nowhere"):  # the database's own answer
        jdbc_read.jdbc_frame(spark, endpoint.url, "nowhere", ["1=1"], properties)
    assert jdbc_read._direct

    execute(pg_url, "CREATE TABLE here (id bigint PRIMARY KEY)", "INSERT INTO here VALUES (1)")

    def other_spark(*_: Any) -> None:
        raise Py4JError("Method apply([...]) does not exist")

    monkeypatch.setattr(jdbc_read, "_built", other_spark)
    monkeypatch.setattr(jdbc_read, "_direct", True)
    frame = jdbc_read.jdbc_frame(spark, endpoint.url, "here", ["id > 0", "id <= 0"], properties)
    assert (frame.rdd.getNumPartitions(), [tuple(r) for r in frame.collect()]) == (2, [(1,)])
    assert not jdbc_read._direct
