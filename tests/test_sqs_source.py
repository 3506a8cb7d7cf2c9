"""SqsSource against moto_server: keys, duplicates, poison, done keys, visibility, errors."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber

from config.errors import ConfigError, SourceError
from config.models import SqsSourceConfig
from sources.abc import Item
from sources.queueing import QueueingLimitedSource
from sources.sqs import SqsSource
from tests.helpers import FakeClock, SqsClock, wait_until

pytestmark = pytest.mark.sqs

MakeQueue = Callable[..., str]


def make_cfg(endpoint: str | None, queue_url: str, **overrides: Any) -> SqsSourceConfig:
    fields: dict[str, Any] = {
        "kind": "sqs",
        "queue_url": queue_url,
        "endpoint_url": endpoint,
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "wait_time": 0,  # moto answers at once; long polls are not what is tested here
        "visibility_timeout": 30,
        # Drained at the second empty receive: no other consumer here, but for
        # the tests of the quiet period itself.
        "drain_quiet": 0,
        "target": "warehouse.events",
    }
    fields.update(overrides)
    return SqsSourceConfig.model_validate(fields)


def plain_client(endpoint: str | None = None, **config: Any) -> Any:
    return boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(**config),
    )


@pytest.fixture
def sqs(moto_server: str) -> Iterator[Any]:
    """A client for the test's own side: producers and other consumers."""
    client = plain_client(moto_server)
    yield client
    client.close()


def send(client: Any, url: str, bodies: list[Any]) -> None:
    """Send bodies (dicts as JSON, strings as they are) in batches of 10."""
    texts = [b if isinstance(b, str) else json.dumps(b) for b in bodies]
    for start in range(0, len(texts), 10):
        entries = [
            {"Id": str(i), "MessageBody": text} for i, text in enumerate(texts[start : start + 10])
        ]
        assert not client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def on_queue(client: Any, url: str) -> int:
    """Messages still on the queue, visible or not."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


def visible_and_not(client: Any, url: str) -> tuple[int, int]:
    """Messages visible on the queue, and messages received and invisible."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(attrs[names[0]]), int(attrs[names[1]])


def keys_of(items: list[Item]) -> list[Any]:
    """The items' keys, sorted."""
    keys: list[Any] = [item.key for item in items]
    return sorted(keys)


def drain(source: SqsSource, limit: int) -> list[Item]:
    """Call next_batch until the source reports itself exhausted."""
    items: list[Item] = []
    for _ in range(200):
        batch = source.next_batch(limit)
        assert len(batch) <= limit
        items += batch
        if source.exhausted:
            return items
    raise AssertionError("the source never reported itself exhausted")


