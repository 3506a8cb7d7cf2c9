"""Where is this record? ``sluice where`` and the daemon's ``/record``.

A live daemon migrates a keyset source and a sweep source (PostgreSQL) and an
SQS queue (moto_server) into a PostgreSQL target, with a PostgreSQL ledger.
Its sink holds every batch until the test decides: per source the first
batch is done (its commit recorded in the target's ``_sluice_commits``, as the
import job records it), the second fails past its attempts (dead), the third
stays importing. Then a key of each, and one never seen, is asked of the CLI
and of ``/record`` on the daemon's own HTTP server, which must agree.

Apart from that: ranges of a text key are found in the database's collation
(PostgreSQL, MariaDB), a ledger of an older schema is read as it is, bad
input is an error that names it, and a real Spark import's commit is found
in a Parquet and a JDBC target.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from config.loader import load_config
from scheduler.cli import app
from scheduler.daemon import Daemon
from scheduler.ledger import Checkpoint, Ledger, LedgerReads
from scheduler.observe.http import serve
from scheduler.observe.record import RecordFinder, RecordRoute
from spark_jobs.common.manifest import Manifest
from spark_jobs.load.jdbc_tables import commits_table
from tests.conftest import need
from tests.helpers import WatchedSink, seed_orders, wait_until

SLUICE = str(Path(sys.executable).parent / "sluice")
ROWS = 30  # per source: three batches of ten

CONFIG = """
ledger: "{ledger}"
metrics_port: {port}
sources:
  orders: {{kind: sql, url: "{shop}", table: orders, key: id, target: wh.orders,
            page_size: 10, buffer: {{capacity: 100, replenish_below: 20}}}}
  customers: {{kind: sql, url: "{shop}", table: customers, key: [region, id], mode: sweep,
               target: wh.customers, buffer: {{capacity: 100, replenish_below: 20}}}}
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{endpoint}",
           access_key_id: testing, secret_access_key: testing, wait_time: 1s,
           visibility_timeout: 300s, target: wh.events,
           buffer: {{capacity: 100, replenish_below: 20}}}}
targets:
  wh: {{kind: jdbc, url: "{warehouse}"}}
batch: {{max_items: 10, max_wait: 50ms}}
backpressure: {{max_pending: 1000, resume_below: 500, max_importing_batches: 30}}
retry: {{max_attempts: 1, backoff: 1s}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def where(config: Path, source: str, *key: object, as_json: bool = True) -> Any:
    """``sluice where`` in this process; the parsed JSON answer (or the text)."""
    args = ["where", str(config), "--source", source, *(a for k in key for a in ("--key", str(k)))]
    done = CliRunner().invoke(app, [*args, "--json"] if as_json else args)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout) if as_json else done.stdout


def record(port: int, query: str) -> tuple[int, Any]:
    """GET ``/record?{query}``: the status and the JSON body."""
    url = f"http://127.0.0.1:{port}/record?{query}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def without_lease(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without the lease, which the daemon's heartbeat renews between two reads."""
    if answer.get("batch"):
        answer = {**answer, "batch": {**answer["batch"], "lease_until": None}}
    return answer


# -- the live daemon -----------------------------------------------------------------------


@dataclass
class Run:
    """The daemon's run the tests ask about: its config, port and the batches per outcome."""

    config: Path
    port: int
    done: dict[str, Manifest]
    dead: dict[str, Manifest]
    importing: dict[str, Manifest]
    warehouse: str


def _seed(shop: str) -> None:
    seed_orders(shop, ROWS)  # ids 3, 6, … 90
    engine = sa.create_engine(shop)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE customers (region VARCHAR(10), id INTEGER, "
                "name TEXT, PRIMARY KEY (region, id))"
            )
        )
        conn.execute(
            sa.text("INSERT INTO customers VALUES (:r, :i, 'c')"),
            [{"r": ("eu", "us", "apac")[i % 3], "i": i} for i in range(ROWS)],
        )
    engine.dispose()


def _record_commit(warehouse: str, manifest: Manifest) -> None:
    """What the import job writes with a batch's rows: its commit row in ``_sluice_commits``."""
    engine = sa.create_engine(warehouse)
    table = commits_table(sa.MetaData())
    table.create(engine, checkfirst=True)
    with engine.begin() as conn:
        conn.execute(
            table.insert().values(
                batch_id=manifest.batch_id,
                token=manifest.token,
                rows=manifest.items,
                committed_at=dt.datetime.now(dt.UTC),
            )
        )
    engine.dispose()


