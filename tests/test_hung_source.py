"""A source database that does not answer never holds the others back (sources.reach).

Run as users run it (``sluice run`` as a process, on its default local path), with one
source behind a proxy on loopback that the test controls: it accepts connections and
never answers, then forwards them. What is certainly the config's fault (a password, a
table, a host name) still stops the start with exit 2, naming the source and the key.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sources.reach import Away
from tests.helpers import assert_same_rows, count_rows, seed_orders, wait_until
from tests.proxy import Proxy

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # scenarios of seconds each

SLUICE = str(Path(sys.executable).parent / "sluice")
ROWS = 3_000


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5) as answer:
        return dict(json.load(answer))


def _seeded_behind_proxy(pg_url: str, connect_timeout: str | None = "2") -> tuple[Proxy, str]:
    """The three tables seeded; a proxy (hanging) to their database, and the far source's URL
    through it, with its own connect timeout as a user sets one per database (None: the
    default's)."""
    for table in ("fast_a", "fast_b", "far"):
        seed_orders(pg_url, ROWS, table=table)
    source = sa.make_url(pg_url)
    proxy = Proxy(source.port or 5432)
    query = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
    return proxy, source.set(port=proxy.port, query=query).render_as_string(False)


def _three_sources(tmp_path: Path, pg_url: str, pg_target: str, far: str, port: int,
                   more: str = "", fast: str = "",
                   extra: str = "") -> subprocess.Popen[bytes]:  # fmt: skip
    """``sluice run --until-drained`` of two sources of ``pg_url`` and one of ``far`` (the
    proxy), started; its output goes to ``run.log``. ``more`` and ``fast``: the far and the
    two others' settings; ``extra``: more of the config."""
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
metrics_port: {port}{extra}
sources:
  fast_a: {{kind: sql, url: "{pg_url}", table: fast_a, key: id, target: out.fast_a{fast}}}
  fast_b: {{kind: sql, url: "{pg_url}", table: fast_b, key: id, target: out.fast_b{fast}}}
  far: {{kind: sql, url: "{far}", table: far, key: id, target: out.far{more}}}
strategy: {{fair: {{fast_a: 1, fast_b: 1, far: 1}}}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    with (tmp_path / "run.log").open("w") as out:
        return subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"],
                                cwd=tmp_path, env=_env(), stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip


def _far_shown_failing(
    run: subprocess.Popen[bytes], pg_target: str, port: int, shown: Callable[[Any], Any]
) -> dict[str, Any]:
    """Wait for the two answering sources to drain while the far one does not answer, and
    for the page to show what ``shown`` looks for in its view of the far source; that view."""

    def drained() -> bool:
        assert run.poll() is None, "sluice ended before the far source answered"
        return count_rows(pg_target, "fast_a") == ROWS == count_rows(pg_target, "fast_b")

    wait_until(drained, "the answering sources drained", timeout=90, poll=0.5)

    def far_view() -> dict[str, Any]:
        return next(s for s in _status(port)["sources"] if s["name"] == "far")

    wait_until(lambda: shown(far_view()), "the far source's trouble on the page", timeout=30,
               poll=0.5)  # fmt: skip
    assert run.poll() is None
    return far_view()


def _finish(run: subprocess.Popen[bytes], proxy: Proxy, tmp_path: Path) -> str:
    """Let the far database answer, wait for the run's end; its output."""
    try:
        proxy.forward()
        run.wait(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        proxy.close()
        output = (tmp_path / "run.log").read_text()
        print(output[-5000:])  # shown where the test fails
    return output


def test_a_hung_database_at_start_holds_no_other_source_back_and_migrates_once_it_answers(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    proxy, far = _seeded_behind_proxy(pg_url)
    port = _free_port()
    run = _three_sources(tmp_path, pg_url, pg_target, far, port)
    try:
        # Unreachable, for how long and why (its password never).
        view = _far_shown_failing(run, pg_target, port, lambda far: far["failing_s"])
        assert "source far" in view["refill_error"] and "cannot connect" in view["refill_error"]
        assert proxy.accepted > 0
        assert count_rows(pg_target, "far") == 0
        # `sluice status` says so too, without waiting for the far database to time out.
        shown = subprocess.run([SLUICE, "status", "sluice.yaml"], cwd=tmp_path, env=_env(),
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert "unreachable now" in shown.stdout, shown.stdout
        assert "\n  far: no answer in" in shown.stdout, shown.stdout
    finally:
        output = _finish(run, proxy, tmp_path)
    assert run.returncode == 0, output
    assert "far: its database did not answer at start" in output
    for table in ("fast_a", "fast_b", "far"):
        assert assert_same_rows(pg_url, table, pg_target, table) == ROWS


def test_a_database_that_hangs_mid_run_holds_no_other_source_back_and_its_rows_land_once(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    proxy, far = _seeded_behind_proxy(pg_url)
    proxy.forward()
    port = _free_port()
    # The far table comes slowly (600 rows/s), and its keys a few hundred at a time: it is
    # mid-way, reading keys still, when its host hangs.
    run = _three_sources(tmp_path, pg_url, pg_target, far, port,
                         ", limits: {max_rows_per_s: 600}, page_size: 100,"
                         " buffer: {capacity: 600, replenish_below: 300}")  # fmt: skip
    try:
        wait_until(lambda: count_rows(pg_target, "far") > 0, "the far source's first rows",
                   timeout=60, poll=0.1)  # fmt: skip
        proxy.hang()  # its connections cut, new ones accepted and never answered
        # Its refills find its host away, or, where its keys were all read already, its
        # batches fail on connecting and its database is asked: unreachable, either way.
        view = _far_shown_failing(run, pg_target, port,
                                  lambda far: far["failing_s"] and far["refill_error"])
        assert count_rows(pg_target, "far") < ROWS, view
    finally:
        output = _finish(run, proxy, tmp_path)
    assert run.returncode == 0, output
    for table in ("fast_a", "fast_b", "far"):
        assert assert_same_rows(pg_url, table, pg_target, table) == ROWS  # each row once


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        pytest.param("mysql+pymysql://root:not-the-password@127.0.0.1:3306/test",
                     "Access denied", marks=pytest.mark.mariadb),
        ("postgresql+psycopg://postgres@no-such-host.invalid:5432/test", "resolve host"),
        ("postgresql+psycopg://postgres@127.0.0.1:5432/no_such_database_here", "does not exist"),
        ("TABLE", "no_such_table"),
    ],
    ids=["bad password", "unknown host", "missing database", "missing table"],
)
def test_what_the_config_names_wrong_still_stops_the_start_with_exit_2(
    pg_url: str, pg_target: str, tmp_path: Path, where: str, expected: str
) -> None:
    seed_orders(pg_url, 10, table="fine")
    url, table = (pg_url, "no_such_table") if where == "TABLE" else (where, "fine")
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  fine: {{kind: sql, url: "{pg_url}", table: fine, key: id, target: out.fine}}
  wrong: {{kind: sql, url: "{url}", table: {table}, key: id, target: out.wrong}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "source wrong" in done.stderr and expected in done.stderr
    assert "not-the-password" not in done.stderr + done.stdout
    if where != "TABLE":
        assert "sources.wrong.url" in done.stderr
    assert count_rows(pg_target, "fine") == 0  # nothing started


def test_a_reload_while_a_database_hangs_does_not_hold_the_others_batches(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    proxy, far = _seeded_behind_proxy(pg_url, None)  # hangs, 10 s a connect (the default)
    port = _free_port()
    # Small batches at a set pace (6,000 rows at 600 rows/s), so that the reload falls
    # among them.
    run = _three_sources(tmp_path, pg_url, pg_target, far, port,
                         fast=", limits: {max_rows_per_s: 600}",
                         extra="\nbatch: {max_items: 100}")  # fmt: skip
    config = tmp_path / "sluice.yaml"
    try:
        wait_until(lambda: count_rows(pg_target, "fast_a") > 0, "the first rows", timeout=60,
                   poll=0.1)  # fmt: skip
        config.write_text(config.read_text().replace("max_items: 100", "max_items: 120"))
        wait_until(lambda: "config reloaded" in (tmp_path / "run.log").read_text(),
                   "the reload", timeout=30, poll=0.2)  # fmt: skip
        _far_shown_failing(run, pg_target, port, lambda far: far["failing_s"])
    finally:
        output = _finish(run, proxy, tmp_path)
    assert run.returncode == 0, output
    # From the ledger: the answering sources' batches came one after another, the reload
    # and the far database's connect timeouts (10 s each) never between two of them.
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    with engine.connect() as conn:
        made = [t for (t,) in conn.execute(sa.text(
            "SELECT created_at FROM sluice_batches WHERE source IN ('fast_a', 'fast_b') "
            "ORDER BY created_at"))]  # fmt: skip
    engine.dispose()
    assert len(made) >= 2 * ROWS // 120
    gaps = [b - a for a, b in zip(made, made[1:], strict=False)]
    assert max(gaps) < 5.0, gaps


@pytest.mark.parametrize(
    ("engine", "lock", "said"),
    # MariaDB's (LOCK TABLES locked WRITE, "max_statement_time") passed here once and once
    # not: its keys may all be read before the lock, and no key query then waits on it.
    [("postgresql", "LOCK TABLE locked IN ACCESS EXCLUSIVE MODE", "statement timeout")],
)  # fmt: skip
def test_a_key_query_waiting_on_a_lock_is_cancelled_shown_and_tried_again(
    engine: str, lock: str, said: str, pg_target: str, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    source = request.getfixturevalue("pg_url" if engine == "postgresql" else "mariadb_url")
    rows = 8_000
    seed_orders(source, rows, table="locked")
    port = _free_port()
    # Its keys two at a time (4,000 key queries: seconds of them) into a buffer with room for
    # every key: the refills go on, their key queries still to come when it is locked,
    # however late a loaded machine brings the first rows, and however long the batches
    # in flight then wait on the lock themselves (a buffer full of their items, its keys
    # read long before, had no key query to cancel: seen in CI).
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
metrics_port: {port}
batch: {{max_items: 400}}
sources:
  locked:
    kind: sql
    url: "{source}"
    table: locked
    key: id
    target: out.locked
    page_size: 2
    buffer: {{capacity: {rows + 1000}, replenish_below: {rows}}}
    limits: {{max_rows_per_s: 2000, query_timeout: 1}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    with (tmp_path / "run.log").open("w") as out:
        run = subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                               env=_env(), stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    holder = sa.create_engine(source)
    try:
        wait_until(lambda: count_rows(pg_target, "locked") > 0, "the first rows", timeout=60,
                   poll=0.1)  # fmt: skip
        with holder.connect() as conn:
            # An application's migration holds the table: sluice's key queries wait on it.
            conn.exec_driver_sql(lock)

            def view() -> dict[str, Any]:
                try:
                    return next(s for s in _status(port)["sources"] if s["name"] == "locked")
                except urllib.error.HTTPError:  # 503: the page's first figures not in yet
                    return {"refill_error": None, "failing_s": None}

            wait_until(lambda: said in (view()["refill_error"] or ""),
                       "the cancelled key query on the page", timeout=60, poll=0.2)  # fmt: skip
            assert view()["failing_s"] is not None and run.poll() is None
            # The lock let go: the refills go on.
            conn.exec_driver_sql("UNLOCK TABLES") if engine == "mariadb" else conn.rollback()
        run.wait(timeout=120)
    finally:
        holder.dispose()
        if run.poll() is None:
            run.kill()
            run.wait()
        output = (tmp_path / "run.log").read_text()
        print(output[-5000:])
    assert run.returncode == 0, output
    assert assert_same_rows(source, "locked", pg_target, "locked") == rows


def test_an_sqs_endpoint_down_at_start_is_waited_for_and_its_messages_land_once_it_is_up(
    pg_target: str, tmp_path: Path
) -> None:
    import json

    import boto3

    port, messages = _free_port(), 40
    endpoint = f"http://127.0.0.1:{port}"
    queue = f"{endpoint}/123456789012/late-{port}"
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{endpoint}",
           access_key_id: testing, secret_access_key: testing, wait_time: 1s,
           drain_quiet: 2s, target: out.events}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
batch: {{max_items: 10, max_wait: 100ms}}
""")
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                               env=_env(), stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    server = None
    try:
        wait_until(lambda: "refill failed" in log.read_text(), "the receives failing",
                   timeout=60, poll=0.2)  # fmt: skip
        assert run.poll() is None and "events: SQS did not answer at start" in log.read_text()
        # SQS comes up, with the queue and its messages.
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p",
             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        client = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                              aws_access_key_id="testing", aws_secret_access_key="testing")

        def queue_made() -> bool:
            try:
                client.create_queue(QueueName=f"late-{port}")
            except Exception:  # noqa: BLE001 - not listening yet
                return False
            return True

        wait_until(queue_made, "moto_server up", timeout=30, poll=0.2)
        for i in range(messages):
            client.send_message(QueueUrl=queue, MessageBody=json.dumps({"id": i}))
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        output = log.read_text()
        print(output[-5000:])
    assert run.returncode == 0, output
    assert count_rows(pg_target, "events") == messages
    assert f"{messages} rows in" in output


def test_a_source_whose_batches_fail_is_shown_away_while_its_database_does_not_answer(
    pg_url: str,
) -> None:
    """A source whose keys were all read has no refill left to find its database gone: a
    failed batch has it asked, and it is away until it answers again."""
    source = sa.make_url(pg_url)
    proxy = Proxy(source.port or 5432)
    far = source.set(port=proxy.port, query={"connect_timeout": "2"}).render_as_string(False)
    away = Away(lambda name: {"far": far}.get(name))
    try:
        proxy.hang()
        away.failed("far")
        away.failed("far")  # asked once at a time
        wait_until(lambda: away.of("far") is not None, "the far database found away",
                   timeout=30, poll=0.2)  # fmt: skip
        seconds, why = away.of("far") or (0.0, "")
        assert seconds >= 0 and "timeout" in why, why
        away.failed("nowhere")  # a source with no database to ask: nothing happens
        assert away.of("nowhere") is None
        proxy.forward()
        away.failed("far")  # a batch failed for another reason: the database answers
        wait_until(lambda: away.of("far") is None, "the far database back", timeout=30,
                   poll=0.2)  # fmt: skip
        proxy.hang()
        away.failed("far")
        wait_until(lambda: away.of("far") is not None, "away again", timeout=30, poll=0.2)
        away.succeeded("far")  # a batch of it went through
        assert away.of("far") is None
    finally:
        proxy.close()


def test_a_table_an_application_holds_locked_at_start_holds_no_other_source_back(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    """An application's migration holds one source table (ACCESS EXCLUSIVE) as the run starts:
    the start's catalogue reads and the table's check give up after LOCK_WAIT, the two
    others drain, the locked one is shown failing with why, and once the lock goes every row
    of it lands once, exit 0."""
    for table in ("fast_a", "fast_b", "far"):
        seed_orders(pg_url, ROWS, table=table)
    port = _free_port()
    holder = sa.create_engine(pg_url)
    try:
        with holder.connect() as conn:
            conn.exec_driver_sql("LOCK TABLE far IN ACCESS EXCLUSIVE MODE")
            run = _three_sources(tmp_path, pg_url, pg_target, pg_url, port)  # far: locked

            def drained() -> bool:
                assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
                return count_rows(pg_target, "fast_a") == ROWS == count_rows(pg_target, "fast_b")

            wait_until(drained, "the other sources drained", timeout=120, poll=0.5)

            def far() -> dict[str, Any]:
                return next(s for s in _status(port)["sources"] if s["name"] == "far")

            wait_until(lambda: "lock timeout" in (far()["refill_error"] or ""),
                       "the locked table's source failing on the page", timeout=30, poll=0.2)
            assert far()["failing_s"] is not None and count_rows(pg_target, "far") == 0
            conn.rollback()  # the lock goes
        run.wait(timeout=180)
    finally:
        holder.dispose()
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, (tmp_path / "run.log").read_text()[-5000:]
    for table in ("fast_a", "fast_b", "far"):
        assert assert_same_rows(pg_url, table, pg_target, table) == ROWS
