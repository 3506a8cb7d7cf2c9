"""Rows a JDBC target refuses do not poison their batch.

The batch is split until the bad rows stand alone; they land in
``_sluice_rejects`` with the database's reason, the rest of the batch commits,
and the import reports how many were rejected. Re-running the batch changes
neither the target nor the rejects.
"""

from __future__ import annotations

import dataclasses
import json
import re
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult, run_import, target_table
from spark_jobs.load.write import write_batch
from tests.test_import_job import execute, make_config, rng, scalar, text_rows

TARGET_DDL = (
    "CREATE TABLE orders (id integer PRIMARY KEY, name text NOT NULL, code varchar(5), "
    "qty integer CHECK (qty >= 0))"
)
BAD = {
    17: ("name", None, "not-null"),
    50: ("code", "toolong", "too long"),
    51: ("code", "x" * 40, "too long"),  # next to another bad row
    101: ("name", None, "not-null"),
    199: ("qty", -1, "check constraint"),
}


def source_rows(n: int) -> list[dict[str, Any]]:
    rows = [{"id": i, "name": f"n{i}", "code": f"c{i % 97}", "qty": i} for i in range(1, n + 1)]
    for key, (column, value, _) in BAD.items():
        rows[key - 1][column] = value
    return rows


def rejects(url: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``_sluice_rejects`` by (batch_id, key JSON); fails on a duplicate."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM _sluice_rejects")).mappings().all()
    engine.dispose()
    by_key = {(r["batch_id"], r["key"]): dict(r) for r in rows}
    assert len(by_key) == len(rows), "a rejected row was recorded twice"
    return by_key


@pytest.mark.spark
@pytest.mark.postgres
def test_rejected_rows_are_set_aside_and_the_rest_commits(
    spark: Any, pg_url: str, pg_factory: Any
) -> None:
    target_url = pg_factory.create("rejects")
    execute(
        pg_url,
        "CREATE TABLE orders (id integer PRIMARY KEY, name text, code text, qty integer)",
        "INSERT INTO orders VALUES (:id, :name, :code, :qty)",
        rows=source_rows(200),
    )
    execute(target_url, TARGET_DDL)
    cfg = make_config(
        {"kind": "sql", "url": pg_url, "table": "orders", "key": "id",
         "read": {"num_partitions": 2}},
        {"kind": "jdbc", "url": target_url, "write": {"num_partitions": 2}},
    )  # fmt: skip
    batch = rng("r-1", [0], [200])

    result = run_import(spark, cfg, batch)

    assert result == ImportResult("r-1", 200, 195, "wh.orders", False, rows_rejected=5)
    source = text_rows(pg_url, "orders", ["id"])
    good = {k: v for k, v in source.items() if int(k[0]) not in BAD}
    assert text_rows(target_url, "orders", ["id"]) == good
    recorded = rejects(target_url)
    assert sorted(json.loads(key)[0] for _, key in recorded) == sorted(BAD)
    originals = source_rows(200)
    for (batch_id, key), record in recorded.items():
        number = json.loads(key)[0]
        assert (batch_id, record["source"]) == ("r-1", "src")
        assert BAD[number][2] in record["reason"], record["reason"]
        assert json.loads(record["row"]) == originals[number - 1]  # the whole row, as JSON
        assert record["rejected_at"] is not None
    assert scalar(target_url, "SELECT rows FROM _sluice_commits WHERE batch_id = 'r-1'") == 195

    # The restart after a crash between this commit and the ledger (a new
    # token): reconciled from the target, rejects still counted.
    again = run_import(spark, cfg, dataclasses.replace(batch, token=2))
    assert again == ImportResult("r-1", 0, 195, "wh.orders", True, rows_rejected=5)

    # Importing the batch again for real (a newer importer) splits it again:
    # same target, same rejects, still one commit record.
    rows = spark.read.jdbc(
        "jdbc:postgresql://127.0.0.1:5432/" + sa.make_url(pg_url).database,
        "orders",
        properties={"user": "postgres", "driver": "org.postgresql.Driver"},
    )
    newer = dataclasses.replace(batch, token=3)
    rewritten = write_batch(spark, rows, target_table(cfg, batch), newer)
    assert (rewritten.rows, rewritten.rejected) == (195, 5)
    assert text_rows(target_url, "orders", ["id"]) == good
    assert rejects(target_url).keys() == recorded.keys()
    assert scalar(target_url, "SELECT count(*) FROM _sluice_commits") == 1
    assert scalar(target_url, "SELECT token FROM _sluice_commits") == 3
    staged = "SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_sluice\\_stage%'"
    assert scalar(target_url, staged) == 0


