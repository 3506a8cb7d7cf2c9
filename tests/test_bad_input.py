"""Bad input: every mistake gives a clear error that names what and where, and
nothing is lost.

The user sees these through the CLI, so most tests run ``sluice`` as a real
process and check its exit code (2: bad config or usage, 1: the run failed)
and its message. Poison SQS bodies are covered by tests/test_sqs_source.py
(``test_poison_goes_to_the_dead_letter_queue``, ``…_goes_to_on_poison…``,
``test_a_message_received_too_often_is_poison``), end to end by
tests/test_migration.py (``test_sqs_to_parquet_with_duplicates_and_poison``)
and by every scenario of tests/test_exactly_once.py; here they ride along in
the end-to-end run of values a target cannot hold.

A finding that is not fixed yet is marked ``xfail(strict=True)``: the test
describes what a user should get, and the strict marker fails the suite once
it passes, until the marker is removed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import SluiceError, TargetError
from tests.conftest import DatabaseFactory
from tests.helpers import run_until_then_stop, seed_orders

SLUICE = str(Path(sys.executable).parent / "sluice")


def sluice(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "AWS_EC2_METADATA_DISABLED": "true",
            **env}
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, timeout=timeout,
                          env=full, check=False)


def write(folder: Path, text: str, name: str = "bad.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def ledger_batches(url: str) -> int:
    """Batches in a ledger (0 when it has no tables)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM sluice_batches")).scalar_one())
    except sa.exc.DBAPIError:
        return 0
    finally:
        engine.dispose()


# -- config mistakes: exit 2 before anything is touched --------------------------------------

SOURCE = "  orders: {kind: sql, url: 'sqlite:///shop.db', table: orders, key: id, " \
         "target: lake.orders}\n"
TARGETS = "targets:\n  lake: {kind: parquet, path: ./lake}\n"