def _states(ledger: str) -> dict[str, str]:
    engine = sa.create_engine(ledger)
    with engine.connect() as conn:
        found = dict(conn.execute(sa.text("SELECT id, state FROM sluice_batches")).all())
    engine.dispose()
    return found


@pytest.fixture(scope="module")
def run(pg_factory, moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("where")
    shop, warehouse, ledger = (pg_factory.create(n) for n in ("shop", "wh", "ledger"))
    _seed(shop)
    sqs = boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=moto_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    queue = sqs.create_queue(QueueName=f"sluice-where-{free_port()}")["QueueUrl"]
    for start in range(0, ROWS, 10):
        sqs.send_message_batch(QueueUrl=queue, Entries=[
            {"Id": str(i), "MessageBody": json.dumps({"id": 1000 + i, "kind": "e"})}
            for i in range(start, start + 10)
        ])  # fmt: skip
    port = free_port()
    config = folder / "sluice.yaml"
    config.write_text(
        CONFIG.format(
            ledger=ledger,
            port=port,
            shop=shop,
            queue=queue,
            endpoint=moto_server,
            warehouse=warehouse,
        )
    )
    sink = WatchedSink(auto_complete=False)
    daemon = Daemon(load_config(config), config_path=str(config), sink=sink)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    sources = ("orders", "customers", "events")

    def firsts() -> dict[str, list[Manifest]]:
        return {s: [m for m in sink.submitted if m.source == s][:3] for s in sources}

    try:
        wait_until(
            lambda: all(len(m) == 3 for m in firsts().values()),
            "three batches of each source",
            event=sink.arrived,
        )
        batches = firsts()
        done = {s: m[0] for s, m in batches.items()}
        dead = {s: m[1] for s, m in batches.items()}
        importing = {s: m[2] for s, m in batches.items()}
        for manifest in done.values():
            _record_commit(warehouse, manifest)
            sink.complete(manifest.batch_id)
        for manifest in dead.values():
            sink.fail(manifest.batch_id, RuntimeError("the target refused: value too long"))
        expected = {
            **{m.batch_id: "done" for m in done.values()},
            **{m.batch_id: "dead" for m in dead.values()},
            **{m.batch_id: "importing" for m in importing.values()},
        }
        # The loop records the outcomes on its own thread: polled in the ledger.
        wait_until(
            lambda: {k: _states(ledger).get(k) for k in expected} == expected,
            "the outcomes in the ledger",
        )
        yield Run(config, port, done, dead, importing, warehouse)
    finally:
        assert daemon.loop is not None
        daemon.loop.request_stop()
        sink.auto_complete = True
        for batch_id in sink.held():
            sink.complete(batch_id)
        runner.join(timeout=60)
        daemon.close()
        sqs.delete_queue(QueueUrl=queue)
        sqs.close()


def _key(source: str, manifest: Manifest, inside: bool = False) -> list[Any]:
    """A key the batch holds: a range's end (or, ``inside``, a key just past its start)."""
    if manifest.kind == "range":
        assert manifest.hi is not None
        return [manifest.lo[0] + 1] if inside and manifest.lo else list(manifest.hi)
    return list(manifest.keys[-1])


CASES = [
    ("done", False),
    ("dead", False),
    ("importing", False),
    ("importing", True),
]


@pytest.mark.postgres
@pytest.mark.sqs
@pytest.mark.timeout(180)
@pytest.mark.parametrize("source", ["orders", "customers", "events"])
def test_a_key_done_dead_importing_and_never_seen(run: Run, source: str) -> None:
    for outcome, inside in CASES:
        manifest: Manifest = getattr(run, outcome)[source]
        key = _key(source, manifest, inside)
        answer = where(run.config, source, *key)
        assert answer["seen"] is True and answer["key"] == key
        batch = answer["batch"]
        assert (batch["id"], batch["state"], batch["kind"]) == (
            manifest.batch_id,
            outcome,
            manifest.kind,
        )
        assert batch["attempts"] == 1 and batch["owner"]
        if manifest.kind == "range":
            assert (batch["lo"], batch["hi"]) == (manifest.lo, manifest.hi)
        commit = answer["target"]
        assert commit["target"] == f"wh.{source}"
        if outcome == "done":
            assert batch["done_at"] is not None and batch["error"] is None
            assert (commit["committed"], commit["token"], commit["rows"]) == (
                True,
                manifest.token,
                manifest.items,
            )
        else:
            assert batch["done_at"] is None and commit["committed"] is False
        if outcome == "dead":
            assert "the target refused: value too long" in batch["error"]

        status, over_http = record(
            run.port, "&".join([f"source={source}", *(f"key={k}" for k in key)])
        )
        assert status == 200, over_http
        assert without_lease(over_http) == without_lease(answer)

    unseen = {"orders": [10_000], "customers": ["eu", 999], "events": [99_999]}[source]
    answer = where(run.config, source, *unseen)
    assert answer["seen"] is False and answer["batch"] is None and answer["target"] is None
    assert answer["note"].startswith("not seen")
    status, over_http = record(
        run.port, "&".join([f"source={source}", *(f"key={k}" for k in unseen)])
    )
    assert (status, over_http) == (200, answer)


@pytest.mark.postgres
@pytest.mark.sqs
@pytest.mark.timeout(180)
def test_the_text_answer_says_the_state_the_error_and_the_commit(run: Run) -> None:
    done = where(run.config, "orders", *run.done["orders"].hi or [], as_json=False)
    assert f"held by batch {run.done['orders'].batch_id}" in done
    assert "done at" in done and "wh.orders: committed in _sluice_commits (token 1" in done
    dead = where(run.config, "customers", *_key("customers", run.dead["customers"]), as_json=False)
    assert "state     dead" in dead and "the target refused: value too long" in dead
    assert "no commit of this batch" in dead
    unseen = where(run.config, "orders", "10000", as_json=False)
    assert unseen.strip() == (
        "orders key [10000]: not seen: past every range of orders claimed so far (up to [90])"
    )


@pytest.mark.postgres
@pytest.mark.sqs
@pytest.mark.timeout(180)
def test_bad_input_is_an_error_that_names_it(run: Run) -> None:
    cases = {
        # query, what the error must name
        "source=nope&key=1": "no source 'nope'",
        "source=orders&key=1&key=2": "key of 1 column(s) (id): give one value per column",
        "source=customers&key=eu": "key of 2 column(s) (region, id)",
        "source=orders&key=abc": "key column id is INTEGER: 'abc' is not one",
        "source=customers&key=eu&key=1.5": "key column id is INTEGER: '1.5' is not one",
        "source=events&key=1&key=2": "has a key of one field",
        "source=orders": "/record needs source= once and key= once per key column",
        "source=orders&keys=1": "unknown parameter(s) keys",
    }
    for query, named in cases.items():
        status, body = record(run.port, query)
        assert status == 400 and named in body["error"], (query, body)
    with urllib.request.urlopen(f"http://127.0.0.1:{run.port}/metrics", timeout=30) as response:
        assert b"sluice_ledger_batches" in response.read()
    status, body = 0, {}
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{run.port}/nowhere", timeout=30)
    except urllib.error.HTTPError as error:
        status, body = error.code, json.loads(error.read())
    assert status == 404 and body["paths"] == ["/", "/metrics", "/record", "/status.json"]

    # The CLI: the same errors, on stderr, exit code 2 (bad usage).
    for args, named in (
        (["--source", "nope", "--key", "1"], "no source 'nope' (sources: orders, customers"),
        (["--source", "customers", "--key", "eu"], "key of 2 column(s) (region, id)"),
        (["--source", "orders", "--key", "x"], "key column id is INTEGER: 'x' is not one"),
    ):
        done = subprocess.run(
            [SLUICE, "where", str(run.config), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2 and named in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and done.stdout == ""


# -- without a daemon ------------------------------------------------------------------------


def test_a_ledger_never_created_has_seen_nothing_and_is_not_created(tmp_path: Path) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 10)
    config = tmp_path / "sluice.yaml"
    config.write_text("""
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders}
targets:
  lake: {kind: parquet, path: ./lake}
""")
    answer = where(config, "orders", 3)
    assert answer["seen"] is False and "nothing ran yet" in answer["note"]
    assert not (tmp_path / "sluice-ledger.db").exists()
    done = CliRunner().invoke(app, ["where", str(config), "--source", "orders", "--key", "x"])
    assert done.exit_code == 2 and "key column id is INTEGER" in done.output


COLLATED = {
    "postgres": 'code VARCHAR(40) COLLATE "{collation}" NOT NULL',
    "mariadb": "code VARCHAR(40) NOT NULL",  # the database's default, utf8mb4_general_ci
}
WORDS = [f"{p}{i:02d}" for i in range(4) for p in ("a", "B", "c", "É", "Z", "_x", "ö", "m")]


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ],
)
def test_ranges_of_a_text_key_are_found_in_the_databases_collation(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url: str = request.getfixturevalue("pg_url" if backend == "postgres" else "mariadb_url")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        column = COLLATED[backend]
        if backend == "postgres":
            found = set(conn.scalars(sa.text("SELECT collname FROM pg_collation")))
            usable = [c for c in ("und-x-icu", "en-x-icu", "en_US.utf8") if c in found]
            need(bool(usable), "PostgreSQL has no non-binary collation here")
            column = column.format(collation=usable[0])
        conn.execute(sa.text(f"CREATE TABLE words ({column} PRIMARY KEY, n INTEGER)"))
        conn.execute(sa.text("INSERT INTO words VALUES (:c, 1)"), [{"c": w} for w in WORDS])
        ordered = list(conn.scalars(sa.text("SELECT code FROM words ORDER BY code")))
    engine.dispose()
    assert ordered != sorted(ordered), "the database orders these as Python does: no test"
    config = tmp_path / "sluice.yaml"
    config.write_text(f"""
ledger: sqlite:///ledger.db
sources:
  words: {{kind: sql, url: "{url}", table: words, key: code, target: lake.words}}
targets:
  lake: {{kind: parquet, path: ./lake}}
""")
    cfg = load_config(config)
    ledger = Ledger(cfg.ledger)
    after: Checkpoint = ledger.sources.register("words", "f" * 64)
    holder = {}
    for n, start in enumerate(range(0, len(ordered), 5)):  # ranges of five, in the db's order
        chunk = ordered[start : start + 5]
        _, after = ledger.claim_range(f"r{n}", "words", "lake.words", after, [chunk[-1]], 5)
        holder.update(dict.fromkeys(chunk, f"r{n}"))
    finder = RecordFinder(cfg, LedgerReads(ledger.engine),
                          lambda _name, src: sa.create_engine(src.url))  # fmt: skip
    try:
        found = {word: finder.find("words", [word]).batch for word in ordered}
        assert {w: b["id"] if b else None for w, b in found.items()} == holder
        assert finder.find("words", [ordered[-1] + "z"]).seen is False  # past the last range
    finally:
        finder.close()
        ledger.close()


def test_the_record_route_serves_beside_other_routes_and_closes_with_them(tmp_path: Path) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 10)
    config = tmp_path / "sluice.yaml"
    config.write_text("""
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders}
targets:
  lake: {kind: parquet, path: ./lake}
""")
    cfg = load_config(config)
    ledger = Ledger(cfg.ledger)
    after = ledger.sources.register("orders", "f" * 64)
    ledger.claim_range("r1", "orders", "lake.orders", after, [15], 5)
    ledger.close()
    route = RecordRoute(lambda: cfg)
    endpoint = serve(0, {"/record": route})
    try:
        status, body = record(endpoint.port, "source=orders&key=6")
        assert status == 200 and body["batch"]["id"] == "r1"
        assert body == where(config, "orders", 6)
        status, body = record(endpoint.port, "source=orders&key=18")
        assert status == 200 and body["seen"] is False
    finally:
        endpoint.stop()
    assert route._finder is None  # its engines were released with the endpoint


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_real_imports_commit_is_found_in_parquet_and_jdbc_targets(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    from sinks.spark import SparkSink

    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 40)
    config = tmp_path / "sluice.yaml"
    config.write_text("""
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders}
  again: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, mode: sweep,
          target: wh.orders}
targets:
  lake: {kind: parquet, path: ./lake}
  wh: {kind: jdbc, url: "sqlite:///warehouse.db"}
batch: {max_items: 25, max_wait: 50ms}
""")
    cfg = load_config(config)
    daemon = Daemon(cfg, config_path=str(config), sink=SparkSink(cfg, spark=spark))
    try:
        assert daemon.run(until_drained=True).exit_code == 0
    finally:
        daemon.close()
    for source, key in (("orders", 30), ("again", 120)):
        answer = where(config, source, key)
        batch, commit = answer["batch"], answer["target"]
        assert batch["state"] == "done" and commit["committed"] is True, answer
        assert commit["rows"] == batch["rows"] > 0 and commit["token"] == batch["token"]
