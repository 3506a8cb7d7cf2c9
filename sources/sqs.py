"""Messages of an SQS queue as items, deleted only once their batch is done.

A message body is a JSON object; an item's key is a 1-tuple of its ``key``
field (``a.b`` reaches into nested objects) and its payload the body text.
Receipt handles never leave this module: the source remembers every handle of
every key it handed out (SQS may deliver a message twice, and producers may
send the same key twice) until the key's batch is acked (all are deleted) or
released (all become visible again). A message of a key some batch elsewhere
still holds (another daemon took the batch over) is left invisible, and
deleted by a later receive once that batch is done. Poison messages go to the
dead-letter queue, or to ``on_poison``, and are deleted, so they never block
the others.
An item's ``handle`` is only its message id, for logs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from cachetools import LRUCache

from config.errors import ConfigError, SluiceError, SourceError
from config.faults import crash_point
from config.models import SqsSourceConfig
from config.secrets import redact_text
from sources.abc import Item, LimitedSource

log = logging.getLogger(__name__)

KeyTuple = tuple[Any, ...]
Message = dict[str, Any]
ClaimLookup = Callable[[list[KeyTuple]], dict[KeyTuple, bool]]
"""Which of these keys some batch claimed, each mapped to whether that batch is done."""

# Asked too fast, or too many messages in flight: waiting helps.
_THROTTLED = frozenset(
    {
        "ThrottlingException",
        "RequestThrottled",
        "OverLimit",
        "AWS.SimpleQueueService.OverLimit",
        "KmsThrottled",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
    }
)
_BATCH = 10  # SQS's limit per receive and per *_batch call
_MAX_WAIT = 20  # SQS long-polls at most 20 s
_FOLLOW_UP_WAIT = 1.0  # later receives of one refill: a refill must not sit 20 s on an empty tail
_MAX_VISIBILITY = 43200


def _nothing_claimed(keys: list[KeyTuple]) -> dict[KeyTuple, bool]:
    return {}


class SqsSource(LimitedSource):
    """An SQS queue whose messages stay invisible until their batch is done.

    ``next_batch(limit)`` blocks on SQS: one long poll of up to ``wait_time``,
    then short ones (1 s at most) until ``limit`` new items or an empty
    receive. It raises :class:`SourceError` (``transient`` for throttling,
    SQS server errors and connection errors) or :class:`ConfigError` when no
    credentials are found. A key already handed out and not yet acked or
    released adds its receipt handle to that item instead of a new item; a key
    known done (acked here, or reported done by ``claims`` behind an LRU cache)
    is deleted at once. A key ``claims`` reports held by a batch not done yet
    (another daemon's, or one this daemon resumed from the ledger) is neither
    handed out nor deleted, and does not count towards ``max_receives``: its
    message stays invisible for ``visibility_timeout`` and is looked up again
    when it comes back. ``exhausted`` after two empty receives in a row, once
    no message received elsewhere (a killed daemon's) is still invisible.

    ``ack``, ``release`` and ``extend_visibility`` may run on other threads
    than ``next_batch``; they block on SQS but do not raise for SQS failures:
    they log them, because a message that could not be deleted or reset comes
    back by itself after its visibility timeout (and a done key is then
    deleted at once).
    """

    def __init__(
        self,
        name: str,
        cfg: SqsSourceConfig,
        *,
        claims: ClaimLookup = _nothing_claimed,
        on_poison: Callable[[str, str, str, str], None] | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
        done_cache_size: int = 100_000,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self._owns_client = client is None
        self.client = client if client is not None else _make_client(name, cfg)
        self._claims = claims
        self._on_poison = on_poison
        self._clock = clock
        self._key_path = cfg.key.split(".")
        self._visibility = min(_MAX_VISIBILITY, math.ceil(cfg.visibility_timeout))
        self._lock = threading.Lock()  # the maps below: ack/release/heartbeat run on other threads
        # key -> {message id: newest receipt handle}; SQS deletes a message only
        # by the handle of its latest delivery.
        self._handles: dict[KeyTuple, dict[str, str]] = {}
        self._expires: dict[KeyTuple, float] = {}  # clock() when the key's first message reappears
        self._done: LRUCache[KeyTuple, bool] = LRUCache(maxsize=done_cache_size)
        self._empty_streak = 0
        self._waiting = False  # for messages received elsewhere (logged once per wait)

    @property
    def exhausted(self) -> bool:
        """The last two receives came back empty."""
        return self._empty_streak >= 2

    def in_flight(self) -> int:
        """Keys handed out and not yet acked or released."""
        with self._lock:
            return len(self._handles)

    def check(self) -> None:
        """Ask SQS for the queue's (and dead-letter queue's) attributes; raise if it cannot.

        :class:`ConfigError` for a missing queue, refused or missing
        credentials; :class:`SourceError` (transient) when SQS cannot be reached.
        The message names the source and the queue URL, never a secret.
        """
        queues = [
            ("queue", self.cfg.queue_url),
            ("dead-letter queue", self.cfg.dead_letter_queue_url),
        ]
        for what, url in queues:
            if url is None:
                continue
            try:
                self._call(
                    f"check {what}",
                    self.client.get_queue_attributes,
                    url,
                    AttributeNames=["QueueArn"],
                )
            except SourceError as exc:
                if exc.transient:
                    raise
                raise ConfigError(f"{exc} (region {self.cfg.region})") from exc

    def backlog(self) -> int:
        """Messages waiting in the queue (SQS's ``ApproximateNumberOfMessages``).

        Read-only; in-flight messages (received, not yet deleted) are not
        counted. Raises :class:`SourceError` like :meth:`next_batch`.
        """
        response = self._call(
            "count messages of",
            self.client.get_queue_attributes,
            self.cfg.queue_url,
            AttributeNames=["ApproximateNumberOfMessages"],
        )
        return int(response.get("Attributes", {}).get("ApproximateNumberOfMessages", 0))

    def next_batch(self, limit: int) -> list[Item]:
        """Receive until ``limit`` new items or an empty receive (blocking: see the class)."""
        items: list[Item] = []
        wait = self.cfg.wait_time
        while len(items) < limit:
            try:
                messages = self._receive(min(_BATCH, limit - len(items)), wait)
            except SluiceError:
                # The items of earlier receives are ours: their handles are
                # held (and kept invisible by the heartbeat) until ack or
                # release. Raising would drop them, stranding their messages
                # for good; hand them out, and the next call meets the error.
                if items:
                    break
                raise
            wait = min(wait, _FOLLOW_UP_WAIT)
            if not messages:
                self._empty_streak += 1
                # One empty receive ends a refill that found something; a
                # refill that found nothing asks once more, so that a drained
                # queue is reported after two empty receives in a row, and
                # keeps asking while messages received elsewhere are out.
                if items or (self._empty_streak >= 2 and not self._left_elsewhere()):
                    break
                continue
            self._empty_streak = 0
            items.extend(self._sort(messages))
        return items

    def ack(self, items: Sequence[Item]) -> None:
        """Delete every message of the items' keys; remember the keys as done."""
        handles: list[str] = []
        with self._lock:
            for item in items:
                handles.extend(self._forget(item.key).values())
                self._done[cast(KeyTuple, item.key)] = True
        self._apply("delete", self.client.delete_message_batch, handles, {})

    def release(self, items: Sequence[Item]) -> None:
        """Make every message of the items' keys visible again at once."""
        with self._lock:
            handles = [h for item in items for h in self._forget(item.key).values()]
        self._apply(
            "release",
            self.client.change_message_visibility_batch,
            handles,
            {"VisibilityTimeout": 0},
        )

    def extend_visibility(self) -> int:
        """Heartbeat: keep every in-flight message invisible for ``visibility_timeout`` more.

        Call it every ``visibility_timeout / 3`` or so. Returns how many
        messages were extended; a late heartbeat (some visibility already ran
        out, so SQS may have delivered those messages again) is logged.
        """
        now = self._clock()
        with self._lock:
            handles = [h for per_key in self._handles.values() for h in per_key.values()]
            lapsed = sum(1 for expires in self._expires.values() if expires < now)
            for key in self._expires:
                self._expires[key] = now + self._visibility
        if lapsed:
            log.warning(
                "source %s: visibility of %d keys ran out before the heartbeat; "
                "their messages may be delivered again",
                self.name,
                lapsed,
            )
        failed = self._apply(
            "extend visibility of",
            self.client.change_message_visibility_batch,
            handles,
            {"VisibilityTimeout": self._visibility},
        )
        return len(handles) - failed

    def close(self) -> None:
        """Close the HTTP connections of a client this source created."""
        if self._owns_client:
            self.client.close()

    # -- receiving ------------------------------------------------------------

    def _receive(self, count: int, wait: float) -> list[Message]:
        response = self._call(
            "receive",
            self.client.receive_message,
            self.cfg.queue_url,
            MaxNumberOfMessages=count,
            WaitTimeSeconds=min(_MAX_WAIT, math.ceil(wait)),
            VisibilityTimeout=self._visibility,
            AttributeNames=["ApproximateReceiveCount"],
        )
        messages: list[Message] = response.get("Messages", [])
        return messages

    def _left_elsewhere(self) -> int:
        """Messages on the queue beyond those this source holds, as SQS counts them.

        Two empty receives do not mean the queue is drained: a daemon killed
        with ``kill -9`` between receive and claim (or another daemon, or a
        delete that failed) leaves messages invisible until their visibility
        timeout, and ``--until-drained`` would end with those records never
        migrated. Visible and delayed messages count too, so that messages
        coming back just after an empty receive are not missed.
        """
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        response = self._call(
            "count the messages of",
            self.client.get_queue_attributes,
            self.cfg.queue_url,
            AttributeNames=names,
        )
        attrs = response.get("Attributes", {})
        with self._lock:
            ours = sum(len(per_key) for per_key in self._handles.values())
        left = max(0, sum(int(attrs.get(name, 0)) for name in names) - ours)
        if left and not self._waiting:
            log.info(
                "source %s: %d messages received elsewhere are not back yet; "
                "the queue is not drained until they are",
                self.name,
                left,
            )
        self._waiting = left > 0
        return left

    def _sort(self, messages: list[Message]) -> list[Item]:
        """Turn one receive into new items; set aside duplicates, claimed keys and poison."""
        poison: list[tuple[Message, str]] = []
        keyed: list[tuple[Message, KeyTuple]] = []
        for message in messages:
            key, reason = self._key_of(message["Body"])
            if key is None:
                poison.append((message, reason))
            else:
                keyed.append((message, key))
        to_delete: list[str] = []
        with self._lock:
            fresh = [(m, k) for m, k in keyed if not self._known(m, k, to_delete)]
        claimed = self._look_up_claims(list(dict.fromkeys(k for _, k in fresh)))
        items: list[Item] = []
        held_off = 0
        now = self._clock()
        with self._lock:
            for message, key in fresh:
                done = claimed.get(key)
                if done:
                    self._done[key] = True
                if self._known(message, key, to_delete):
                    continue  # done, or a second message of a key in this receive
                if done is False:
                    # Its batch (taken over by another daemon, say) imports
                    # from its manifest: deleting now would break "deleted once
                    # done", buffering would import it twice. The receive left
                    # it invisible for our visibility timeout; it is looked up
                    # again when it comes back. Checked before max_receives:
                    # these receives say nothing about the message itself.
                    held_off += 1
                    continue
                count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
                if count > self.cfg.max_receives:
                    poison.append(
                        (message, f"received {count} times (max_receives {self.cfg.max_receives})")
                    )
                    continue
                self._handles[key] = {message["MessageId"]: message["ReceiptHandle"]}
                self._expires[key] = now + self._visibility
                items.append(Item(self.name, key, message["Body"], handle=message["MessageId"]))
        if held_off:
            log.debug(
                "source %s: %d messages of keys held by a batch not done yet left invisible "
                "for %d s",
                self.name,
                held_off,
                self._visibility,
            )
        to_delete += self._set_aside(poison)
        self._apply("delete", self.client.delete_message_batch, to_delete, {})
        return items

    def _known(self, message: Message, key: KeyTuple, to_delete: list[str]) -> bool:
        """Under the lock: file a message of an in-flight or done key; False if neither."""
        handles = self._handles.get(key)
        if handles is not None:
            handles[message["MessageId"]] = message["ReceiptHandle"]
            return True
        if key in self._done:
            to_delete.append(message["ReceiptHandle"])
            return True
        return False

    def _look_up_claims(self, keys: list[KeyTuple]) -> dict[KeyTuple, bool]:
        if not keys:
            return {}
        try:
            return self._claims(keys)
        except Exception as exc:  # the ledger's errors are not ours to classify
            raise SourceError(f"source {self.name}: claims look-up failed: {exc}") from exc

    def _key_of(self, body: str) -> tuple[KeyTuple | None, str]:
        """The key of a body, or None and why the body is poison."""
        try:
            value: Any = json.loads(body)
        except ValueError as exc:
            return None, f"body is not JSON ({exc})"
        if not isinstance(value, dict):
            return None, f"body is a JSON {_json_type(value)}, not an object"
        for part in self._key_path:
            if not isinstance(value, dict) or part not in value:
                return None, f"no key field {self.cfg.key!r}"
            value = value[part]
        # bool is excluded: True == 1 would merge the keys true and 1.
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return (
                None,
                f"key field {self.cfg.key!r} is a JSON {_json_type(value)}, not a string or number",
            )
        return (value,), ""

    def _set_aside(self, poison: list[tuple[Message, str]]) -> list[str]:
        """Send poison to the DLQ or ``on_poison``; return the handles now safe to delete."""
        deletable: list[str] = []
        dlq = self.cfg.dead_letter_queue_url
        for message, reason in poison:
            message_id, body = message["MessageId"], message["Body"]
            where = "dead-letter queue" if dlq else "on_poison" if self._on_poison else "dropped"
            log.warning(
                "source %s: poison message %s (%s) -> %s", self.name, message_id, reason, where
            )
            try:
                if dlq:
                    self._call(
                        "send to dead-letter queue",
                        self.client.send_message,
                        dlq,
                        MessageBody=body,
                        **_dead_letter_extras(self.name, message_id, reason, dlq),
                    )
                elif self._on_poison is not None:
                    self._on_poison(self.name, message_id, body, reason)
            except Exception as exc:  # left invisible: it comes back and is tried again
                log.warning(
                    "source %s: could not set poison message %s aside, kept on the queue: %s",
                    self.name,
                    message_id,
                    exc,
                )
                continue
            deletable.append(message["ReceiptHandle"])
        return deletable

    # -- SQS calls ------------------------------------------------------------

    def _forget(self, key: Any) -> dict[str, str]:
        self._expires.pop(key, None)
        return self._handles.pop(key, {})

    def _apply(
        self, what: str, call: Callable[..., Any], handles: list[str], extra: dict[str, Any]
    ) -> int:
        """Run a *_batch call over receipt handles in tens; retry failures once; log the rest.

        Returns how many handles failed. Entries SQS rejects as the sender's
        fault (a handle already deleted) are not retried: they would fail again.
        """
        pending = [{"ReceiptHandle": h, **extra} for h in handles]
        failed: list[str] = []
        for attempt in (1, 2):
            retry: list[tuple[dict[str, Any], str]] = []
            for start in range(0, len(pending), _BATCH):
                if what == "delete" and start:  # some of these messages are deleted, not all
                    crash_point("mid_sqs_delete")
                chunk = [{**e, "Id": str(i)} for i, e in enumerate(pending[start : start + _BATCH])]
                try:
                    response = self._call(what, call, self.cfg.queue_url, Entries=chunk)
                except SluiceError as exc:
                    retry += [(entry, str(exc)) for entry in chunk]
                    continue
                for entry in response.get("Failed", []):
                    reason = f"{entry.get('Code')}: {entry.get('Message', '')}"
                    if entry.get("SenderFault"):
                        failed.append(reason)
                    else:
                        retry.append((chunk[int(entry["Id"])], reason))
            if attempt == 2 or not retry:
                failed += [reason for _, reason in retry]
                break
            pending = [entry for entry, _ in retry]
        if failed:
            log.warning(
                "source %s: could not %s %d of %d messages (they reappear after their "
                "visibility timeout): %s",
                self.name,
                what,
                len(failed),
                len(handles),
                failed[0],
            )
        return len(failed)

    def _call(self, what: str, call: Callable[..., Any], url: str, **params: Any) -> Any:
        """One SQS request, its errors turned into sluice errors naming source and queue."""
        try:
            return call(QueueUrl=url, **params)
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise ConfigError(
                f"source {self.name} (queue {url}): no AWS credentials: set access_key_id and "
                "secret_access_key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile"
            ) from exc
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            # Some messages (SignatureDoesNotMatch) quote the request: scrub the key id.
            message = self._scrub(str(error.get("Message", "")))
            described = SourceError(
                f"source {self.name} (queue {url}): {what} failed: {code}: {message}"
            )
            described.transient = code in _THROTTLED or status >= 500
            raise described from exc
        except BotoCoreError as exc:  # connection refused, timeouts: the endpoint may come back
            raise SourceError(
                f"source {self.name} (queue {url}): {what} failed: {self._scrub(str(exc))}"
            ) from exc

    def _scrub(self, text: str) -> str:
        secrets = (self.cfg.access_key_id, self.cfg.secret_access_key)
        return redact_text(text, [s.get_secret_value() for s in secrets if s is not None])


def _dead_letter_extras(source: str, message_id: str, reason: str, dlq: str) -> dict[str, Any]:
    def text(value: str) -> dict[str, str]:
        return {"DataType": "String", "StringValue": value}

    extras: dict[str, Any] = {
        "MessageAttributes": {
            "sluice_source": text(source),
            "sluice_message_id": text(message_id),
            "sluice_reason": text(reason[:1000]),
        }
    }
    if dlq.endswith(".fifo"):
        extras.update(MessageGroupId=source, MessageDeduplicationId=message_id)
    return extras


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _make_client(name: str, cfg: SqsSourceConfig) -> Any:
    # Off EC2, boto3's instance-metadata probe takes seconds and then fails
    # vaguely; without it a missing credential is a clear error at check().
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    if (cfg.access_key_id is None) != (cfg.secret_access_key is None):
        raise ConfigError(
            f"sources.{name}: set both access_key_id and secret_access_key, or "
            "neither (then boto3's standard credential chain is used)"
        )
    # None for both: boto3's standard credential chain.
    key_id = None if cfg.access_key_id is None else cfg.access_key_id.get_secret_value()
    secret = None if cfg.secret_access_key is None else cfg.secret_access_key.get_secret_value()
    config = Config(
        connect_timeout=5,
        read_timeout=_MAX_WAIT + 10,
        retries={"mode": "standard", "max_attempts": 3},
    )
    # A session per source: boto3's default session is not safe to share across threads.
    session = boto3.session.Session()
    return session.client(
        "sqs", region_name=cfg.region, endpoint_url=cfg.endpoint_url, config=config,
        aws_access_key_id=key_id, aws_secret_access_key=secret,
    )
