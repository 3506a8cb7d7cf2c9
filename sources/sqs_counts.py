"""How many messages an SQS queue holds, as SQS counts them (approximately).

:class:`QueueCounts` answers two questions: the backlog ``sluice plan``
reports, and whether a queue that gave two empty receives is drained.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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

    def left_elsewhere(self) -> int:
        """Messages on the queue beyond those the source holds, as SQS counts them.

        Two empty receives do not mean the queue is drained: a daemon killed
        with ``kill -9`` between receive and claim (or another daemon, or a
        delete that failed) leaves messages invisible until their visibility
        timeout, and ``--until-drained`` would end with those records never
        migrated. Visible and delayed messages count too, so that messages
        coming back just after an empty receive are not missed.
        """
        attrs = self._sqs.attributes("count the messages of", self._sqs.cfg.queue_url, _ALL)
        left = max(0, sum(int(attrs.get(name, 0)) for name in _ALL) - self._held())
        if left and not self._waiting:
            log.info(
                "source %s: %d messages received elsewhere are not back yet; "
                "the queue is not drained until they are",
                self.name,
                left,
            )
        self._waiting = left > 0
        return left
