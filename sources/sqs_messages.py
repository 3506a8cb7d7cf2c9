"""What an SQS message's body says: its key, or why it is poison; and where poison goes.

:class:`KeyField` reads a body's key (a 1-tuple of its ``key`` field, ``a.b``
reaching into nested objects). :class:`PoisonSetAside` sends a message no
key can be read from (or received too often) to the dead-letter queue, with
sluice's reason as message attributes, or to ``on_poison``, and says which
messages are then safe to delete.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from sources.sqs_calls import Message, QueueCalls

# One logger name for the whole SQS source (see sources.sqs_calls).
log = logging.getLogger("sources.sqs")

KeyTuple = tuple[Any, ...]
PoisonHandler = Callable[[str, str, str, str], None]
"""Called with the source's name, the message id, the body and why it is poison."""


class KeyField:
    """The key field ``path`` of JSON object bodies (``a.b`` reaches into nested objects)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._parts = path.split(".")

    def read(self, body: str) -> tuple[KeyTuple | None, str]:
        """The key of a body, or None and why the body is poison; never raises."""
        try:
            value: Any = json.loads(body)
        except ValueError as exc:
            return None, f"body is not JSON ({exc})"
        if not isinstance(value, dict):
            return None, f"body is a JSON {_json_type(value)}, not an object"
        for part in self._parts:
            if not isinstance(value, dict) or part not in value:
                return None, f"no key field {self.path!r}"
            value = value[part]
        # bool is excluded: True == 1 would merge the keys true and 1.
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return (
                None,
                f"key field {self.path!r} is a JSON {_json_type(value)}, not a string or number",
            )
        return (value,), ""


class PoisonSetAside:
    """Sets poison messages of source ``name`` aside, so that they never block the others.

    To the dead-letter queue ``dlq`` when there is one, else to
    ``on_poison``, else nowhere (they are dropped, with a warning).
    """

    def __init__(
        self,
        name: str,
        sqs: QueueCalls,
        dlq: str | None,
        on_poison: PoisonHandler | None,
    ) -> None:
        self.name = name
        self._sqs = sqs
        self._dlq = dlq
        self._on_poison = on_poison

    def set_aside(self, poison: list[tuple[Message, str]]) -> list[str]:
        """Send each (message, reason) on; return the receipt handles now safe to delete.

        Blocks on SQS or ``on_poison``; never raises: a message that could not
        be set aside is left invisible, comes back and is tried again.
        """
        deletable: list[str] = []
        dlq = self._dlq
        for message, reason in poison:
            message_id, body = message["MessageId"], message["Body"]
            where = "dead-letter queue" if dlq else "on_poison" if self._on_poison else "dropped"
            log.warning(
                "source %s: poison message %s (%s) -> %s", self.name, message_id, reason, where
            )
            try:
                if dlq:
                    self._sqs.call(
                        "send to dead-letter queue",
                        self._sqs.client.send_message,
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
