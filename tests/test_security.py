"""Identifiers from config are quoted, never pasted; passwords never shown.

- A table, key and column whose names carry SQL (``orders; DROP TABLE x``)
  are migrated by a real ``sluice run`` from SQLite and from PostgreSQL into
  a PostgreSQL target whose table name carries SQL too; a sentinel table
  ``x`` in every database involved must still be there, and every row must
  arrive.
- Passwords given as ``${ENV}`` (PostgreSQL URLs, where trust auth ignores
  them, and the SQS secret key, which moto ignores) must not appear in
  anything a user or operator sees: the run's output (sluice's and Spark's
  logs), ``sluice status`` (text and JSON), ``sluice plan``, ``validate``,
  error messages of a failing start and of a dead batch, and the Spark job
  descriptions and plans (read from Spark's event log, which is what the
  Spark UI and history server show).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import DatabaseFactory

SLUICE = str(Path(sys.executable).parent / "sluice")
SECRET = "sekrit-Pg-7f3a9c"  # the PostgreSQL password
AWS_SECRET = "sekrit-Aws-51be0d"  # the SQS secret access key
EVIL_TABLE = "orders; DROP TABLE x"
EVIL_KEY = "id; DROP TABLE x"
EVIL_COLUMN = 'note"); DROP TABLE x; --'
ROWS = 500


def run(*args: str, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "AWS_EC2_METADATA_DISABLED": "true",
            **(env or {})}
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, timeout=timeout,
                          env=full, check=False)


def make_sentinel(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE x (n INTEGER)")
        conn.exec_driver_sql("INSERT INTO x VALUES (42)")
    engine.dispose()


def sentinel_intact(url: str) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT n FROM x").scalar_one() == 42
    except sa.exc.DBAPIError:
        return False
    finally:
        engine.dispose()


def seed_evil(url: str) -> None:
    """The table ``orders; DROP TABLE x`` with key ``id; DROP TABLE x``, and a sentinel."""
    make_sentinel(url)
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    table = sa.Table(
        EVIL_TABLE, meta,
        sa.Column(EVIL_KEY, sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(EVIL_COLUMN, sa.String(40)),
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [
            {EVIL_KEY: i, EVIL_COLUMN: f"it's row {i}; DROP TABLE x"} for i in range(1, ROWS + 1)
        ])
    engine.dispose()


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(300)
@pytest.mark.parametrize("source_kind", ["sqlite", pytest.param("postgres")])
def test_identifiers_carrying_sql_are_quoted_harmlessly(
    tmp_path: Path, pg_factory: DatabaseFactory, source_kind: str
) -> None:
    source = (f"sqlite:///{tmp_path / 'shop.db'}" if source_kind == "sqlite"
              else pg_factory.create("evil_src"))
    target = pg_factory.create("evil_tgt")
    ledger = pg_factory.create("evil_ledger")
    for url in (target, ledger):
        make_sentinel(url)
    seed_evil(source)
    config = tmp_path / "sluice.yaml"
    config.write_text(f"""
ledger: {ledger}
sources:
  orders:
    kind: sql
    url: "{source}"
    table: {json.dumps(EVIL_TABLE)}
    key: {json.dumps(EVIL_KEY)}
    where: "1 = 1"
    buffer: {{capacity: 400, replenish_below: 100}}
    target: {json.dumps("warehouse." + EVIL_TABLE)}
targets:
  warehouse: {{kind: jdbc, url: "{target}"}}
batch: {{max_items: 200, max_wait: 100ms}}
retry: {{max_attempts: 1}}
""")
    done = run("run", str(config), "--until-drained")
    intact = {name: sentinel_intact(url) for name, url in
              (("source", source), ("target", target), ("ledger", ledger))}
    assert all(intact.values()), f"table x was dropped: {intact}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    engine = sa.create_engine(target)
    with engine.connect() as conn:
        moved = sa.Table(EVIL_TABLE, sa.MetaData(), autoload_with=conn)
        rows = dict(conn.execute(sa.select(moved.c[EVIL_KEY], moved.c[EVIL_COLUMN])).all())
    engine.dispose()
    assert rows == {i: f"it's row {i}; DROP TABLE x" for i in range(1, ROWS + 1)}


# -- passwords ------------------------------------------------------------------------------


def secret_free(what: str, text: str) -> None:
    for secret in (SECRET, AWS_SECRET):
        assert secret not in text, f"{what} shows a password:\n{text[-3000:]}"


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.sqs
@pytest.mark.timeout(300)
def test_passwords_from_the_environment_never_show(
    tmp_path: Path, pg_factory: DatabaseFactory, moto_server: str, sqs_queue: Any
) -> None:
    from tests.helpers import seed_orders

    def with_password(url: str) -> str:
        return sa.make_url(url).set(password="${PGPASSWORD}").render_as_string(
            hide_password=False
        )

    shop, warehouse, ledger = (pg_factory.create(n) for n in ("pw_shop", "pw_wh", "pw_ledger"))
    seed_orders(shop, 300)
    seed_orders(shop, 50, table="broken")
    engine = sa.create_engine(warehouse)  # a target table that cannot take `broken`
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE broken (id integer PRIMARY KEY, customer text, amount numeric, "
            "flag smallint, placed_at integer)"
        )
    engine.dispose()
    queue = sqs_queue("pw")
    import boto3

    boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                 aws_access_key_id="testing", aws_secret_access_key="testing").send_message(
        QueueUrl=queue, MessageBody=json.dumps({"id": 1, "what": "hello"}))
    events_dir = tmp_path / "spark-events"
    events_dir.mkdir()
    config = tmp_path / "sluice.yaml"
    config.write_text(f"""
