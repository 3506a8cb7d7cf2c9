"""The daemon as operators run it: hot reload, windows, a dead ledger writer."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_config
from scheduler.daemon import Daemon
from sinks.abc import MemorySink
from tests.helpers import SqsClock, WatchedSink, seed_orders, wait_until

CONFIG = """
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           buffer: {{capacity: 400, replenish_below: 100}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {max_items}, max_wait: 50ms}}
backpressure: {{max_pending: 400, resume_below: 100}}
{extra}
"""


def write(path: Path, max_items: int = 100, extra: str = "") -> None:
    path.write_text(CONFIG.format(max_items=max_items, extra=extra))


@pytest.mark.timeout(60)
def test_a_changed_config_is_picked_up_and_an_invalid_one_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 3000)
    config = tmp_path / "sluice.yaml"
    write(config, max_items=100)
    sink = WatchedSink(auto_complete=False)  # nothing completes: the daemon keeps running
    daemon = Daemon(load_config(config), config_path=str(config), sink=sink)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    wait_until(lambda: len(sink.held()) >= 1, "a first batch", event=sink.arrived)
    assert all(m.items <= 100 for m in sink.submitted)

    # The file watcher is a periodic job: polled for, it has no hook.
    write(config, max_items=50, extra="retry: {max_attempts: 9}")
    wait_until(lambda: daemon.cfg.batch.max_items == 50, "the file watcher to see the change")
    assert daemon.loop is not None
    wait_until(lambda: daemon.loop is not None and daemon.loop.cfg.retry.max_attempts == 9,
               "the loop to take the new retry settings")

    caplog.set_level(logging.WARNING, logger="sluice.daemon")
    config.write_text(CONFIG.format(max_items="lots", extra=""))
    wait_until(lambda: "reload" in caplog.text and "ignored" in caplog.text,
               "the invalid config to be logged and ignored")
    assert "max_items" in caplog.text and daemon.cfg.batch.max_items == 50
    assert daemon.reload("SIGHUP") is False  # still invalid: still ignored

    # Let everything finish, then stop.
    daemon.loop.request_stop()
    for batch_id in sink.held():
        sink.complete(batch_id)
    runner.join(timeout=30)
    assert not runner.is_alive()
    daemon.close()


@pytest.mark.timeout(60)
def test_nothing_is_fed_outside_the_windows(tmp_path: Path) -> None:
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", 500)
    config = tmp_path / "sluice.yaml"
    write(config, extra='windows: ["* 1 * * *"]')  # 01:00-01:59 UTC only
    sink = MemorySink()
    clock = [datetime(2026, 1, 5, 12, 0, tzinfo=UTC)]
    daemon = Daemon(
        load_config(config), config_path=str(config), sink=sink, wall_clock=lambda: clock[0]
    )
    runner = threading.Thread(target=daemon.run, kwargs={"until_drained": True}, daemon=True)
    runner.start()
    wait_until(lambda: daemon.loop is not None, "the daemon's loop")
    assert daemon.loop is not None
    # The loop had every chance to feed, and must not have: it asked for room
    # tick after tick with a batch ready in the buffer, and was given none.
    throttle, queue = daemon.loop.throttle, daemon.queues["orders"]
    room, answers, asked = throttle.room, [], threading.Event()

    def watched_room() -> int:
        answer = room()
        if queue.buffered >= 100:  # a full batch is ready
            answers.append(answer)
            asked.set()
        return answer

    throttle.room = watched_room  # type: ignore[method-assign]
    wait_until(lambda: len(answers) >= 3, "three ticks with a batch ready", event=asked)
    assert set(answers) == {0}
    assert sink.submitted == []
    clock[0] = datetime(2026, 1, 5, 1, 30, tzinfo=UTC)
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert sum(m.items for m in sink.submitted) == 500
    daemon.close()


# -- SQS: what a stopping daemon gives back, and what it deletes ---------------------------

SQS_CONFIG = """
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{endpoint}",
           access_key_id: testing, secret_access_key: testing, wait_time: 1s,
           visibility_timeout: {visibility}, max_receives: {max_receives}, target: lake.events,
           buffer: {{capacity: 100, replenish_below: 50}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 5, max_wait: 50ms}}