@pytest.mark.spark
@pytest.mark.parametrize("db", ["mariadb", "sqlite"])
def test_rejects_in_mariadb_and_sqlite_targets(
    spark: Any, db: str, request: pytest.FixtureRequest, sqlite_url: Any
) -> None:
    if db == "mariadb":
        request.applymarker(pytest.mark.mariadb)
        url = request.getfixturevalue("mariadb_url")
    else:
        url = sqlite_url("target")
    execute(
        url,
        "CREATE TABLE orders (id bigint PRIMARY KEY, name varchar(20) NOT NULL, "
        "qty bigint CHECK (qty >= 0))",
    )
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": url},
    )
    bodies = [json.dumps({"id": i, "name": f"n{i}", "qty": i}) for i in range(1, 41)]
    bodies[9] = json.dumps({"id": 10, "name": None, "qty": 10})
    bodies[29] = json.dumps({"id": 30, "name": "n30", "qty": -30})
    batch = Manifest("x-1", "src", "wh.orders", "payloads", 40, payloads=bodies)

    result = run_import(spark, cfg, batch)
    rerun = write_batch(
        spark,
        spark.createDataFrame([(10, None, 10)], "id bigint, name string, qty bigint"),
        target_table(cfg, batch),
        dataclasses.replace(batch, token=2),
    )

    assert (result.rows_written, result.rows_rejected) == (38, 2)
    assert (rerun.rows, rerun.rejected) == (0, 1)  # the newer attempt's rejects replace the old
    assert sorted(int(k[0]) for k in text_rows(url, "orders", ["id"])) == [
        i for i in range(1, 41) if i not in (10, 30)
    ]
    recorded = rejects(url)
    assert list(recorded) == [("x-1", "[10]")]
    assert "null" in recorded[("x-1", "[10]")]["reason"].lower()


@pytest.mark.postgres
def test_a_target_refusing_most_rows_fails_the_batch(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from config.models import JdbcTargetConfig
    from spark_jobs.common.jdbc import sql_engine
    from spark_jobs.load import commit_jdbc, rejects_jdbc
    from spark_jobs.load.jdbc_tables import commits_table, create_if_missing, rejects_table
    from spark_jobs.load.staging import drop_staging, staging_table
    from spark_jobs.load.target import TargetTable

    monkeypatch.setattr(rejects_jdbc, "MAX_REJECTS", 3)
    execute(pg_url, "CREATE TABLE t (id integer PRIMARY KEY, name text NOT NULL)")
    engine = sql_engine(pg_url)
    create_if_missing(engine, commits_table())
    create_if_missing(engine, rejects_table())
    manifest = Manifest("m-1", "src", "wh.t", "keys", 20)
    columns = [sa.Column("id", sa.Integer()), sa.Column("name", sa.Text())]
    staging = staging_table(manifest, columns, "postgresql")
    with engine.begin() as conn:
        staging.create(conn)
        conn.execute(
            staging.insert(),
            [{"id": i, "name": None if i % 4 else "ok", "_sluice_row": i} for i in range(20)],
        )
    target = TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=pg_url), None, "t", ("id",))
    try:
        with pytest.raises(rejects_jdbc.TooManyRejects, match="more than 3 rows.*not-null"):
            commit_jdbc.commit_staged(engine, target, staging, ["id", "name"], manifest)
    finally:
        drop_staging(engine, staging)
        engine.dispose()
    for table in ("t", "_sluice_commits", "_sluice_rejects"):  # nothing committed
        assert scalar(pg_url, f"SELECT count(*) FROM {table}") == 0


# -- values a column would change without an error: set aside, naming the column -------------


