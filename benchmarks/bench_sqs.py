"""SqsSource against a plain boto3 receive/delete loop, on the same moto_server.

A ``moto_server`` is started on a free loopback port for the run and stopped
at the end. Each round fills a fresh queue with ``MESSAGES`` JSON messages,
then drains it:

- ``sqs_receive_ack_msgs_per_s``: :class:`sources.sqs.SqsSource` —
  ``next_batch(100)`` (ten receives of 10) then ``ack`` (deletes in batches
  of 10) until every message is gone; messages/s.
- ``sqs_receive_ack_by_10_msgs_per_s``: the same with ``next_batch(10)``: one
  receive, then its ack, call for call what the plain loop does.
- baseline of both: boto3 ``receive_message`` (10, the same wait, visibility
  and attributes) and ``delete_message_batch`` of each receive, until every
  message is gone.

moto scans the whole queue, in-flight messages included, on every call
(~0.7 ms per message), so holding 100 messages in flight until their batch is
done (as sluice must) costs more per receive there than deleting each receive
at once; only ratios are meaningful, not absolute numbers. Rounds alternate
between the variants and the best of each is kept.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402

from benchmarks.common import report  # noqa: E402
from config.models import SqsSourceConfig  # noqa: E402
from sources.sqs import SqsSource  # noqa: E402

MESSAGES = 300
ROUNDS = 3
BATCHES = (100, 10)  # items per next_batch before the ack: a loop's batch; one receive
WAIT = 1  # seconds of long poll: messages are there, so receives return at once
VISIBILITY = 60
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    exe = Path(sys.executable).with_name("moto_server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
                return proc, url
        except urllib.error.HTTPError:
            return proc, url
        except OSError:
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                continue
            break
    proc.kill()
    raise SystemExit(f"moto_server did not answer on {url} within {START_TIMEOUT} s")


def client(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "sqs", region_name="us-east-1", endpoint_url=endpoint,
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )


def fresh_queue(sqs: Any) -> str:
    url = str(sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:8]}")["QueueUrl"])
    for start in range(0, MESSAGES, 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps({"id": i, "kind": "click", "n": i % 7})}
            for i in range(start, min(start + 10, MESSAGES))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return url


def with_sqs_source(endpoint: str, url: str, batch: int) -> int:
    cfg = SqsSourceConfig(
        kind="sqs", queue_url=url, endpoint_url=endpoint, access_key_id="testing",
        secret_access_key="testing", wait_time=WAIT, visibility_timeout=VISIBILITY,
        target="lake.events",
    )
    source = SqsSource("events", cfg)
    done = 0
    try:
        while done < MESSAGES:
            items = source.next_batch(batch)
            source.ack(items)
            done += len(items)
    finally:
        source.close()
    return done


def with_plain_boto3(endpoint: str, url: str) -> int:
    sqs = client(endpoint)
    done = 0
    try:
        while done < MESSAGES:
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=WAIT,
                VisibilityTimeout=VISIBILITY, AttributeNames=["ApproximateReceiveCount"],
            ).get("Messages", [])
            if messages:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                             for i, m in enumerate(messages)],
                )
            done += len(messages)
    finally:
        sqs.close()
    return done


def rate(sqs: Any, endpoint: str, drain: Callable[[str, str], int]) -> float:
    url = fresh_queue(sqs)
    start = time.perf_counter()
    count = drain(endpoint, url)
    elapsed = time.perf_counter() - start
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    left = int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )
    assert count == MESSAGES and left == 0, (count, left)
    sqs.delete_queue(QueueUrl=url)
    return count / elapsed


def main() -> None:
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    proc, endpoint = start_moto()
    try:
        sqs = client(endpoint)
        ours: dict[int, list[float]] = {batch: [] for batch in BATCHES}
        plain: list[float] = []
        for _ in range(ROUNDS):
            plain.append(rate(sqs, endpoint, with_plain_boto3))
            for batch in BATCHES:
                ours[batch].append(
                    rate(sqs, endpoint, lambda e, u, b=batch: with_sqs_source(e, u, b))
                )
        sqs.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    report("sqs_receive_ack_msgs_per_s", max(ours[100]), "msgs/s", max(plain))
    report("sqs_receive_ack_by_10_msgs_per_s", max(ours[10]), "msgs/s", max(plain))


if __name__ == "__main__":
    main()
