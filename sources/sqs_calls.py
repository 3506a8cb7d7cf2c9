"""The SQS requests of one source: boto3's errors turned into sluice's, secrets scrubbed.

:class:`QueueCalls` owns the source's boto3 client (one made here unless one
is given) and is the only place that talks to SQS: a single request through
:meth:`QueueCalls.call`, and the ``*_batch`` calls over receipt handles
(deleting, changing visibility) in tens, each failure retried once.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)

from config.errors import ConfigError, SluiceError, SourceError
from config.faults import crash_point
from config.models import SqsSourceConfig
from config.secrets import redact_text

# The SQS source's records keep one logger name, whichever of its modules
# logs them: that name is what users' logging configs and filters select.
log = logging.getLogger("sources.sqs")

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
BATCH = 10
"""SQS's limit per receive and per ``*_batch`` call."""
MAX_WAIT = 20
"""SQS long-polls at most 20 s."""

Message = dict[str, Any]
"""One message as ``receive_message`` returns it."""


class QueueCalls:
    """The SQS requests of source ``name``, on a client of its own or the one given.

    Every method blocks on SQS. :meth:`call` raises :class:`SourceError`
    (``transient`` for throttling, SQS server errors and connection errors)
    or :class:`ConfigError` when no credentials are found; the message names
    the source and the queue URL, never a secret. The ``*_batch`` helpers
    never raise for SQS failures: they log them and return how many handles
    failed. Safe to use from several threads (boto3 clients are).
    """

    def __init__(self, name: str, cfg: SqsSourceConfig, client: Any = None) -> None:
        self.name = name
        self.cfg = cfg
        self._owns_client = client is None
        self.client = client if client is not None else make_client(name, cfg)

    def quick(self) -> QueueCalls:
        """Calls of one short try each (:data:`START_CHECK`), for the start's check; the
        client given to this one where there was one. Close it after."""
        if not self._owns_client:
            return QueueCalls(self.name, self.cfg, self.client)
        calls = QueueCalls(self.name, self.cfg, make_client(self.name, self.cfg, quick=True))
        calls._owns_client = True
        return calls

    def call(self, what: str, call: Callable[..., Any], url: str, **params: Any) -> Any:
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

    def receive(self, count: int, wait: float, visibility: int) -> list[Message]:
        """Up to ``count`` messages, invisible for ``visibility`` s; long-poll ``wait`` s."""
        response = self.call(
            "receive",
            self.client.receive_message,
            self.cfg.queue_url,
            MaxNumberOfMessages=count,
            WaitTimeSeconds=min(MAX_WAIT, math.ceil(wait)),
            VisibilityTimeout=visibility,
            AttributeNames=["ApproximateReceiveCount"],
        )
        messages: list[Message] = response.get("Messages", [])
        return messages

    def attributes(self, what: str, url: str, names: list[str]) -> dict[str, Any]:
        """The attributes ``names`` of the queue at ``url`` (``what`` names the request)."""
        response = self.call(what, self.client.get_queue_attributes, url, AttributeNames=names)
        attributes: dict[str, Any] = response.get("Attributes", {})
        return attributes

    def delete(self, handles: list[str]) -> int:
        """Delete the messages of these receipt handles; return how many failed."""
        return self._apply("delete", self.client.delete_message_batch, handles, {})

    def set_visibility(self, what: str, handles: list[str], seconds: int) -> int:
        """Make these messages invisible for ``seconds`` from now; return how many failed.

        ``what`` names the motion in the warning about failures ("release").
        """
        return self._apply(
            what,
            self.client.change_message_visibility_batch,
            handles,
            {"VisibilityTimeout": seconds},
        )

    def close(self) -> None:
        """Close the HTTP connections of a client made here, not of one given."""
        if self._owns_client:
            self.client.close()

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
            for start in range(0, len(pending), BATCH):
                if what == "delete" and start:  # some of these messages are deleted, not all
                    crash_point("mid_sqs_delete")
                chunk = [{**e, "Id": str(i)} for i, e in enumerate(pending[start : start + BATCH])]
                try:
                    response = self.call(what, call, self.cfg.queue_url, Entries=chunk)
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

    def _scrub(self, text: str) -> str:
        secrets = (self.cfg.access_key_id, self.cfg.secret_access_key)
        return redact_text(text, [s.get_secret_value() for s in secrets if s is not None])


START_CHECK = {"connect_timeout": 2, "read_timeout": 5, "total_max_attempts": 1}
"""The start check's client: one try of a few seconds. An endpoint away or hung at start is
waited for in the background (the source starts empty), not by holding the others' start."""


def make_client(name: str, cfg: SqsSourceConfig, *, quick: bool = False) -> Any:
    """A boto3 SQS client for source ``name`` (``quick``: :data:`START_CHECK`'s);
    :class:`ConfigError` for half a key pair."""
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
    config = (
        Config(connect_timeout=START_CHECK["connect_timeout"],
               read_timeout=START_CHECK["read_timeout"],
               retries={"mode": "standard",
                        "total_max_attempts": START_CHECK["total_max_attempts"]})
        if quick else
        Config(connect_timeout=5, read_timeout=MAX_WAIT + 10,
               retries={"mode": "standard", "max_attempts": 3})
    )  # fmt: skip
    # A session per source: boto3's default session is not safe to share across threads.
    session = boto3.session.Session()
    return session.client(
        "sqs",
        region_name=cfg.region,
        endpoint_url=cfg.endpoint_url,
        config=config,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
    )