MISTAKES = {
    "wrong types": (
        "ledger: sqlite:///ledger.db\nsources:\n  orders:\n    kind: sql\n"
        "    url: sqlite:///shop.db\n    table: orders\n    key: id\n    page_size: lots\n"
        "    buffer: {capacity: -5, replenish_below: 1}\n    target: lake.orders\n"
        + TARGETS + "batch: {max_items: ten, max_wait: soon}\n",
        ["sources.orders.page_size: should be a valid integer", "'lots' (bad.yaml line 8)",
         "sources.orders.buffer.capacity: should be greater than 0; got -5 (bad.yaml line 9)",
         "batch.max_items", "batch.max_wait: expected a duration such as 250ms",
         "'soon' (bad.yaml line 13)"],
    ),
    "unknown keys": (
        "ledger: sqlite:///ledger.db\nsources:\n  orders:\n    kind: sql\n"
        "    url: sqlite:///shop.db\n    table: orders\n    key: id\n    targte: lake.orders\n"
        + TARGETS + "backpresure: {max_pending: 5}\n",
        ["sources.orders.targte: unknown key; did you mean 'target'? (bad.yaml line 8)",
         "backpresure: unknown key; did you mean 'backpressure'? (bad.yaml line 11)"],
    ),
    "strategy names a missing source": (
        "ledger: sqlite:///ledger.db\nsources:\n" + SOURCE + TARGETS
        + "strategy:\n  prefer: [events, {fair: {orders: 2, customers: 1}}]\n",
        ["strategy.prefer[0]: strategy names source 'events', which is not defined "
         "(sources: orders) (bad.yaml line 7)", "strategy.prefer[1].fair.customers"],
    ),
    "empty fair": (
        "ledger: sqlite:///ledger.db\nsources:\n" + SOURCE + TARGETS + "strategy: {fair: {}}\n",
        ["strategy.fair: value should have at least 1 item", "(bad.yaml line 6)"],
    ),
    "empty prefer": (
        "ledger: sqlite:///ledger.db\nsources:\n" + SOURCE + TARGETS + "strategy:\n  prefer: []\n",
        ["strategy.prefer: list should have at least 1 item", "(bad.yaml line 7)"],
    ),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_config_mistakes_exit_2_naming_key_and_line_and_touch_nothing(
    tmp_path: Path, mistake: str
) -> None:
    text, expected = MISTAKES[mistake]
    config = write(tmp_path, text)
    for command in ("run", "validate"):
        args = [command, str(config)] + (["--until-drained"] if command == "run" else [])
        done = sluice(*args)
        assert done.returncode == 2, f"{command}: {done.returncode}\n{done.stderr}"
        shown = done.stderr.replace(f"{tmp_path}/", "")  # the file as the user named it
        for fragment in expected:
            assert fragment in shown, f"{command}: {fragment!r} not in:\n{shown}"
    # Nothing was created: no ledger, no work folder, no output.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


# -- databases and queues that cannot be reached at start -----------------------------------


@pytest.mark.parametrize("what", ["database", "sqs endpoint"])
def test_a_source_down_at_start_is_waited_for_naming_it_without_the_password(
    tmp_path: Path, what: str
) -> None:
    # Down is not wrong (sources.reach; an SQS endpoint alike): the run starts, says which
    # source and why, asks again with backoff and claims nothing; a stop ends it as a
    # drain (143).
    if what == "database":
        source = ("  orders: {kind: sql, url: 'mysql+pymysql://root:${DB_PASSWORD}@127.0.0.1:1/"
                  "legacy', table: orders, key: id, target: lake.orders}\n")
        expected = ["source orders", "did not answer at start", "127.0.0.1:1", "cannot connect",
                    "Connection refused"]  # fmt: skip
    else:
        source = ("  events: {kind: sqs, queue_url: 'http://127.0.0.1:1/123456789012/q', "
                  "endpoint_url: 'http://127.0.0.1:1', access_key_id: a, "
                  "secret_access_key: '${DB_PASSWORD}', target: lake.events}\n")
        expected = ["events: SQS did not answer at start", "source events",
                    "queue http://127.0.0.1:1/123456789012/q", "Could not connect"]
    config = write(tmp_path, f"ledger: sqlite:///ledger.db\nsources:\n{source}{TARGETS}")
    code, shown = run_until_then_stop(config, "refill failed", signal.SIGTERM,
                                      DB_PASSWORD="pw-5e6f7a")  # fmt: skip
    assert code == 143, shown
    for fragment in expected:
        assert fragment in shown, f"{fragment!r} not in:\n{shown}"
    assert "pw-5e6f7a" not in shown and "Traceback" not in shown
    assert ledger_batches(f"sqlite:///{tmp_path / 'ledger.db'}") == 0  # nothing claimed


def test_a_ledger_down_at_start_exits_1_naming_it_without_the_password(tmp_path: Path) -> None:
    ledger = "postgresql+psycopg://postgres:${DB_PASSWORD}@127.0.0.1:1/ledger"
    config = write(tmp_path, f"ledger: {ledger}\nsources:\n{SOURCE}{TARGETS}")
    done = sluice("run", str(config), "--until-drained", DB_PASSWORD="pw-5e6f7a")
    assert done.returncode == 1, done.stderr
    for fragment in ("cannot open the ledger", "127.0.0.1:1", "Connection refused"):
        assert fragment in done.stderr, f"{fragment!r} not in:\n{done.stderr}"
    assert "pw-5e6f7a" not in done.stdout + done.stderr


# -- a source table that does not fit the config ----------------------------------------------


@pytest.fixture
def shop(pg_factory: DatabaseFactory) -> str:
    """A PostgreSQL database with ``orders`` (key ``id``, 40 rows)."""
    url = pg_factory.create("bad_shop")
    seed_orders(url, 40)
    return url


@pytest.mark.postgres
def test_a_source_table_without_the_key_column_exits_2_naming_it(
    tmp_path: Path, shop: str
) -> None:
    config = write(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: order_no, target: lake.orders}}
{TARGETS}""")
    done = sluice("run", str(config), "--until-drained")
    assert done.returncode == 2, done.stderr
    assert "source orders (table 'orders' at postgresql+psycopg://postgres@127.0.0.1:5432/" \
           in done.stderr
    assert "check query failed: column orders.order_no does not exist" in done.stderr
    assert ledger_batches(f"sqlite:///{tmp_path / 'ledger.db'}") == 0


@pytest.mark.postgres
@pytest.mark.spark
def test_fixing_the_key_after_a_failed_start_needs_no_reset(tmp_path: Path, shop: str) -> None:
    text = f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: KEY, target: lake.orders}}
{TARGETS}"""
    config = write(tmp_path, text.replace("KEY", "order_no"), "sluice.yaml")
    failed = sluice("run", str(config), "--until-drained")
    assert failed.returncode == 2, failed.stderr
    assert "check query failed: column orders.order_no does not exist" in failed.stderr
    assert "Traceback" not in failed.stderr
    config.write_text(text.replace("KEY", "id"))  # the user fixes the mistake
    done = sluice("run", str(config), "--until-drained", timeout=300)
    assert "sluice reset" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.postgres
