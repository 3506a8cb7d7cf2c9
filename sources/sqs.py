"""Messages of an SQS queue as items, deleted only once their batch is done.

A message body is a JSON object; an item's key is a 1-tuple of its ``key``
field (``a.b`` reaches into nested objects) and its payload the body text.
Receipt handles never leave the source: it remembers every handle of every
key it handed out (SQS may deliver a message twice, and producers may send
the same key twice) until the key's batch is acked (all are deleted) or
released (all become visible again). A message of a key some batch elsewhere
still holds (another daemon took the batch over) is left invisible, and
deleted by a later receive once that batch is done. Poison messages go to the
dead-letter queue, or to ``on_poison``, and are deleted, so they never block
the others.
An item's ``handle`` is only its message id, for logs.

:class:`SqsSource` decides what each receive comes to; its parts have jobs of
their own: ``sources/sqs_calls.py`` (the SQS requests and their errors),
``sources/sqs_messages.py`` (a body's key; setting poison aside),
``sources/sqs_inflight.py`` (the handles held per key, the keys done) and
``sources/sqs_counts.py`` (the queue's backlog, and whether it is drained).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from config.errors import ConfigError, SluiceError, SourceError
from config.models import SqsSourceConfig
from sources.abc import Item, LimitedSource
from sources.sqs_calls import BATCH, MAX_WAIT, Message, QueueCalls
from sources.sqs_counts import QueueCounts
from sources.sqs_inflight import InFlight
from sources.sqs_messages import KeyField, KeyTuple, PoisonHandler, PoisonSetAside

__all__ = ["ClaimLookup", "KeyTuple", "Message", "SqsSource"]

log = logging.getLogger(__name__)

ClaimLookup = Callable[[list[KeyTuple]], dict[KeyTuple, bool]]
"""Which of these keys some batch claimed, each mapped to whether that batch is done."""

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
    handed out nor deleted, and does not count towards ``max_receives``: it
    is held off, kept invisible by :meth:`extend_visibility` (not received
    again and again: a redrive policy would dead-letter it) until that batch
    is done (deleted) or let go (visible again). ``exhausted`` once two receives in a row came back
    empty, the second made ``drain_quiet`` (default ``visibility_timeout``)
    or more after the last message: a message a killed daemon had received
    is visible again within its visibility timeout. SQS's approximate counts
    lag by up to a minute on real SQS, so they never make that decision
    (they are logged while waiting).

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
        on_poison: PoisonHandler | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
        done_cache_size: int = 100_000,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self._sqs = QueueCalls(name, cfg, client)
        self._claims = claims
        self._clock = clock
        self._key = KeyField(cfg.key)
        self._visibility = min(_MAX_VISIBILITY, math.ceil(cfg.visibility_timeout))
        self._in_flight = InFlight(self._visibility, cfg.max_receives, done_cache_size)
        self._poison = PoisonSetAside(name, self._sqs, cfg.dead_letter_queue_url, on_poison)
        self._counts = QueueCounts(name, self._sqs, held=self._in_flight.messages)
        self._quiet = cfg.visibility_timeout if cfg.drain_quiet is None else cfg.drain_quiet
        # From the start: a daemon killed just before this one started may hold
        # messages that come back only after their visibility timeout.
        self._last_message = clock()
        self._empty_streak = 0
        self._drained = False

    @property
    def client(self) -> Any:
        """The boto3 SQS client: the one given, or one made for this source."""
        return self._sqs.client

    @property
    def exhausted(self) -> bool:
        """Two empty receives in a row, the second a quiet period after the last message."""
        return self._drained

    def in_flight(self) -> int:
        """Keys handed out and not yet acked or released."""
        return self._in_flight.keys()

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
        calls = self._sqs.quick()  # one short try: an endpoint away is waited for later
        try:
            for what, url in queues:
                if url is None:
                    continue
                try:
                    calls.attributes(f"check {what}", url, ["QueueArn"])
                except SourceError as exc:
                    if exc.transient:
                        raise
                    raise ConfigError(f"{exc} (region {self.cfg.region})") from exc
        finally:
            calls.close()

    def backlog(self) -> int:
        """Messages waiting in the queue (SQS's ``ApproximateNumberOfMessages``).

        Read-only; in-flight messages (received, not yet deleted) are not
        counted. Raises :class:`SourceError` like :meth:`next_batch`.
        """
        return self._counts.visible()

    def next_batch(self, limit: int) -> list[Item]:
        """Receive until ``limit`` new items or an empty receive (blocking: see the class)."""
        items: list[Item] = []
        wait = self.cfg.wait_time
        if self._empty_streak >= 2 and not self._drained:
            # Waiting out the quiet period, or for batches elsewhere to end
            # (held-off messages): one long poll, not a busy loop.
            left = self._quiet - (self._clock() - self._last_message)
            wait = MAX_WAIT if self._in_flight.held_off() else max(wait, left, 1.0)
        while len(items) < limit:
            asked_at = self._clock()
            try:
                messages = self._sqs.receive(min(BATCH, limit - len(items)), wait, self._visibility)
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
                # Asked a quiet period after the last message: every message
                # received elsewhere before it would have been visible again.
                quiet_for = asked_at - self._last_message
                self._drained = (
                    self._empty_streak >= 2
                    and quiet_for >= self._quiet
                    and not self._in_flight.held_off()
                )
                # One empty receive ends a refill that found something; a
                # refill that found nothing asks once more. Not drained yet,
                # the next refill comes at once and long-polls (see above).
                if items or self._empty_streak >= 2:
                    if not items and not self._drained:
                        self._counts.log_waiting(self._quiet - quiet_for)
                    break
                continue
            self._empty_streak = 0
            self._drained = False
            self._last_message = self._clock()
            self._counts.quiet_ended()
            items.extend(self._sort(messages))
        return items

    def ack(self, items: Sequence[Item]) -> None:
        """Delete every message of the items' keys; remember the keys as done."""
        self._sqs.delete(self._in_flight.finish(item.key for item in items))

    def release(self, items: Sequence[Item]) -> None:
        """Make every message of the items' keys visible again at once."""
        self._sqs.set_visibility("release", self._in_flight.give_back(i.key for i in items), 0)

    def extend_visibility(self) -> int:
        """Heartbeat: keep every in-flight message invisible for ``visibility_timeout`` more.

        Call it every ``visibility_timeout / 3`` or so. Returns how many
        messages were extended; a late heartbeat (some visibility already ran
        out, so SQS may have delivered those messages again) is logged.
        Held-off messages are settled first: deleted once the batch holding
        their key is done, made visible once no batch holds it.
        """
        self._settle_held_off()
        handles, lapsed = self._in_flight.renew(self._clock())
        if lapsed:
            log.warning(
                "source %s: visibility of %d keys ran out before the heartbeat; "
                "their messages may be delivered again",
                self.name,
                lapsed,
            )
        failed = self._sqs.set_visibility("extend visibility of", handles, self._visibility)
        return len(handles) - failed

    def close(self) -> None:
        """Close the HTTP connections of a client this source created."""
        self._sqs.close()

    def _settle_held_off(self) -> None:
        keys = self._in_flight.held_off()
        if not keys:
            return
        try:
            claimed = self._look_up_claims(keys)
        except SourceError as error:  # the heartbeat goes on: they stay held off
            log.warning("source %s: cannot look up held-off keys: %s", self.name, error)
            return
        to_delete, to_release = self._in_flight.settle(claimed)
        self._sqs.delete(to_delete)
        self._sqs.set_visibility("release", to_release, 0)
        log.debug(
            "source %s: held off %d keys (batches elsewhere not done), %d messages deleted "
            "(done), %d given back (let go)",
            self.name,
            len(keys),
            len(to_delete),
            len(to_release),
        )

    def _sort(self, messages: list[Message]) -> list[Item]:
        """Turn one receive into new items; set aside duplicates, claimed keys and poison."""
        poison: list[tuple[Message, str]] = []
        keyed: list[tuple[Message, KeyTuple]] = []
        for message in messages:
            key, reason = self._key.read(message["Body"])
            if key is None:
                poison.append((message, reason))
            else:
                keyed.append((message, key))
        to_delete: list[str] = []
        fresh = self._in_flight.sift(keyed, to_delete)
        claimed = self._look_up_claims(list(dict.fromkeys(k for _, k in fresh)))
        intake = self._in_flight.take_in(fresh, claimed, self._clock(), to_delete)
        poison += intake.too_often
        if intake.held_off:
            log.debug(
                "source %s: %d messages of keys held by a batch not done yet held off "
                "until it is",
                self.name,
                intake.held_off,
            )
        to_delete += self._poison.set_aside(poison)
        self._sqs.delete(to_delete)
        return [Item(self.name, key, m["Body"], handle=m["MessageId"]) for m, key in intake.held]

    def _look_up_claims(self, keys: list[KeyTuple]) -> dict[KeyTuple, bool]:
        if not keys:
            return {}
        try:
            return self._claims(keys)
        except Exception as exc:  # the ledger's errors are not ours to classify
            raise SourceError(f"source {self.name}: claims look-up failed: {exc}") from exc
