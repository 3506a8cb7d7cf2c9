"""A daemon lets go of a batch another took over: its SQS messages stay until that batch ends.

Daemon A receives five messages, claims their keys as one batch and begins to
import it; its lease lapses and daemon B takes the batch over (a newer
fencing token) and imports it from the batch's manifest. When A's import
returns, the ledger refuses it the batch and A lets go of it
(:func:`scheduler.inflight._let_go`). Its messages must not
be deleted then: B has not committed anything yet. A receives them again,
finds their keys held by B's batch and holds them off, invisible (its
heartbeat keeps them so past their visibility timeout), until the ledger
settles them: deleted once B's batch is done; visible again, and received
once more, if the batch is let go by everyone.

A is a real main loop over a real SQS source (moto_server) and a real SQLite
ledger; B is the same ledger under another owner whose clock is an hour
ahead. Nothing here waits for time to pass: A's refills run when the test
runs them, its heartbeat is called by the test (as the daemon's job would
call it), and the queue's visibility timeouts run out on a clock the test
moves (:class:`tests.helpers.SqsClock`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from config.loader import load_config_text
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.source_opener import claims_lookup
from scheduler.strategy import build_strategy
from sources.queueing import QueueingLimitedSource
from sources.sqs import SqsSource
from tests.helpers import FakeClock, SqsClock, WatchedSink, wait_until

pytestmark = [pytest.mark.sqs, pytest.mark.timeout(60)]

KEYS = [1, 2, 3, 4, 5]
VISIBILITY = 300  # seconds of the SqsClock: the real queue never times a message out here

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{endpoint}",
           access_key_id: testing, secret_access_key: testing, wait_time: 0s,
           visibility_timeout: {visibility}s, target: lake.events,
           buffer: {{capacity: 100, replenish_below: 50}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {items}, max_wait: 50ms}}
lease: {{ttl: 30s}}
"""


class StepExecutor(Executor):
    """An executor whose work runs only when the test says: :meth:`run`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[Future[Any], Callable[[], Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._pending.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run(self) -> int:
        """Run what was submitted so far (not what that submits); returns how much."""
        with self._lock:
            pending, self._pending = self._pending, []
        for future, call in pending:
            future.set_result(call())
        return len(pending)


@dataclass
class DaemonA:
    """Daemon A's parts the test drives or looks at."""

    loop: MainLoop
    ledger: Ledger
    source: SqsSource
    buffer: QueueingLimitedSource
    sink: WatchedSink
    refills: StepExecutor


@pytest.fixture
def sqs(moto_server: str) -> Iterator[Any]:
    """A client for the test's own look at the queue."""
    client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    yield client
    client.close()


