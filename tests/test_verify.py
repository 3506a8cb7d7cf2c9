"""``sluice verify``: the target compared with the source, key by key where it differs, repaired.

Real databases throughout: the 14-table schema of :mod:`tests.shop_schema`
(PostgreSQL → PostgreSQL, foreign keys enforced) is migrated, then changed
behind sluice's back; verify must name exactly the keys deleted, changed
and added, ``--repair`` and a run must fix them, twice. A typed table goes
from PostgreSQL into MariaDB and into Parquet: verify must find the two
equal across their types, then exactly what was changed in each.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli import app
from scheduler.verify_tables import verify_config
from spark_jobs.verify.report import VerifyReport
from tests.helpers import drain, write_config
from tests.shop_schema import TABLES, create_schema, rows_of, seed, shop_config

pytestmark = pytest.mark.spark


def found(report: VerifyReport) -> dict[str, dict[str, list[list[Any]]]]:
    """Per differing table, the keys of each kind of difference found (every one: < 10 each)."""
    return {
        t.source: {kind: keys for kind, keys in t.first.items() if keys}
        for t in report.tables
        if not t.equal
    }


def execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def tamper_shop(url: str) -> None:
    """Delete, change and add rows in the target, across numeric, timestamptz, text, bytea, NULL."""
    execute(
        url,
        "DELETE FROM payments WHERE id IN (3, 7)",
        "UPDATE payments SET amount = amount + 0.01 WHERE id = 5",
        "INSERT INTO payments (id, order_id, amount) VALUES (100000, 1, 1.00)",
        "UPDATE orders SET placed_at = placed_at + interval '1 microsecond' WHERE id = 10",
        "UPDATE orders SET note = 'geändert ✓' WHERE id = 11",
        "UPDATE orders SET note = NULL WHERE id = 3",
        "UPDATE products SET label = '\\x00ff'::bytea WHERE id = 2",
        "UPDATE customers SET name = 'jemand' WHERE id = 14",
        "DELETE FROM shipment_items WHERE shipment_id = 1",
    )


def test_verify_finds_what_changed_behind_its_back_and_repair_fixes_it_twice(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("verify_src"), pg_factory.create("verify_dst")
    seed(source)
    create_schema(target, target=True)  # every foreign key enforced
    path, cfg = write_config(tmp_path, shop_config(source, target, "postgresql"))
    assert drain(cfg, path, spark).exit_code == 0  # no dead batch, no rejected row
    for table in TABLES:
        assert rows_of(target, table) == rows_of(source, table), table
    assert rows_of(target, "audit_log") == []  # left out by the pattern
    tamper_shop(target)
    [shipped] = _one(source, "SELECT order_id FROM shipment_items WHERE shipment_id = 1")
    expected = {
        "shop.payments": {"missing": [[3], [7]], "different": [[5]], "extra": [[100000]]},
        "shop.orders": {"different": [[3], [10], [11]]},
        "shop.products": {"different": [[2]]},
        "shop.customers": {"different": [[14]]},
        "shop.shipment_items": {"missing": [[1, shipped, 1]]},
    }
    # The command line: exit 1, the keys in its JSON.
    result = CliRunner().invoke(app, ["verify", str(path), "--json", "-s", "shop.payments"])
    assert result.exit_code == 1, result.output
    [payments] = json.loads(result.output)["tables"]
    assert (payments["missing"], payments["different"], payments["extra"]) == (2, 1, 1)

    names: list[str] | None = None  # round 1: every table; round 2: those tampered
    for round_ in (1, 2):  # the same keys tampered twice are repaired twice
        report = verify_config(spark, cfg, names, repair=True, apply_deletes=True)
        assert found(report) == expected, round_
        if names is None:
            assert sorted(t.source for t in report.tables) == sorted(f"shop.{t}" for t in TABLES)
            assert all(t.checked == t.target_rows > 0 for t in report.tables if t.equal)
        assert sum(t.repaired_keys for t in report.tables) == 9, round_
        assert sum(t.deleted for t in report.tables) == 1, round_
        assert drain(cfg, path, spark).exit_code == 0
        names = sorted(expected)
        after = verify_config(spark, cfg, names)
        assert after.equal, (round_, found(after))
        if round_ == 1:
            tamper_shop(target)
    assert _one(source, "SELECT count(*) FROM payments") == _one(
        target, "SELECT count(*) FROM payments"
    )


def _one(url: str, sql: str) -> list[Any]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        row = list(conn.execute(sa.text(sql)).one())
    engine.dispose()
    return row


# -- one typed table into MariaDB and into Parquet -----------------------------------------

T0 = dt.datetime(2024, 5, 1, 8, 30, 0, 123456, tzinfo=dt.UTC)


def _typed_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "amount": None if i % 11 == 0 else Decimal(i * 137 % 10000) / 100,
            "at": None if i % 13 == 0 else T0 + dt.timedelta(seconds=i * 61, microseconds=i),
            "name": f"Zeile {i} — ünïcødé ☃" if i % 7 else None,
            "flag": i % 2 == 0,
            "ratio": i / 7,
            "data": None if i % 5 == 0 else bytes([i % 256, 0, 255]),
        }
        for i in range(1, n + 1)
    ]


def test_verify_agrees_across_mariadb_and_parquet_types_then_finds_each_change(
    tmp_path: Path, pg_factory: Any, mariadb_factory: Any, spark: Any
) -> None:
    source, maria = pg_factory.create("typed_src"), mariadb_factory.create("typed_dst")
    execute(
        source,
        "CREATE TABLE typed (id integer PRIMARY KEY, amount numeric(12, 2), at timestamptz, "
        "name text, flag boolean, ratio double precision, data bytea)",
    )
    rows = _typed_rows(60)
    rows[40]["name"] = "far too long for the target's column"  # row 41: refused by MariaDB
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO typed VALUES (:id, :amount, :at, :name, :flag, "
                             ":ratio, :data)"), rows)  # fmt: skip
    engine.dispose()
    execute(
        maria,
        "CREATE TABLE typed (id integer PRIMARY KEY, amount decimal(12, 2), at datetime(6), "
        "name varchar(30), flag boolean, ratio double, data blob)",
    )
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  to_maria: {{kind: sql, url: '{source}', table: typed, key: id, target: maria.typed}}
  to_lake: {{kind: sql, url: '{source}', table: typed, key: id, target: lake.typed}}
targets:
  maria: {{kind: jdbc, url: '{maria}'}}
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 25, max_wait: 50ms}}
""")  # fmt: skip
    assert drain(cfg, path, spark).exit_code == 1  # the refused row
    report = verify_config(spark, cfg)
    assert found(report) == {"to_maria": {"rejected": [[41]]}}
    assert [t.checked for t in report.tables] == [60, 60]

    execute(
        maria,
        "DELETE FROM typed WHERE id = 4",
        "UPDATE typed SET at = at + INTERVAL 1 MICROSECOND WHERE id = 9",
        "UPDATE typed SET data = NULL WHERE id = 12",
        "UPDATE typed SET flag = NOT flag WHERE id = 16",
        "INSERT INTO typed (id, name) VALUES (61, 'added')",
    )
    _tamper_parquet(spark, tmp_path / "lake" / "typed")
    report = verify_config(spark, cfg)
    assert found(report) == {
        "to_maria": {"missing": [[4]], "different": [[9], [12], [16]], "extra": [[61]],
                     "rejected": [[41]]},
        "to_lake": {"missing": [[4]], "different": [[9], [20]], "extra": [[99]],
                    "duplicate": [[30]]},
    }  # fmt: skip