backpressure: {{max_pending: 400, resume_below: 100, max_importing_batches: 1}}
retry: {{max_attempts: 5, backoff: 1h}}
"""


def sqs_daemon(
    tmp_path: Path, endpoint: str, queue: str, sink: MemorySink, *, visibility: str,
    max_receives: int = 5,
) -> Daemon:
    config = tmp_path / "sluice.yaml"
    config.write_text(SQS_CONFIG.format(queue=queue, endpoint=endpoint, visibility=visibility,
                                        max_receives=max_receives))
    return Daemon(load_config(config), config_path=str(config), sink=sink)


def sqs_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def send_ids(client: Any, queue: str, ids: Iterable[int]) -> None:
    entries = [{"Id": str(i), "MessageBody": json.dumps({"id": i})} for i in ids]
    for start in range(0, len(entries), 10):
        assert not client.send_message_batch(
            QueueUrl=queue, Entries=entries[start : start + 10]).get("Failed")


def on_queue(client: Any, queue: str) -> int:
    """Messages still on the queue, visible or not."""
    return sum(visible_and_not(client, queue))


def visible_and_not(client: Any, queue: str) -> tuple[int, int]:
    """Messages visible on the queue, and messages received and invisible."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = client.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
    return int(attrs[names[0]]), int(attrs[names[1]])


def batch_ids(sink: MemorySink, batch_id: str) -> list[int]:
    [manifest] = [m for m in sink.submitted if m.batch_id == batch_id]
    return sorted(key[0] for key in manifest.keys)


@pytest.mark.sqs
@pytest.mark.timeout(60)
def test_a_stopping_daemon_gives_buffered_messages_back_at_once(
    tmp_path: Path, moto_server: str, sqs_queue: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = sqs_queue("give-back", VisibilityTimeout="300")
    client = sqs_client(moto_server)
    send_ids(client, queue, range(30))
    sink = WatchedSink(auto_complete=False)
    daemon = sqs_daemon(tmp_path, moto_server, queue, sink, visibility="300s")
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    # One batch fails (its retry is an hour away: its items stay held), the
    # next one is imported; everything else sits in the buffer.
    wait_until(lambda: len(sink.held()) == 1, "a first batch", event=sink.arrived)
    [failed] = sink.held()
    sink.fail(failed)
    wait_until(lambda: sink.held() not in ([], [failed]), "a second batch", event=sink.arrived)
    [done] = sink.held()
    wait_until(lambda: daemon.queues["events"].buffered == 20, "20 items buffered")
    loop = daemon.loop
    assert loop is not None
    # The batch completes once the loop drains: earlier, it could feed another.
    draining = threading.Event()
    real_drain = loop.inflight.drain

    def drain(timeout: float | None) -> None:
        draining.set()
        real_drain(timeout)

    loop.inflight.drain = drain  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="sluice.daemon")
    loop.request_stop()
    assert draining.wait(10)
    sink.complete(done)
    runner.join(timeout=30)
    assert not runner.is_alive()

    # Right after the stop, not 300 s later: the buffered messages are back.
    back: list[int] = []
    for _ in range(5):
        received = client.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)
        back += [json.loads(m["Body"])["id"] for m in received.get("Messages", [])]
    held, imported = batch_ids(sink, failed), batch_ids(sink, done)
    assert sorted(back) == sorted(set(range(30)) - set(held) - set(imported))
    # The done batch's messages are deleted; the failed one's stay invisible
    # (held for its retry, not given back).
    assert on_queue(client, queue) == 25
    assert "source events: 20 buffered items given back" in caplog.text
    daemon.close()
    client.close()