def visible_and_not(client: Any, queue: str) -> tuple[int, int]:
    """Messages visible on the queue, and messages received and invisible."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = client.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
    return int(attrs[names[0]]), int(attrs[names[1]])


def keys_in(sink: WatchedSink, batch_id: str) -> list[int]:
    [manifest] = [m for m in sink.submitted if m.batch_id == batch_id]
    return sorted(key[0] for key in manifest.keys)


@pytest.mark.parametrize("ending", ["done by the other daemon", "let go by everyone"])
def test_messages_of_a_batch_let_go_stay_until_that_batch_ends(
    tmp_path: Path, moto_server: str, sqs_queue: Callable[..., str], sqs: Any,
    caplog: pytest.LogCaptureFixture, ending: str,
) -> None:
    queue = sqs_queue("let-go")
    cfg = load_config_text(
        CONFIG.format(queue=queue, endpoint=moto_server, visibility=VISIBILITY, items=len(KEYS)),
        str(tmp_path / "sluice.yaml"),
    )
    entries = [{"Id": str(k), "MessageBody": json.dumps({"id": k})} for k in KEYS]
    assert not sqs.send_message_batch(QueueUrl=queue, Entries=entries).get("Failed")
    clock = SqsClock()
    a_client = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto_server,
                            aws_access_key_id="testing", aws_secret_access_key="testing")
    a = Ledger(cfg.ledger, owner="a", clock=FakeClock(1000.0), lease_ttl=cfg.lease.ttl)
    # B's clock is an hour ahead of A's: A's lease (30 s) has lapsed for B.
    b = Ledger(cfg.ledger, owner="b", clock=FakeClock(1000.0 + 3600), lease_ttl=cfg.lease.ttl)
    a.owners.register()
    b.owners.register()
    daemon = _daemon_a(cfg, a, clock.watch(a_client), clock)
    caplog.set_level(logging.WARNING, logger="sluice.loop")
    runner = threading.Thread(target=daemon.loop.run, daemon=True)
    runner.start()
    try:
        # A receives the five messages and begins to import them as one batch.
        assert daemon.refills.run() == 1
        wait_until(lambda: len(daemon.sink.held()) == 1, "A's batch", event=daemon.sink.arrived)
        [batch_id] = daemon.sink.held()
        assert keys_in(daemon.sink, batch_id) == KEYS
        assert visible_and_not(sqs, queue) == (0, len(KEYS))

        # B takes the batch over and imports it, from its manifest.
        assert [m.batch_id for m in b.orphans(["events"])] == [batch_id]
        taken = b.begin(batch_id)
        assert taken.token == 2
        assert sorted(json.loads(p)["id"] for p in taken.payloads) == KEYS

        # A's import returns; the ledger refuses A the batch, and A lets go of
        # it (before complete() returns: the end runs on the completing thread).
        daemon.sink.complete(batch_id)
        assert "was taken over by another daemon" in caplog.text
        assert a.reads.state_of(batch_id) == "importing"  # B's, not done
        assert sum(visible_and_not(sqs, queue)) == len(KEYS)  # none deleted
        assert daemon.source.in_flight() == 0  # A holds none of them for a batch

        # A receives them again: their keys are B's batch's, not done: held
        # off, invisible, and not handed out (B imports them already).
        assert daemon.refills.run() == 1
        assert daemon.buffer.buffered == 0 and daemon.source.in_flight() == 0
        assert visible_and_not(sqs, queue) == (0, len(KEYS))
        # A's heartbeat keeps them invisible past their visibility timeout.
        for _ in range(3):
            clock.advance(VISIBILITY * 0.4)
            assert daemon.source.extend_visibility() == len(KEYS)
        assert visible_and_not(sqs, queue) == (0, len(KEYS))  # 1.2 timeouts on

        if ending == "done by the other daemon":
            b.finish(batch_id, len(KEYS), token=taken.token)
            assert daemon.source.extend_visibility() == 0  # the next heartbeat settles them
            assert visible_and_not(sqs, queue) == (0, 0)  # deleted once B's batch is done
            assert [m.batch_id for m in daemon.sink.submitted] == [batch_id]
        else:
            # No batch holds the keys any more: the ledger forgot the batch
            # (`sluice reset --source events`; failed batches keep their keys
            # for their retry, dead ones count as ended for their messages).
            b.sources.reset("events")
            assert daemon.source.extend_visibility() == 0  # the next heartbeat settles them
            assert visible_and_not(sqs, queue) == (len(KEYS), 0)  # visible again
            # Received once more, by A's next refill, and imported as a new batch.
            assert daemon.refills.run() == 1
            wait_until(lambda: len(daemon.sink.submitted) == 2, "A's second batch",
                       event=daemon.sink.arrived)
            [again] = daemon.sink.held()
            assert again != batch_id and keys_in(daemon.sink, again) == KEYS
            daemon.sink.complete(again)
            assert visible_and_not(sqs, queue) == (0, 0)  # done: deleted
    finally:
        daemon.loop.request_stop()
        runner.join(30)
        daemon.buffer.stop(timeout=10)
        daemon.source.close()
        a_client.close()
        a.close()
        b.close()
    assert not runner.is_alive()
    assert daemon.loop.fatal is None


def _daemon_a(cfg: Any, ledger: Ledger, client: Any, clock: SqsClock) -> DaemonA:
    """A main loop over the SQS source ``events``, wired as the daemon wires it;
    its refills run on a :class:`StepExecutor`, its heartbeat is left to the test."""
    src_cfg = cfg.sources["events"]
    checkpoint = ledger.sources.register("events", fingerprint(src_cfg))
    source = SqsSource("events", src_cfg, claims=claims_lookup(ledger, "events"),
                       on_poison=ledger.sources.record_poison, client=client, clock=clock)
    refills = StepExecutor()
    woken: list[MainLoop] = []
    buffer = QueueingLimitedSource(
        source, src_cfg.buffer.capacity, src_cfg.buffer.replenish_below, executor=refills,
        on_refill=lambda: woken[0].notify() if woken else None,
    )
    sink = WatchedSink(auto_complete=False)
    loop = MainLoop(cfg, {"events": buffer}, build_strategy(cfg), ledger, sink,
                    {"events": checkpoint})
    woken.append(loop)
    buffer.start()
    return DaemonA(loop, ledger, source, buffer, sink, refills)