def _tamper_parquet(spark: Any, folder: Path) -> None:
    """Drop key 4, change keys 9 (a timestamp) and 20 (a decimal), add key 99, key 30 twice."""
    import pyspark.sql.functions as F

    table = spark.read.parquet(str(folder))
    key = F.col("id")
    changed = (
        table.where(key != 4)
        .withColumn("at", F.when(key == 9, F.col("at") + F.expr("INTERVAL 1 SECOND"))
                    .otherwise(F.col("at")))
        .withColumn("amount", F.when(key == 20, F.col("amount") + F.lit(Decimal("0.01")))
                    .otherwise(F.col("amount")).cast(table.schema["amount"].dataType))
        .unionByName(table.where(key == 1).withColumn("id", F.lit(99).cast("int")))
        .unionByName(table.where(key == 30))
    )  # fmt: skip
    changed.coalesce(1).write.parquet(str(folder.parent / "tampered"))
    for old in folder.glob("batch-*.parquet"):
        old.unlink()
    [written] = (folder.parent / "tampered").glob("part-*.parquet")
    written.rename(folder / "batch-x.parquet")


def test_equal_values_in_other_types_agree_and_a_moved_null_does_not(spark: Any) -> None:
    from spark_jobs.verify.compare import compare

    source = spark.createDataFrame(
        [(1, Decimal("12.50"), True, None, 5), (2, Decimal("3.00"), False, 7, None),
         (3, Decimal("1.10"), True, 1, 2)],
        "id int, amount decimal(12,4), flag boolean, a int, b int",
    )  # fmt: skip
    target = spark.createDataFrame(
        [(1, Decimal("12.5"), 1, None, 5), (2, Decimal("3"), 0, None, 7),
         (3, Decimal("1.1"), 1, 1, 2)],
        "ID int, AMOUNT decimal(10,2), flag tinyint, a int, b int",
    )  # fmt: skip
    diff = compare(spark, source, target, ["id"], label="t")
    assert diff.first["different"] == [[2]]
    assert diff.counts == {"missing": 0, "extra": 0, "different": 1, "rejected": 0, "duplicate": 0}
    diff.release()