def test_every_message_becomes_one_item_with_its_key_and_body(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    bodies = [{"id": i, "name": f"n{i}", "tags": [i]} for i in range(100)]
    send(sqs, url, bodies)
    source = SqsSource("events", make_cfg(moto_server, url))
    source.check()

    items = drain(source, 23)  # not a multiple of 10: no call may return more than asked

    assert keys_of(items) == [(i,) for i in range(100)]
    assert all(json.loads(item.payload) == bodies[cast(Any, item.key)[0]] for item in items)
    assert {item.source for item in items} == {"events"}
    assert source.in_flight() == 100
    source.ack(items)
    assert source.in_flight() == 0
    assert on_queue(sqs, url) == 0
    source.close()


def test_nested_key_field(moto_server: str, sqs_queue: MakeQueue, sqs: Any) -> None:
    url = sqs_queue()
    send(sqs, url, [{"meta": {"id": "a-1"}}, {"meta": {"id": 7}}])
    source = SqsSource("events", make_cfg(moto_server, url, key="meta.id"))
    assert sorted(map(str, (item.key for item in drain(source, 10)))) == ["('a-1',)", "(7,)"]


class _WaitsDouble:
    """An SQS client that notes how long each receive may long-poll."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.waits: list[int] = []

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self.waits.append(params["WaitTimeSeconds"])
        answer: dict[str, Any] = self._client.receive_message(**params)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_refill_long_polls_once_then_asks_briefly(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": i} for i in range(3)])
    client = _WaitsDouble(plain_client(moto_server))
    source = SqsSource("events", make_cfg(moto_server, url, wait_time=20), client=client)
    assert len(source.next_batch(10)) == 3
    assert client.waits == [20, 1]  # then one empty receive of 1 s, not 20
    assert not source.exhausted  # one empty receive is not enough
    client.close()


def test_an_empty_queue_is_exhausted_after_two_empty_receives(
    moto_server: str, sqs_queue: MakeQueue
) -> None:
    source = SqsSource("events", make_cfg(moto_server, sqs_queue()))
    assert source.next_batch(10) == []
    assert source.exhausted


def test_a_queue_is_drained_only_after_a_quiet_period_without_a_message(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    clock = FakeClock()
    source = SqsSource("events", make_cfg(moto_server, url, drain_quiet=30), clock=clock)
    assert source.next_batch(10) == [] and not source.exhausted  # quiet since the start: 0 s
    clock.now += 29
    assert source.next_batch(10) == [] and not source.exhausted
    send(sqs, url, [{"id": 1}])
    clock.now += 5
    assert keys_of(source.next_batch(10)) == [(1,)]  # a message: the quiet starts again
    clock.now += 29
    assert source.next_batch(10) == [] and not source.exhausted
    clock.now += 1
    assert source.next_batch(10) == [] and source.exhausted
    source.close()


class _CountsDouble:
    """An SQS client whose approximate counts are wrong (or late, as real SQS's are)."""

    def __init__(self, client: Any, counts: int) -> None:
        self._client = client
        self.counts = counts

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        answer = self._client.get_queue_attributes(**params)
        for name in answer["Attributes"]:
            if name.startswith("ApproximateNumberOf"):
                answer["Attributes"][name] = str(self.counts)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("counts", [0, 7], ids=["says-nothing-is-out", "says-7-are-out"])
def test_drain_ends_when_every_message_is_taken_whatever_the_counts_say(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any, counts: int
) -> None:
    """Messages a killed daemon had received come back and are taken before the
    queue is called drained, though the counts say nothing is out; and counts
    that never come down do not keep it from being drained."""
    url = sqs_queue()
    send(sqs, url, [{"id": i} for i in range(8)])
    clock = SqsClock()  # the visibility timeouts run out when the test says
    killed = clock.watch(sqs)
    taken = killed.receive_message(QueueUrl=url, MaxNumberOfMessages=5, VisibilityTimeout=60)
    assert len(taken["Messages"]) == 5  # received, then that daemon died
    double = _CountsDouble(plain_client(moto_server), counts)
    cfg = make_cfg(moto_server, url, visibility_timeout=60, drain_quiet=None)
    source = SqsSource("events", cfg, client=double, clock=clock)

    got = source.next_batch(100)
    assert len(got) == 3
    source.ack(got)  # imported: its messages are deleted
    # The other five are out for the 60 s of the killed daemon's visibility
    # timeout: however often the queue answers nothing, it is not drained.
    assert source.next_batch(100) == [] and not source.exhausted
    clock.advance(59)
    assert source.next_batch(100) == [] and not source.exhausted
    clock.advance(1)  # their timeout ran out: they are back, and taken
    back = source.next_batch(100)
    source.ack(back)
    assert keys_of(got + back) == [(i,) for i in range(8)]
    clock.advance(60)  # a quiet period after the last message
    assert source.next_batch(100) == [] and source.exhausted
    source.close()
    double.close()


def test_duplicate_deliveries_give_one_item_and_ack_deletes_them_all(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": 1, "v": "a"}, {"id": 1, "v": "b"}, {"id": 2}])
    source = SqsSource("events", make_cfg(moto_server, url))

    items = drain(source, 10)
    assert keys_of(items) == [(1,), (2,)]
    send(sqs, url, [{"id": 2, "v": "late"}])  # a key in flight, sent again later
    assert source.next_batch(10) == []
    assert on_queue(sqs, url) == 4  # all invisible, none deleted before the ack

    source.ack(items)
    assert on_queue(sqs, url) == 0


POISON = [
    "not json {",
    '{"other": 1}',
    "[1, 2]",
    '{"id": {"a": 1}}',
    '{"id": null}',
    '{"id": true}',
]


def test_poison_goes_to_the_dead_letter_queue(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url, dlq = sqs_queue(), sqs_queue("dlq")
    send(sqs, url, [*POISON, {"id": 1}])
    source = SqsSource("events", make_cfg(moto_server, url, dead_letter_queue_url=dlq))
    source.check()

    items = drain(source, 10)
    assert [item.key for item in items] == [(1,)]
    source.ack(items)
    assert on_queue(sqs, url) == 0
    dead = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
        "Messages"
    ]
    assert sorted(m["Body"] for m in dead) == sorted(POISON)
    assert {m["MessageAttributes"]["sluice_source"]["StringValue"] for m in dead} == {"events"}
    assert all(m["MessageAttributes"]["sluice_reason"]["StringValue"] for m in dead)


def test_poison_without_dead_letter_queue_goes_to_on_poison_and_is_deleted(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [*POISON, {"id": 1}])
    seen: list[tuple[str, str, str, str]] = []
    source = SqsSource(
        "events", make_cfg(moto_server, url), on_poison=lambda *args: seen.append(args)
    )

    items = drain(source, 10)
    assert [item.key for item in items] == [(1,)]
    assert sorted(body for _, _, body, _ in seen) == sorted(POISON)
    assert {name for name, _, _, _ in seen} == {"events"}
    reasons = " | ".join(reason for _, _, _, reason in seen)
    for word in ("not JSON", "no key field 'id'", "array", "object", "null", "boolean"):
        assert word in reasons
    source.ack(items)
    assert on_queue(sqs, url) == 0


def test_a_message_received_too_often_is_poison(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": 1}])
    # Another consumer received it once and gave it back at once (a crash).
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    seen: list[str] = []
    source = SqsSource(
        "events",
        make_cfg(moto_server, url, max_receives=1),
        on_poison=lambda _s, _m, _b, reason: seen.append(reason),
    )
    assert drain(source, 10) == []
    assert seen == ["received 2 times (max_receives 1)"]
    assert on_queue(sqs, url) == 0


def test_done_keys_are_deleted_at_once_and_looked_up_only_once(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    asked: list[tuple[Any, ...]] = []

    def claims(keys: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], bool]:
        asked.extend(keys)
        return {k: True for k in keys if k[0] % 2 == 0}

    send(sqs, url, [{"id": i} for i in range(1, 7)])
    source = SqsSource("events", make_cfg(moto_server, url), claims=claims)

    items = drain(source, 10)
    assert keys_of(items) == [(1,), (3,), (5,)]
    assert on_queue(sqs, url) == 3  # the done ones are gone, the others in flight
    source.ack(items)
    assert on_queue(sqs, url) == 0

    asked.clear()
    send(sqs, url, [{"id": 2}, {"id": 3}])  # done per the ledger; acked by this process
    assert drain(source, 10) == []
    assert on_queue(sqs, url) == 0
    assert asked == []  # both answered from memory


def test_a_key_held_by_a_batch_not_done_stays_on_the_queue_until_that_batch_is_done(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    """Another daemon imports key 5 (it took the batch over): its message is
    neither handed out nor deleted nor poison, and it is not received again and
    again (a redrive policy would dead-letter it): the heartbeat keeps it
    invisible until that batch is done. Key 8's batch is let go instead: its
    message is handed out, its held-off receive not counted as one."""
    url = sqs_queue()
    importing = {(5,): False, (8,): False}
    asked: list[tuple[Any, ...]] = []

    def claims(keys: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], bool]:
        asked.extend(keys)
        return {k: importing[k] for k in keys if k in importing}

    poison: list[str] = []
    clock = SqsClock()  # the visibility timeouts run out when the test says
    client = plain_client(moto_server)
    cfg = make_cfg(moto_server, url, visibility_timeout=60, max_receives=1)
    source = SqsSource(
        "events", cfg, claims=claims, on_poison=lambda _s, _m, _b, why: poison.append(why),
        client=clock.watch(client), clock=clock,
    )
    send(sqs, url, [{"id": 5}, {"id": 6}, {"id": 8}])
    first = source.next_batch(10)
    assert keys_of(first) == [(6,)]
    assert on_queue(sqs, url) == 3  # 5 and 8 are neither deleted nor in flight here
    assert source.in_flight() == 1 and asked.count((5,)) == 1

    # Three heartbeats over more than the 60 s visibility timeout: 5 and 8 are
    # looked up each time, stay held, and are kept invisible (not back on the
    # queue to be received again).
    for _ in range(3):
        clock.advance(25)
        assert source.extend_visibility() == 3
    assert asked.count((5,)) == 4 and asked.count((8,)) == 4
    assert visible_and_not(sqs, url) == (0, 3) and not source.exhausted

    importing[(5,)] = True  # that batch is done: its message goes
    del importing[(8,)]  # that batch was let go: its message comes back to be handed out
    assert source.extend_visibility() == 1  # 6 alone is left to extend
    assert on_queue(sqs, url) == 2
    assert keys_of(source.next_batch(10)) == [(8,)]  # received twice, counted once
    assert poison == []
    source.close()
    client.close()


def test_release_makes_messages_receivable_again(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": i} for i in range(3)])
    source = SqsSource("events", make_cfg(moto_server, url))
    items = sorted(drain(source, 10), key=lambda item: cast(Any, item.key))

    source.release(items[:2])
    assert source.in_flight() == 1
    again = source.next_batch(10)
    assert keys_of(again) == [(0,), (1,)]


def test_extend_visibility_keeps_messages_invisible_past_the_timeout(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": "control"}])
    clock = SqsClock()  # the visibility timeouts run out when the test says
    # The control message is received by another consumer, with the same
    # timeout and no heartbeat: it shows when the original timeout has passed.
    assert clock.watch(sqs).receive_message(QueueUrl=url, VisibilityTimeout=60)["Messages"]
    send(sqs, url, [{"id": i} for i in range(3)])
    client = plain_client(moto_server)
    cfg = make_cfg(moto_server, url, visibility_timeout=60)
    source = SqsSource("events", cfg, client=clock.watch(client), clock=clock)
    assert len(source.next_batch(10)) == 3

    clock.advance(40)
    assert not sqs.receive_message(QueueUrl=url).get("Messages")  # nothing shows yet
    assert source.extend_visibility() == 3  # now invisible until 40 + 60 s
    clock.advance(40)  # 80 s: past the first 60

    seen = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["id"] for m in seen] == ["control"]
    client.close()


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        ("ThrottlingException", True),
        ("RequestThrottled", True),
        ("AWS.SimpleQueueService.OverLimit", True),
        ("AccessDenied", False),  # waiting does not help: the backoff may stay long
    ],
)
def test_receive_errors_are_transient_only_when_waiting_helps(code: str, transient: bool) -> None:
    client = plain_client()
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/events"
    with Stubber(client) as stub:
        stub.add_client_error("receive_message", service_error_code=code, http_status_code=400)
        source = SqsSource("events", make_cfg(None, url), client=client)
        with pytest.raises(SourceError) as raised:
            source.next_batch(10)
    assert raised.value.transient is transient
    assert "events" in str(raised.value)
    assert url in str(raised.value)
    assert code in str(raised.value)


def test_an_unreachable_endpoint_is_a_transient_source_error(sqs_queue: MakeQueue) -> None:
    closed = "http://127.0.0.1:9"  # discard port: nothing listens on loopback
    client = plain_client(closed, retries={"max_attempts": 1}, connect_timeout=1)
    source = SqsSource("events", make_cfg(closed, f"{closed}/123456789012/q"), client=client)
    with pytest.raises(SourceError) as raised:
        source.next_batch(10)
    assert raised.value.transient


def test_check_names_the_source_and_the_missing_queue(moto_server: str) -> None:
    url = f"{moto_server}/123456789012/no-such-queue"
    cfg = make_cfg(
        moto_server, url, access_key_id="AKIDSECRETISH", secret_access_key="s3cr3t-value"
    )
    with pytest.raises(ConfigError) as raised:
        SqsSource("events", cfg).check()
    message = str(raised.value)
    assert "events" in message
    assert url in message
    assert "s3cr3t" not in message
    assert "AKIDSECRETISH" not in message


def test_check_without_credentials_fails_fast_and_clearly(
    moto_server: str, sqs_queue: MakeQueue, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    # The instance-metadata service, played by a socket nothing answers on
    # (boto3 would wait seconds for it): the source must not ask it at all.
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    metadata = socket.create_server(("127.0.0.1", 0))
    metadata.setblocking(False)
    monkeypatch.setenv(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{metadata.getsockname()[1]}"
    )
    cfg = make_cfg(moto_server, sqs_queue(), access_key_id=None, secret_access_key=None)

    with metadata:
        with pytest.raises(ConfigError, match="no AWS credentials"):
            SqsSource("events", cfg).check()
        with pytest.raises(BlockingIOError):
            metadata.accept()  # no instance-metadata probe: nobody connected


def test_items_flow_from_the_queue_into_a_queueing_buffer(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": i} for i in range(60)])
    source = SqsSource("events", make_cfg(moto_server, url))
    refilled = threading.Event()
    buffer = QueueingLimitedSource(source, capacity=100, replenish_below=20, on_refill=refilled.set)
    buffer.start()
    try:
        wait_until(lambda: buffer.buffered >= 60, "60 items buffered", event=refilled)
        batch = buffer.next_batch(100, "b1")
        assert keys_of(batch) == [(i,) for i in range(60)]

        buffer.ack("b1")  # deletes in SQS; the refill it triggers finds the queue drained
        wait_until(lambda: buffer.exhausted, "the buffer exhausted", event=refilled)
        assert on_queue(sqs, url) == 0
        assert buffer.health().errors == 0
    finally:
        assert buffer.stop(timeout=10)
    source.close()


def test_backlog_is_the_number_of_visible_messages(
    moto_server: str, sqs_queue: MakeQueue, sqs: Any
) -> None:
    url = sqs_queue()
    send(sqs, url, [{"id": i} for i in range(25)])
    source = SqsSource("events", make_cfg(moto_server, url))
    assert source.backlog() == 25
    items = source.next_batch(10)
    assert source.backlog() == 15  # in flight is not backlog
    source.release(items)
    assert source.backlog() == 25  # counting changed nothing
    source.close()