@pytest.mark.mariadb
@pytest.mark.parametrize("dialect", ["postgres", "mariadb"])
def test_a_where_that_fails_exits_2_with_the_database_s_reason(
    tmp_path: Path, pg_factory: DatabaseFactory, mariadb_factory: DatabaseFactory, dialect: str
) -> None:
    url = (pg_factory if dialect == "postgres" else mariadb_factory).create("bad_where")
    seed_orders(url, 10)
    config = write(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{url}", table: orders, key: id, where: "amount >>> 'x'",
           target: lake.orders}}
{TARGETS}""")
    done = sluice("run", str(config), "--until-drained")
    assert done.returncode == 2, done.stderr
    assert "source orders (table 'orders' at" in done.stderr
    assert "check query failed:" in done.stderr
    reason = "operator does not exist" if dialect == "postgres" else "SQL syntax"
    assert reason in done.stderr, done.stderr


@pytest.mark.postgres
@pytest.mark.timeout(120)
@pytest.mark.slow
def test_a_where_that_fails_on_some_row_ends_the_run_with_exit_1(
    tmp_path: Path, shop: str
) -> None:
    config = write(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: id,
           where: "100 / (id - 30) > -1000", target: lake.orders}}
{TARGETS}""")
    proc = subprocess.Popen(
        [SLUICE, "run", str(config), "--until-drained"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    try:
        output, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"still running after 20 s:\n{output[-2000:]}")
    assert proc.returncode == 1, output[-3000:]
    assert "division by zero" in output and "source orders" in output


# -- values the target cannot hold; poison bodies ----------------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.sqs
@pytest.mark.timeout(400)
def test_values_the_target_cannot_hold_are_set_aside_or_fail_clearly_and_nothing_is_lost(
    tmp_path: Path, pg_factory: DatabaseFactory, moto_server: str, sqs_queue: Any
) -> None:
    import boto3

    shop, warehouse = pg_factory.create("hold_shop"), pg_factory.create("hold_wh")
    seed_orders(shop, 300)  # amount = (i % 1000) / 4: 0.00 … 75.00
    seed_orders(shop, 60, table="accounts")
    engine = sa.create_engine(warehouse)
    with engine.begin() as conn:
        # amount numeric(4,2) holds at most 99.99; placed_at cannot hold a timestamp at all.
        conn.exec_driver_sql(
            "CREATE TABLE orders (id integer PRIMARY KEY, customer varchar(60), "
            "amount numeric(4,2), flag smallint, placed_at timestamp)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE accounts (id integer PRIMARY KEY, customer varchar(60), "
            "amount numeric(12,2), flag smallint, placed_at integer)"
        )
    with sa.create_engine(shop).begin() as conn:  # some amounts too big for numeric(4,2)
        conn.exec_driver_sql("UPDATE orders SET amount = amount + 100 WHERE mod(id, 7) = 0")
    queue = sqs_queue("hold")
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    good = [json.dumps({"id": i, "what": f"e{i}"}) for i in range(1, 21)]
    poison = ["not json", json.dumps({"no_id": 1}), json.dumps({"id": {"a": 1}}), "[1, 2]"]
    for body in good + poison:
        client.send_message(QueueUrl=queue, MessageBody=body)
    config = write(tmp_path, f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: id, target: warehouse.orders}}
  accounts: {{kind: sql, url: "{shop}", table: accounts, key: id, target: warehouse.accounts}}
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{moto_server}",
           access_key_id: chaos-key-id, secret_access_key: chaos-secret, wait_time: 1s,
           drain_quiet: 1s, target: warehouse.events}}
