"""The receipt handles an SQS source holds, per key, and the keys it knows are done.

Receipt handles never leave :class:`InFlight`'s owner: it remembers every
handle of every key handed out (SQS may deliver a message twice, and
producers may send the same key twice) until the key's batch is acked (its
handles are deleted) or released (they become visible again). Messages of
keys a batch elsewhere holds (another daemon's) are *held off*: kept, and
kept invisible by the heartbeat, until that batch is done (deleted) or let
go (made visible); received again and again instead, they would reach a
redrive policy's ``maxReceiveCount`` and the dead-letter queue.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from sources.sqs_calls import Message
from sources.sqs_messages import KeyTuple


@dataclass
class Intake:
    """What :meth:`InFlight.take_in` made of one receive's new messages."""

    held: list[tuple[Message, KeyTuple]] = field(default_factory=list)
    """Taken in: their keys are now in flight, to be handed out as items."""
    too_often: list[tuple[Message, str]] = field(default_factory=list)
    """Received more than ``max_receives`` times: poison, with the reason."""
    held_off: int = 0
    """Messages of keys some batch elsewhere holds and has not done yet: held off."""


class InFlight:
    """Which messages a source holds invisible, per key, and which keys are done.

    Every method is thread-safe and quick (no I/O): the receive, ``ack``,
    ``release`` and the heartbeat run on different threads. The caller does
    the SQS requests with the handles it is given back.
    """

    def __init__(self, visibility: int, max_receives: int, done_cache_size: int) -> None:
        self._visibility = visibility
        self._max_receives = max_receives
        self._lock = threading.Lock()
        # key -> {message id: newest receipt handle}; SQS deletes a message only
        # by the handle of its latest delivery.
        self._handles: dict[KeyTuple, dict[str, str]] = {}
        self._expires: dict[KeyTuple, float] = {}  # clock() when the key's first message reappears
        self._held_off: dict[KeyTuple, dict[str, str]] = {}  # as _handles, for others' keys
        # message id -> receives it had while held off: they do not count
        # towards max_receives once it is handed out (they say nothing of it).
        self._held_receives: LRUCache[str, int] = LRUCache(maxsize=done_cache_size)
        self._done: LRUCache[KeyTuple, bool] = LRUCache(maxsize=done_cache_size)

    def keys(self) -> int:
        """Keys in flight: handed out and not yet acked or released."""
        with self._lock:
            return len(self._handles)

    def messages(self) -> int:
        """Messages held for the keys in flight and the keys held off."""
        with self._lock:
            held = [*self._handles.values(), *self._held_off.values()]
            return sum(len(per_key) for per_key in held)

    def held_off(self) -> list[KeyTuple]:
        """The keys whose messages are held off (a batch elsewhere holds them)."""
        with self._lock:
            return list(self._held_off)

    def settle(self, claimed: Mapping[KeyTuple, bool]) -> tuple[list[str], list[str]]:
        """Given what ``claims`` says now of the held-off keys: the handles to delete and
        the handles to make visible again.

        A key whose batch is done is remembered as done and its messages are
        deleted; one no batch claims any more (its batch was let go) becomes
        visible, to be received and handed out as any other; the rest stay.
        """
        to_delete: list[str] = []
        to_release: list[str] = []
        with self._lock:
            for key in list(self._held_off):
                done = claimed.get(key)
                if done is False:
                    continue
                handles = self._held_off.pop(key).values()
                if done:
                    self._done[key] = True
                    to_delete.extend(handles)
                else:
                    to_release.extend(handles)
        return to_delete, to_release

    def sift(
        self, keyed: list[tuple[Message, KeyTuple]], to_delete: list[str]
    ) -> list[tuple[Message, KeyTuple]]:
        """File messages of keys in flight or done; return the others, in order.

        A message of a key in flight joins that key's handles; one of a key
        known done has its handle appended to ``to_delete``.
        """
        with self._lock:
            return [(m, k) for m, k in keyed if not self._known(m, k, to_delete)]

    def take_in(
        self,
        fresh: list[tuple[Message, KeyTuple]],
        claimed: Mapping[KeyTuple, bool],
        now: float,
        to_delete: list[str],
    ) -> Intake:
        """Take in messages :meth:`sift` returned, given what ``claims`` said of their keys.

        ``claimed`` maps a key some batch claimed to whether that batch is
        done. A done key is remembered and its message's handle goes to
        ``to_delete``; a second message of a key of this receive joins the
        first one's handles.
        """
        intake = Intake()
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
                    # done", buffering would import it twice. Held off: kept
                    # invisible until that batch is done or let go (settle).
                    # Checked before max_receives: its receives say nothing
                    # about the message itself.
                    self._held_off.setdefault(key, {})[message["MessageId"]] = message[
                        "ReceiptHandle"
                    ]
                    self._held_receives[message["MessageId"]] = _receives(message)
                    intake.held_off += 1
                    continue
                count = _receives(message) - self._held_receives.get(message["MessageId"], 0)
                if count > self._max_receives:
                    reason = f"received {count} times (max_receives {self._max_receives})"
                    intake.too_often.append((message, reason))
                    continue
                self._handles[key] = {message["MessageId"]: message["ReceiptHandle"]}
                self._expires[key] = now + self._visibility
                intake.held.append((message, key))
        return intake

    def finish(self, keys: Iterable[Any]) -> list[str]:
        """Forget these keys, remember them as done; return their handles to delete."""
        handles: list[str] = []
        with self._lock:
            for key in keys:
                handles.extend(self._forget(key).values())
                self._done[key] = True
        return handles

    def give_back(self, keys: Iterable[Any]) -> list[str]:
        """Forget these keys; return their handles, to make visible again."""
        with self._lock:
            return [h for key in keys for h in self._forget(key).values()]

    def renew(self, now: float) -> tuple[list[str], int]:
        """Count every key in flight invisible for the visibility timeout from ``now``.

        Returns every handle held (held-off ones too), to extend in SQS, and
        how many in-flight keys' first messages had become visible again
        before ``now``.
        """
        with self._lock:
            held = [*self._handles.values(), *self._held_off.values()]
            handles = [h for per_key in held for h in per_key.values()]
            lapsed = sum(1 for expires in self._expires.values() if expires < now)
            for key in self._expires:
                self._expires[key] = now + self._visibility
        return handles, lapsed

    def _known(self, message: Message, key: KeyTuple, to_delete: list[str]) -> bool:
        """Under the lock: file a message of an in-flight or done key; False if neither."""
        handles = self._handles.get(key)
        if handles is None and key in self._held_off:
            handles = self._held_off[key]
            self._held_receives[message["MessageId"]] = _receives(message)
        if handles is not None:
            handles[message["MessageId"]] = message["ReceiptHandle"]
            return True
        if key in self._done:
            to_delete.append(message["ReceiptHandle"])
            return True
        return False

    def _forget(self, key: Any) -> dict[str, str]:
        self._expires.pop(key, None)
        return self._handles.pop(key, {})


def _receives(message: Message) -> int:
    return int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