ledger: {with_password(ledger)}
spark:
  conf: {{spark.eventLog.enabled: "true", spark.eventLog.compress: "false",
         spark.eventLog.dir: "file://{events_dir}"}}
sources:
  orders: {{kind: sql, url: "{with_password(shop)}", table: orders, key: id,
           target: warehouse.orders}}
  broken: {{kind: sql, url: "{with_password(shop)}", table: broken, key: id,
           target: warehouse.broken}}
  events:
    kind: sqs
    queue_url: {queue}
    endpoint_url: {moto_server}
    access_key_id: testing
    secret_access_key: ${{AWS_SECRET}}
    wait_time: 1s
    drain_quiet: 1s
    target: warehouse.events
targets:
  warehouse: {{kind: jdbc, url: "{with_password(warehouse)}"}}
batch: {{max_items: 200, max_wait: 100ms}}
retry: {{max_attempts: 1}}
""")
    env = {"PGPASSWORD": SECRET, "AWS_SECRET": AWS_SECRET}

    done = run("run", str(config), "--until-drained", "-v", env=env)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]  # broken is dead
    assert "dead batches 1" in done.stdout
    secret_free("sluice run (stdout and stderr, with Spark's logs)", done.stdout + done.stderr)

    status = run("status", str(config), env=env)
    assert "dead broken batch" in status.stdout and "placed_at" in status.stdout, status.stdout
    secret_free("sluice status", status.stdout + status.stderr)
    as_json = run("status", str(config), "--json", env=env)
    secret_free("sluice status --json", as_json.stdout + as_json.stderr)
    for command in ("validate", "plan"):
        shown = run(command, str(config), env=env)
        secret_free(f"sluice {command}", shown.stdout + shown.stderr)

    # The Spark side: every job description, plan and property Spark recorded.
    logs = [p for p in events_dir.rglob("*") if p.is_file()]
    assert logs, "Spark wrote no event log"
    events = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "sluice import" in events  # the job descriptions are in there
    secret_free("the Spark event log (UI, history server)", events)
    # Manifests, per-batch logs and anything else sluice left in its folders.
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".yaml" and events_dir not in path.parents:
            secret_free(str(path), path.read_text(errors="replace"))

    # Errors at start: a database that cannot be reached, a bad config.
    unreachable = config.with_name("unreachable.yaml")
    unreachable.write_text(config.read_text().replace("127.0.0.1:5432", "127.0.0.1:1", 1))
    failed = run("run", str(unreachable), "--until-drained", env=env)
    assert failed.returncode == 1 and "127.0.0.1:1" in failed.stderr, failed.stderr
    secret_free("an unreachable ledger's error", failed.stdout + failed.stderr)
    broken = config.with_name("broken.yaml")
    broken.write_text(config.read_text().replace("table: orders", "table: orders, tabel: x"))
    failed = run("run", str(broken), "--until-drained", env=env)
    assert failed.returncode == 2 and "tabel" in failed.stderr, failed.stderr
    secret_free("a config error", failed.stdout + failed.stderr)


def test_a_short_secret_does_not_mangle_status(tmp_path: Path) -> None:
    from config.loader import load_config
    from config.models import RetryConfig
    from scheduler.ledger import Ledger, fingerprint

    config = tmp_path / "sluice.yaml"
    config.write_text("""
ledger: sqlite:///ledger.db
sources:
  events: {kind: sqs, queue_url: "http://127.0.0.1:1/1/q", access_key_id: t,
           secret_access_key: t, target: lake.events}
targets:
  lake: {kind: parquet, path: ./lake}
""")
    cfg = load_config(config)
    ledger = Ledger(cfg.ledger)
    try:
        ledger.sources.register("events", fingerprint(cfg.sources["events"]))
        ledger.claim_keys("b1", "events", "lake.events", [[1]], payloads=['{"id": 1}'],
                          begin=True)
        ledger.fail("b1", "column 'placed_at' is INTEGER in the table", RetryConfig(max_attempts=1))
    finally:
        ledger.close()
    shown = run("status", str(config))
    assert "column 'placed_at' is INTEGER in the table" in shown.stdout, shown.stdout
