"""End to end: real sources, the real Spark import job, real targets.

Each migration moves several times ``batch.max_items`` rows, so that several
batches and several buffer refills happen; the rows are extracted by Spark
JDBC (the scheduler only reads keys) and the target is compared with the
source key by key and column by column.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.daemon import Daemon
from scheduler.ledger import Ledger
from sinks.spark import SparkSink
from tests.helpers import assert_same_rows, fetch_rows, seed_orders, write_config

ROWS = 2_000
SMALL_BATCHES = """
batch: {max_items: 300, max_wait: 200ms}
backpressure: {max_pending: 900, resume_below: 300, max_importing_batches: 2}
spark: {master: "local[2]", max_concurrent_imports: 2}
"""


def run_until_drained(cfg, path: Path, spark) -> Daemon:  # type: ignore[no-untyped-def]
    """Run a daemon in-process on the shared SparkSession; it must exit 0."""
    daemon = Daemon(cfg, config_path=str(path), sink=SparkSink(cfg, spark=spark))
    try:
        summary = daemon.run(until_drained=True)
    finally:
        daemon.close()
    assert summary.exit_code == 0, summary
    return daemon


def sql_source(
    name: str, url: str, target: str, buffer: str = "{capacity: 700, replenish_below: 200}"
) -> str:
    return f"""
  {name}:
    kind: sql
    url: {url}
    table: orders
    key: id
    buffer: {buffer}
    target: {target}
"""


@pytest.mark.spark
@pytest.mark.postgres
def test_postgresql_to_postgresql(tmp_path: Path, pg_factory, spark) -> None:  # type: ignore[no-untyped-def]
    shop = pg_factory.create("shop")
    warehouse = pg_factory.create("warehouse")
    seed_orders(shop, ROWS)
    path, cfg = write_config(
        tmp_path,
        f"ledger: sqlite:///ledger.db\nsources:{sql_source('orders', shop, 'warehouse.orders')}"
        f"targets:\n  warehouse: {{kind: jdbc, url: '{warehouse}'}}\n{SMALL_BATCHES}",
    )
    daemon = run_until_drained(cfg, path, spark)

    assert assert_same_rows(shop, "orders", warehouse, "orders") == ROWS
    progress = {p.source: p for p in Ledger(cfg.ledger).reads.progress()}
    assert set(progress["orders"].states) == {"done"}
    assert progress["orders"].states["done"] >= ROWS / 300  # several batches
    assert progress["orders"].rows == ROWS
    assert daemon.loop is not None and daemon.loop.stats.rows_by_target == {
        "warehouse.orders": ROWS
    }
    with sa.create_engine(warehouse).connect() as conn:
        pk = sa.inspect(conn).get_pk_constraint("orders")["constrained_columns"]
        commits = conn.scalar(sa.text("SELECT count(*) FROM _sluice_commits"))
    assert pk == ["id"]
    assert commits == progress["orders"].states["done"]


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.mariadb
def test_mariadb_to_postgresql(tmp_path: Path, mariadb_factory, pg_factory, spark) -> None:  # type: ignore[no-untyped-def]
    legacy = mariadb_factory.create("legacy")
    warehouse = pg_factory.create("warehouse")
    seed_orders(legacy, ROWS)
    path, cfg = write_config(
        tmp_path,
        f"ledger: sqlite:///ledger.db\nsources:{sql_source('legacy', legacy, 'warehouse.orders')}"
        f"targets:\n  warehouse: {{kind: jdbc, url: '{warehouse}'}}\n{SMALL_BATCHES}",
    )
    run_until_drained(cfg, path, spark)
    assert assert_same_rows(legacy, "orders", warehouse, "orders") == ROWS


@pytest.mark.spark
def test_sqlite_to_parquet_and_restart_does_nothing_twice(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    shop = f"sqlite:///{tmp_path / 'shop.db'}"
    seed_orders(shop, ROWS)
    text = (
        f"ledger: sqlite:///ledger.db\nsources:{sql_source('orders', shop, 'lake.orders')}"
        f"targets:\n  lake: {{kind: parquet, path: ./lake}}\n{SMALL_BATCHES}"
    )
    path, cfg = write_config(tmp_path, text)
    run_until_drained(cfg, path, spark)

    frame = spark.read.parquet(str(tmp_path / "lake" / "orders"))
    assert frame.count() == ROWS
    assert sorted(frame.columns) == ["amount", "customer", "flag", "id", "placed_at"]
    written = {row["id"]: row for row in frame.collect()}
    source = fetch_rows(shop, "orders")
    assert written.keys() == source.keys()
    some = source[30]
    assert str(written[30]["customer"]) == some[1] and f"{written[30]['amount']:.2f}" == some[0]
    # SQLite keeps DATETIME as text; the time of day must survive the read.
    assert written[30]["placed_at"].strftime("%Y-%m-%d %H:%M:%S") == some[4][:19] != "NULL"

    # A second run on the same ledger finds nothing new and writes nothing.
    seed_more = sa.create_engine(shop)
    with seed_more.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO orders (id, customer, amount, flag) VALUES (999999, 'late', 1, 0)")
        )
    seed_more.dispose()
    daemon = run_until_drained(cfg, path, spark)
    assert daemon.loop is not None and daemon.loop.stats.rows == 1
    assert spark.read.parquet(str(tmp_path / "lake" / "orders")).count() == ROWS + 1


@pytest.mark.spark
@pytest.mark.sqs
def test_sqs_to_parquet_with_duplicates_and_poison(  # type: ignore[no-untyped-def]
    tmp_path: Path, moto_server: str, sqs_queue, spark
) -> None:
    import json

    import boto3

    url = sqs_queue("events")
    client = boto3.client(
        "sqs", region_name="us-east-1", endpoint_url=moto_server,
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )
    bodies = [
        json.dumps({"id": i, "kind": "click" if i % 2 else "view", "score": i / 4,
                    "meta": {"n": i}} | ({} if i % 5 else {"extra": True}))
        for i in range(1, 201)
    ]
    bodies += bodies[:20]  # 10% delivered twice
    bodies += ["not json", json.dumps({"no_id": 1})]
    for start in range(0, len(bodies), 10):
        client.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(n), "MessageBody": b}
                     for n, b in enumerate(bodies[start : start + 10])],
        )
    path, cfg = write_config(
        tmp_path,
        f"""
ledger: sqlite:///ledger.db
sources:
  events:
    kind: sqs
    queue_url: {url}
    endpoint_url: {moto_server}
    access_key_id: testing
    secret_access_key: testing
    key: id
    wait_time: 1s
    visibility_timeout: 30s
    drain_quiet: 1s  # no other consumer: drained one quiet second after the last message
    buffer: {{capacity: 120, replenish_below: 40}}
    target: lake.events
targets:
  lake: {{kind: parquet, path: ./lake}}
{SMALL_BATCHES}
""",
    )
    run_until_drained(cfg, path, spark)

    frame = spark.read.parquet(str(tmp_path / "lake" / "events"))
    ids = [row["id"] for row in frame.select("id").collect()]
    assert sorted(ids) == list(range(1, 201))  # every key once, duplicates collapsed
    assert dict(frame.dtypes)["score"] == "double" and dict(frame.dtypes)["id"] == "bigint"
    five = frame.where("id = 5").first()
    assert five is not None and five["extra"] is True and json.loads(five["meta"]) == {"n": 5}
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert Ledger(cfg.ledger).reads.poison_count("events") == 2