targets:
  warehouse: {{kind: jdbc, url: "{warehouse}"}}
batch: {{max_items: 100, max_wait: 100ms}}
retry: {{max_attempts: 1}}
spark: {{conf: {{spark.driver.extraJavaOptions: "-XX:TieredStopAtLevel=1"}}}}  # starts sooner
""", "sluice.yaml")

    done = sluice("run", str(config), "--until-drained", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    too_big = {i * 3 for i in range(1, 301) if (i * 3) % 7 == 0}
    assert f"dead batches 1, rejected rows {len(too_big)}" in done.stdout, done.stdout
    # Rows the target refused are set aside with the database's reason, the rest committed.
    with engine.connect() as conn:
        rejects = conn.execute(sa.text(
            "SELECT source, key, reason FROM _sluice_rejects")).all()
        kept = set(conn.scalars(sa.text("SELECT id FROM orders")))
        events = set(conn.scalars(sa.text("SELECT id FROM events")))
    assert {json.loads(key)[0] for _, key, _ in rejects} == too_big
    assert all(s == "orders" and "numeric field overflow" in r for s, _, r in rejects)
    assert kept | too_big == {i * 3 for i in range(1, 301)} and not kept & too_big
    # The batch whose column cannot hold its values is dead, and says why.
    status = sluice("status", str(config))
    assert f"{len(too_big)}" in status.stdout
    assert "dead accounts batch" in status.stdout
    assert "column 'placed_at' is integer in the table but timestamp" in status.stdout, \
        status.stdout
    # Poison bodies are recorded with their reason and deleted; good events all arrived.
    assert events == set(range(1, 21))
    ledger = sa.create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    with ledger.connect() as conn:
        reasons: dict[str, str] = dict(
            conn.execute(sa.text("SELECT body, reason FROM sluice_poison")).all()
        )
    ledger.dispose()
    assert set(reasons) == set(poison)
    assert "not JSON" in reasons["not json"] and "no key field 'id'" in reasons[poison[1]]
    assert "not a string or number" in reasons[poison[2]] and "array" in reasons["[1, 2]"]
    attrs = client.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs[
        "ApproximateNumberOfMessagesNotVisible"] == "0"

    # The cause is fixed: retry the dead batch, and nothing of accounts is lost.
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE accounts ALTER placed_at TYPE timestamp USING NULL")
    assert "requeued 1 batches" in sluice("retry", str(config), "--dead").stdout
    again = sluice("run", str(config), "--until-drained", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT count(*) FROM accounts")) == 60
    engine.dispose()


# -- values the import job must neither mistype nor change (in-process, shared SparkSession) --


def _import(spark: Any, target_url: str, source: dict[str, Any], batches: list[Any]) -> list[Any]:
    """Run ``run_import`` for each manifest; return each result or the error it raised."""
    from config.loader import load_config_text
    from spark_jobs.jobs.import_job import run_import

    text = json.dumps({
        "sources": {"src": {**source, "target": "wh.t"}},
        "targets": {"wh": {"kind": "jdbc", "url": target_url}},
    })
    cfg = load_config_text(text, "inline.yaml")
    out: list[Any] = []
    for manifest in batches:
        try:
            out.append(run_import(spark, cfg, manifest))
        except SluiceError as error:  # an error a user would see; the assertions say which
            out.append(error)
    return out


SQS = {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id"}


def _payloads(batch_id: str, *records: dict[str, Any]) -> Any:
    from spark_jobs.common.manifest import Manifest

    bodies = [json.dumps(r) for r in records]
    return Manifest(batch_id, "src", "wh.t", "payloads", len(bodies), payloads=bodies)


@pytest.mark.spark
@pytest.mark.postgres
def test_an_sqs_field_new_in_a_later_batch_fails_naming_the_column(
    spark: Any, pg_factory: DatabaseFactory
) -> None:
    target = pg_factory.create("sqs_new_field")
    first, later = _import(spark, target, SQS, [
        _payloads("b1", {"id": 1, "n": 5}),
        _payloads("b2", {"id": 2, "n": 6, "extra": "new"}),
    ])
    assert first.rows_written == 1
    assert isinstance(later, TargetError), repr(later)  # terminal: a retry cannot help
    assert not later.transient
    assert str(later) == (
        "wh.t: column 'extra' of the batch is not in the table "
        "(add it to the table, or map the batch's columns with columns:)"
    )


@pytest.mark.spark
@pytest.mark.postgres
def test_an_sqs_field_null_in_a_whole_batch_is_stored_as_null(
    spark: Any, pg_factory: DatabaseFactory
) -> None:
    target = pg_factory.create("sqs_null_field")
    results = _import(spark, target, SQS, [
        _payloads("b1", {"id": 1, "n": 5}),
        _payloads("b2", {"id": 2, "n": None}, {"id": 3}),
    ])
    assert not [r for r in results if isinstance(r, Exception)], results
    engine = sa.create_engine(target)
    with engine.connect() as conn:
        assert dict(conn.execute(sa.text("SELECT id, n FROM t")).all()) == {1: 5, 2: None, 3: None}
    engine.dispose()


@pytest.mark.spark
@pytest.mark.postgres
def test_a_fraction_is_not_silently_rounded_into_an_integer_column(
    spark: Any, pg_factory: DatabaseFactory
) -> None:
    from spark_jobs.common.manifest import Manifest

    shop, target = pg_factory.create("round_shop"), pg_factory.create("round_wh")
    seed_orders(shop, 10)  # amounts 0.25, 0.50, …
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE t (id integer PRIMARY KEY, customer text, amount integer, "
            "flag smallint, placed_at timestamp)"
        )
    source = {"kind": "sql", "url": shop, "table": "orders", "key": "id"}
    (result,) = _import(spark, target, source,
                        [Manifest("r1", "src", "wh.t", "range", 10, lo=None, hi=[30])])
    with engine.connect() as conn:
        amounts: dict[int, int] = dict(conn.execute(sa.text("SELECT id, amount FROM t")).all())
        rejects = conn.execute(sa.text("SELECT source, key, reason FROM _sluice_rejects")).all()
    engine.dispose()
    # The two whole amounts (1.00, 2.00) go in; the eight others would be
    # rounded, so they are set aside with the reason, and the batch is done.
    assert not isinstance(result, Exception), repr(result)
    assert (result.rows_read, result.rows_written, result.rows_rejected) == (10, 2, 8)
    assert amounts == {12: 1, 24: 2}
    reasons = {json.loads(key)[0]: reason for source, key, reason in rejects if source == "src"}
    assert sorted(reasons) == [3, 6, 9, 15, 18, 21, 27, 30] and len(rejects) == 8
    prefix = "column 'amount' is INTEGER in the table, which keeps no decimal places: "
    suffix = " would be rounded (the batch has NUMERIC(12, 2))"
    assert reasons[3] == f"{prefix}0.25{suffix}"
    assert all(r.startswith(prefix) and r.endswith(suffix) for r in reasons.values()), reasons
