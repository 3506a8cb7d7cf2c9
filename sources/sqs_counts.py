"""How many messages an SQS queue holds, as SQS counts them (approximately).

:class:`QueueCounts` answers the backlog ``sluice plan`` reports, and
says what may still be out while the source waits for a quiet period
before calling the queue drained (the counts never decide it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from config.errors import SluiceError
from sources.sqs_calls import QueueCalls

# One logger name for the whole SQS source (see sources.sqs_calls).
log = logging.getLogger("sources.sqs")

_ALL = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


class QueueCounts:
    """The message counts of source ``name``'s queue, ``held`` of them by the source itself.

    ``held`` returns how many messages the source holds (received, not yet
    deleted or given back). Both methods block on SQS and raise
    :class:`SourceError` like :meth:`QueueCalls.call`; they change nothing.
    """

    def __init__(self, name: str, sqs: QueueCalls, held: Callable[[], int]) -> None:
        self.name = name
        self._sqs = sqs
        self._held = held
        self._waiting = False  # for messages received elsewhere (logged once per wait)

    def visible(self) -> int:
        """Messages waiting in the queue (SQS's ``ApproximateNumberOfMessages``)."""
        attrs = self._sqs.attributes(
            "count messages of", self._sqs.cfg.queue_url, ["ApproximateNumberOfMessages"]
        )
        return int(attrs.get("ApproximateNumberOfMessages", 0))

    def log_waiting(self, left: float) -> None:
        """Say, once per wait, that the queue is not called drained for ``left`` more seconds.

        The counts SQS gives are approximate (they lag by up to a minute on
        real SQS), so they only say what may be out; they decide nothing. A
        failure to read them is not worth a refill's failure.
        """
        if self._waiting or left <= 0:
            return
        self._waiting = True
        try:
            attrs = self._sqs.attributes("count the messages of", self._sqs.cfg.queue_url, _ALL)
        except SluiceError:
            attrs = {}
        out = max(0, sum(int(attrs.get(name, 0)) for name in _ALL) - self._held())
        log.info(
            "source %s: no message for now; the queue is called drained after %.0f s more "
            "without one (messages received elsewhere come back within their visibility "
            "timeout; SQS counts about %d out)",
            self.name,
            left,
            out,
        )

    def quiet_ended(self) -> None:
        """A message came, or the queue was called drained: the next wait is logged again."""
        self._waiting = False