@pytest.mark.spark
@pytest.mark.parametrize("db", ["postgres", "mariadb", "sqlite"])
def test_values_a_column_would_round_or_overflow_are_set_aside_naming_it(
    spark: Any, db: str, request: pytest.FixtureRequest, sqlite_url: Any
) -> None:
    if db == "sqlite":
        url = sqlite_url("target")
    else:
        request.applymarker(getattr(pytest.mark, db))
        url = request.getfixturevalue("pg_url" if db == "postgres" else "mariadb_url")
    # PostgreSQL and MariaDB would store 0.5 as 1 (or 0) here without a word.
    execute(url, "CREATE TABLE orders (id bigint PRIMARY KEY, qty integer, small smallint)")
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"},
        {"kind": "jdbc", "url": url},
    )
    # qty is a double in the batch: i / 2 has a fraction for odd i. small is
    # a bigint: i * 1000 leaves SMALLINT's range from i = 33 (SQLite has no
    # ranges: every INTEGER there is 8 bytes, so nothing would change).
    bodies = [json.dumps({"id": i, "qty": i / 2, "small": i * 1000}) for i in range(1, 41)]
    batch = Manifest("n-1", "src", "wh.orders", "payloads", 40, payloads=bodies)

    result = run_import(spark, cfg, batch)

    fraction = {i for i in range(1, 41) if i % 2}
    overflow = set() if db == "sqlite" else {i for i in range(33, 41)} - fraction
    kept = set(range(1, 41)) - fraction - overflow
    assert (result.rows_written, result.rows_rejected) == (len(kept), 40 - len(kept))
    assert text_rows(url, "orders", ["id"]) == {
        (str(i),): (str(i), str(i // 2), str(i * 1000)) for i in kept
    }
    recorded = rejects(url)
    assert {int(json.loads(key)[0]) for _, key in recorded} == fraction | overflow
    for (_, key), record in recorded.items():
        i = json.loads(key)[0]
        # MariaDB names its types with a display width: INTEGER(11).
        if i in fraction:
            expected = (rf"column 'qty' is INTEGER(\(\d+\))? in the table, which keeps no "
                        rf"decimal places: {i / 2} would be rounded \(the batch has ")
        else:
            expected = (rf"column 'small' is SMALLINT(\(\d+\))? in the table, which holds "
                        rf"-32768 to 32767: {i * 1000} is out of range \(the batch has ")
        assert re.match(expected, record["reason"]), record["reason"]
        assert json.loads(record["row"]) == json.loads(bodies[i - 1])


@pytest.mark.spark
@pytest.mark.postgres
def test_decimals_a_column_would_round_are_set_aside_and_a_rerun_changes_nothing(
    spark: Any, pg_url: str, pg_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_jobs.load import rejects_jdbc
    from spark_jobs.read.extract import extract

    target_url = pg_factory.create("narrow")
    rows = [
        {"id": i, "amount": Decimal(i) / 4, "price": Decimal(i) / 4 + Decimal("0.005") * (i == 8),
         "big": i * 10**8}
        for i in range(1, 41)
    ]  # fmt: skip
    execute(
        pg_url,
        "CREATE TABLE orders (id integer PRIMARY KEY, amount numeric(12,2), "
        "price numeric(12,3), big bigint)",
        "INSERT INTO orders VALUES (:id, :amount, :price, :big)",
        rows=rows,
    )
    execute(
        target_url,
        "CREATE TABLE orders (id integer PRIMARY KEY, amount integer, price numeric(12,2), "
        "big integer)",
    )
    cfg = make_config(
        {"kind": "sql", "url": pg_url, "table": "orders", "key": "id"},
        {"kind": "jdbc", "url": target_url},
    )
    batch = rng("d-1", None, [40], items=40)

    # Most of the batch would change: it fails as a whole, naming the column
    # and both types, and nothing is committed.
    monkeypatch.setattr(rejects_jdbc, "MAX_REJECTS", 3)
    with pytest.raises(rejects_jdbc.TooManyRejects, match=(
        r"wh\.orders: column 'amount' is INTEGER in the table but NUMERIC\(12, 2\) in the "
        r"batch, and more than 3 of the batch's values would change in it, such as 0\.25"
    )):  # fmt: skip
        run_import(spark, cfg, batch)
    assert scalar(target_url, "SELECT count(*) FROM orders") == 0
    assert scalar(target_url, "SELECT count(*) FROM _sluice_commits") == 0
    monkeypatch.undo()

    result = run_import(spark, cfg, batch)

    why = {i: "amount" for i in range(1, 41) if i % 4}
    why |= {8: "price"} | {i: "big" for i in range(24, 41, 4)}
    assert (result.rows_written, result.rows_rejected) == (40 - len(why), len(why))
    kept = {(str(i),): (str(i), str(i // 4), f"{i / 4:.2f}", str(i * 10**8))
            for i in range(1, 41) if i not in why}  # fmt: skip
    assert text_rows(target_url, "orders", ["id"]) == kept
    recorded = rejects(target_url)
    assert {json.loads(key)[0]: r["reason"].split("'")[1] for (_, key), r in recorded.items()} \
        == why
    assert recorded[("d-1", "[8]")]["reason"] == (
        "column 'price' is NUMERIC(12, 2) in the table, which keeps 2 decimal places: "
        "2.005 would be rounded (the batch has NUMERIC(12, 3))"
    )
    assert recorded[("d-1", "[3]")]["reason"] == (
        "column 'amount' is INTEGER in the table, which keeps no decimal places: "
        "0.75 would be rounded (the batch has NUMERIC(12, 2))"
    )

    # A newer importer of the same batch: same target, same rejects, one commit.
    again = write_batch(spark, extract(spark, cfg.sources["src"], batch),
                        target_table(cfg, batch), dataclasses.replace(batch, token=2))  # fmt: skip
    assert (again.rows, again.rejected) == (result.rows_written, result.rows_rejected)
    assert text_rows(target_url, "orders", ["id"]) == kept
    assert rejects(target_url).keys() == recorded.keys()
    assert scalar(target_url, "SELECT count(*) FROM _sluice_commits") == 1