@pytest.mark.sqs
@pytest.mark.timeout(60)
def test_a_message_of_a_key_another_daemon_imports_is_deleted_only_once_that_batch_is_done(
    tmp_path: Path, moto_server: str, sqs_queue: Callable[..., str],
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another daemon took over a batch (key 5) and is importing it; its
    message, visible again, must stay on the queue until that batch is done."""
    from scheduler.ledger import Ledger
    from sources import sqs_calls
    from sources.sqs import SqsSource

    queue = sqs_queue("taken-over")
    client = sqs_client(moto_server)
    # The daemon's SQS client has its visibility timeouts (300 s) run out on a
    # clock the test moves; its heartbeat job (every 100 s of real time) does
    # not come during the test: the test runs each heartbeat itself.
    clock = SqsClock()
    make_client = sqs_calls.make_client
    monkeypatch.setattr(sqs_calls, "make_client",
                        lambda name, cfg, **how: clock.watch(make_client(name, cfg, **how)))
    sink = WatchedSink(auto_complete=False)
    # max_receives 1: receives of a message held off must not make it poison.
    daemon = sqs_daemon(tmp_path, moto_server, queue, sink, visibility="300s", max_receives=1)
    other = Ledger(daemon.cfg.ledger, owner="other")
    other.owners.register()
    other.claim_keys("theirs", "events", "lake.events", [[5]], payloads=['{"id": 5}'],
                     begin=True)
    send_ids(client, queue, [5, 6])
    caplog.set_level(logging.DEBUG, logger="sources.sqs")
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        wait_until(lambda: len(sink.held()) == 1, "the batch of key 6", event=sink.arrived)
        [mine] = sink.held()
        assert batch_ids(sink, mine) == [6]
        assert on_queue(client, queue) == 2  # 5 is not deleted while "theirs" imports
        # Held off: the heartbeat keeps it invisible past its 300 s visibility
        # timeout, so it is not received again (a redrive policy's count).
        source = daemon.queues["events"].wrapped
        assert isinstance(source, SqsSource)
        heartbeat = source.extend_visibility
        for _ in range(4):
            clock.advance(100)
            assert heartbeat() == 2  # 5, held off, and 6, importing here
        assert caplog.text.count("held off 1 keys") >= 4
        assert visible_and_not(client, queue) == (0, 2)  # 400 s on: neither visible
        assert caplog.text.count("not done yet") == 1
        other.finish("theirs", 1)
        heartbeat()
        assert on_queue(client, queue) == 1  # deleted once done
        sink.complete(mine)  # its end is recorded (and 6 deleted) before this returns
        assert on_queue(client, queue) == 0
        assert [m.batch_id for m in sink.submitted] == [mine]  # 5 never buffered here
        assert daemon.ledger.reads.poison_count("events") == 0
    finally:
        assert daemon.loop is not None
        daemon.loop.request_stop()
        runner.join(timeout=30)
        other.close()
        client.close()
    assert not runner.is_alive()
    daemon.close()


def test_sqs_look_up_deletes_only_keys_of_done_or_dead_batches(tmp_path: Path) -> None:
    """Done: delete. Dead: its messages went when it died; a late duplicate is
    deleted too (held back, it would cycle for ever and the queue never drain).
    Claimed, importing, failed: kept until that batch ends."""
    from config.models import RetryConfig
    from scheduler.ledger import Ledger
    from scheduler.source_opener import claims_lookup

    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.claim_keys("claimed", "events", "lake.events", [[1]])
    for batch, key in [("importing", 2), ("done", 3), ("failed", 4), ("dead", 5)]:
        ledger.claim_keys(batch, "events", "lake.events", [[key]], begin=True)
    ledger.finish("done", rows=1)
    ledger.fail("failed", "boom", RetryConfig(max_attempts=2))
    ledger.fail("dead", "boom", RetryConfig(max_attempts=1))
    lookup = claims_lookup(ledger, "events")
    assert lookup([(k,) for k in range(1, 7)]) == {
        (1,): False, (2,): False, (3,): True, (4,): False, (5,): True,
    }
    ledger.close()


def test_the_summary_counts_a_streams_changes_read_beside_the_rows_written() -> None:
    from scheduler.daemon import RunSummary, format_summary
    from scheduler.stats import RunStats

    stats = RunStats(items={"live": 10, "orders": 5}, rows_by_source={"live": 4, "orders": 5},
                     streams={"live"})  # fmt: skip
    text = format_summary(RunSummary(stats, 0))
    assert "4 rows (10 changes read)" in text and "5 rows (5 claimed)" in text, text


def test_sources_that_wait_for_a_parent_start_their_refills_after_it() -> None:
    """A parent named after its children still gets the database's key queries first."""
    from config.loader import load_config_text
    from scheduler.daemon import start_parents_first

    url = "postgresql+psycopg://u@127.0.0.1:1/db"
    cfg = load_config_text(f"""
ledger: 'sqlite:///:memory:'
sources:
  a_child: {{kind: sql, url: '{url}', table: c1, key: id, target: wh.c1, depends_on: [z_parent]}}
  b_child: {{kind: sql, url: '{url}', table: c2, key: id, target: wh.c2, depends_on: [z_parent]}}
  z_parent: {{kind: sql, url: '{url}', table: p, key: id, target: wh.p, depends_on: [zz_root]}}
  zz_root: {{kind: sql, url: '{url}', table: r, key: id, target: wh.r}}
targets:
  wh: {{kind: parquet, path: /tmp/unused}}
""")  # fmt: skip
    started: list[str] = []

    class Queue:
        def __init__(self, name: str) -> None:
            self.name = name

        def start(self) -> None:
            started.append(self.name)

    start_parents_first(cfg, {name: Queue(name) for name in cfg.sources})  # type: ignore[misc]
    assert started == ["zz_root", "z_parent", "a_child", "b_child"]