# -- limits: a verify reads its share, at the rate --------------------------------------------


def test_a_rate_limited_source_is_read_at_its_share_beside_a_daemon(
    tmp_path: Path, spark: Any
) -> None:
    from scheduler.ledger import Ledger
    from scheduler.verify_limits import ReadShare
    from tests.helpers import FakeClock

    rows = [(i, f"row {i} ✓") for i in range(1, 601)]
    for name in ("src", "dst"):
        with sqlite3.connect(tmp_path / f"{name}.db") as conn:
            conn.execute("CREATE TABLE t (id integer PRIMARY KEY, body text)")
            conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    path, cfg = write_config(tmp_path, """
ledger: sqlite:///ledger.db
sources:
  t:
    kind: sql
    url: sqlite:///src.db
    table: t
    key: id
    mode: sweep
    limits: {max_connections: 2, max_rows_per_s: 400}
    target: dst.t
targets:
  dst: {kind: jdbc, url: 'sqlite:///dst.db'}
""")  # fmt: skip
    daemon = Ledger(cfg.ledger, owner="daemon-a")  # a daemon on the ledger: the limits are halved
    daemon.owners.register()
    clock = FakeClock(0.0)
    seen: list[list[str]] = []

    def wait(seconds: float) -> None:  # what the verify waits, on the test's clock
        seen.append(daemon.owners.live())
        clock.now += seconds

    try:
        report = verify_config(spark, cfg, share=ReadShare(cfg, ["t"], clock=clock, wait=wait))
    finally:
        daemon.close()
    [table] = report.tables
    assert table.equal and table.checked == 600, table
    assert table.read_rate == 200  # half of 400
    # It joined as one more reader, after the daemon's next heartbeat (5 s + 1 s), then
    # read 600 rows at 200 rows/s in slices of 0.5 s: the last slice is not waited for.
    assert any(o.startswith("verify:") for o in seen[0]), seen[0]
    assert 6 + (600 - 100) / 200 <= clock.now <= 6 + 600 / 200 + 0.5, clock.now
    assert daemon.owners.live() == ["daemon-a"]  # gone again
