"""Opening a run's sources: each built and checked, then all registered, then buffered.

Registered sources resume after their claim high-water mark (keyset) or
their resume point (incremental) and are read
through a :class:`~sources.queueing.QueueingLimitedSource`. Sources look the
ledger up to skip what is claimed already (sweep) or to know which messages
may be deleted (SQS).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from config.errors import SourceError
from config.models import SluiceConfig, SqlSourceConfig, SqsSourceConfig, split_target
from scheduler.background import Background
from scheduler.batch_size import range_bytes, range_rows
from scheduler.ledger import Checkpoint, Ledger, encode_key, fingerprint
from sources.abc import LimitedSource
from sources.budgets import Budgets
from sources.queueing import QueueingLimitedSource

if TYPE_CHECKING:
    from sources.sql import SqlSource
    from sources.sqs import SqsSource
    from sources.stream import StreamSource

KeyTuple = tuple[Any, ...]
# The daemon's logger: opening sources is part of its start.
log = logging.getLogger("sluice.daemon")


class SourceOpener:
    """Builds the configured sources, wired to the ledger's look-ups, and buffers them.

    ``on_refill`` and ``on_failed`` are each buffer's callbacks (a refill
    landed; the refills were given up), called on its refill thread. An SQS
    source's visibility heartbeat is added to ``background``'s jobs. A SQL
    source's key queries hold permits of its database's budget in ``budgets``.
    """

    def __init__(
        self,
        ledger: Ledger,
        background: Background,
        config_path: str,
        *,
        on_refill: Callable[[], None],
        on_failed: Callable[[SourceError], None],
        budgets: Budgets | None = None,
    ) -> None:
        self.ledger = ledger
        self.budgets = budgets
        self.background = background
        self.config_path = config_path
        self._on_refill = on_refill
        self._on_failed = on_failed

    def open(
        self, cfg: SluiceConfig, queues: dict[str, QueueingLimitedSource],
        away: Mapping[str, str] | None = None,
    ) -> dict[str, Checkpoint]:  # fmt: skip
        """Open every source of ``cfg`` into ``queues``; their claim checkpoints.

        ``away``: the source databases that did not answer at start (URL → why,
        :func:`sources.reach.unreachable`): their sources are checked before their
        first read instead, on their refill threads. Raises what a source's check
        raises, with every source built so far closed.
        """
        # Every source is checked before any is registered in the ledger: a
        # start that fails a check (a wrong key column) must leave no
        # fingerprint behind, or fixing the config would be refused with
        # "sluice reset" although nothing was ever claimed.
        sources: dict[str, LimitedSource] = {}
        try:
            from sources.stream_backends import check_distinct

            check_distinct({n: s for n, s in cfg.sources.items() if isinstance(s, SqlSourceConfig)})
            for name, src_cfg in cfg.sources.items():
                sources[name] = self._make_source(name, src_cfg, cfg)
            from sources.sql import SqlSource, check_together

            away = away or {}
            for name, source in sources.items():
                if isinstance(source, SqlSource) and source.cfg.url in away:
                    source.answered = False
                    log.warning("source %s: its database did not answer at start (%s): it "
                                "starts empty and is asked again in the background", name,
                                away[source.cfg.url])  # fmt: skip
            check_together([s for s in sources.values() if isinstance(s, SqlSource) and s.answered])
            checkpoints = self.ledger.sources.register_all(
                {name: fingerprint(src_cfg) for name, src_cfg in cfg.sources.items()},
                config_path=self.config_path,
            )
            from sources.stream import StreamSource, check_resumable

            for name, source in sources.items():
                if isinstance(source, StreamSource):
                    check_resumable(source, checkpoints[name].high_water)
        except BaseException:
            for source in sources.values():
                _undo_start(source)
                source.close()
            raise
        for name, source in sources.items():
            _resume(source, checkpoints[name])
            src_cfg = cfg.sources[name]
            queues[name] = QueueingLimitedSource(
                source,
                capacity=src_cfg.buffer.capacity,
                replenish_below=src_cfg.buffer.replenish_below,
                on_refill=self._on_refill,
                on_failed=self._on_failed,
            )
        return checkpoints

    def _make_source(self, name: str, src_cfg: object, cfg: SluiceConfig) -> LimitedSource:
        """Build a source and check that it can be read (raises what ``check()`` raises)."""
        if isinstance(src_cfg, SqlSourceConfig) and src_cfg.mode == "stream":
            from sources.stream import StreamSource

            stream = StreamSource(
                name, src_cfg, budget=None if self.budgets is None else self.budgets.of(name),
                committed=target_position(cfg, name),
            )
            _check(stream)
            return stream
        if isinstance(src_cfg, SqlSourceConfig):
            from sources.sql import SqlSource

            source = SqlSource(
                name, src_cfg, is_done=self._done_lookup(name),
                range_rows=range_rows(src_cfg, cfg), range_bytes=range_bytes(src_cfg, cfg),
                budget=None if self.budgets is None else self.budgets.of(name),
            )  # fmt: skip
            return source  # checked with the others of its database (check_together)
        from sources.sqs import SqsSource

        assert isinstance(src_cfg, SqsSourceConfig)
        sqs = SqsSource(
            name, src_cfg, claims=claims_lookup(self.ledger, name),
            on_poison=self.ledger.sources.record_poison,
        )
        try:
            sqs.check()
        except SourceError as error:
            if not error.transient:
                sqs.close()
                raise
            # Away is not wrong: SQS down or out of reach at start, the source starts empty
            # and its receives ask again with backoff, as a database away does (a queue or
            # credentials it then refuses fail its refills for good, loudly).
            log.warning("%s: SQS did not answer at start (%s); its refills ask again with "
                        "backoff", name, error)  # fmt: skip
        # Keep claimed messages invisible while their batch is imported.
        self.background.every(
            max(1.0, src_cfg.visibility_timeout / 3), sqs.extend_visibility, f"heartbeat-{name}"
        )
        return sqs

    def _done_lookup(self, name: str) -> Callable[[Sequence[KeyTuple]], set[KeyTuple]]:
        """For sweep mode: which of these keys some batch already claimed."""

        def lookup(keys: Sequence[KeyTuple]) -> set[KeyTuple]:
            encoded = {encode_key(key): key for key in keys}
            taken = self.ledger.reads.claimed_keys(name, list(encoded))
            return {encoded[text] for text in taken}

        return lookup


# Batch states whose keys' messages may be deleted. Dead too: the loop deleted
# a dead batch's messages when it died (the ledger keeps the payloads for
# `sluice retry`); a late duplicate held back would cycle on the queue until an
# operator acts, and the source would never count as drained.
_MESSAGES_DONE = frozenset({"done", "dead"})


def claims_lookup(
    ledger: Ledger, name: str
) -> Callable[[list[KeyTuple]], dict[KeyTuple, bool]]:
    """For an SQS source: which keys some batch claimed, each with whether it is done.

    "Done" here means its messages may be deleted: the batch is done or dead.
    A key held by a batch that is claimed, importing or failed maps to False,
    and its messages are kept until that batch ends (see
    :class:`sources.sqs.SqsSource`). One ledger query per call.
    """

    def lookup(keys: list[KeyTuple]) -> dict[KeyTuple, bool]:
        encoded = {encode_key(key): key for key in keys}
        states = ledger.reads.key_states(name, list(encoded))
        return {encoded[text]: state in _MESSAGES_DONE for text, state in states.items()}

    return lookup


def target_position(cfg: SluiceConfig, name: str) -> Callable[[], list[int] | None]:
    """For a stream source: the stream's position its target has applied (None: none yet)."""
    target = cfg.targets[split_target(cfg.sources[name].target)[0]]
    url = getattr(target, "url", None)
    if url is None:
        return lambda: None
    with _positions_lock:
        positions = _positions.setdefault(url, _TargetPositions(url))
    return lambda: positions.of(name)


class _TargetPositions:
    """The positions one target holds for every stream into it, read at most every
    :attr:`FRESH` seconds: one query for the tables of a ``tables:`` group, not one per
    table at each of its reads (an older position only holds a slot back longer)."""

    FRESH = 0.2

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._read_at = -1e9
        self._found: dict[str, list[int]] = {}

    def of(self, name: str) -> list[int] | None:
        from spark_jobs.changes.positions import stream_positions
        from spark_jobs.common.jdbc import sql_engine

        with self._lock:
            if time.monotonic() - self._read_at > self.FRESH:
                self._found = stream_positions(sql_engine(self._url))
                self._read_at = time.monotonic()
            return self._found.get(name)


_positions: dict[str, _TargetPositions] = {}
_positions_lock = threading.Lock()


def _check(source: SqlSource | SqsSource | StreamSource) -> None:
    """Run the source's start check; undo what it made and close its connections if it
    fails."""
    try:
        source.check()
    except BaseException:
        _undo_start(source)
        source.close()
        raise


def _undo_start(source: LimitedSource) -> None:
    """Drop the slot and publication a stream source made in a start that then failed: left
    behind, a slot holds the source's WAL from then on (a failure here is logged, never
    raised: the start's own error says why it failed)."""
    from sources.stream import StreamSource

    if not isinstance(source, StreamSource):
        return
    try:
        dropped = source.backend.undo()
    except Exception as error:  # noqa: BLE001 - the start's error is the one to raise
        log.error("source %s: the start failed, and what it made on the source could not be "
                  "dropped: %s; drop it with sluice reset", source.name, error)  # fmt: skip
        return
    if dropped:
        log.warning("source %s: the start failed; dropped the %s it had made", source.name,
                    " and the ".join(dropped))  # fmt: skip


def _resume(source: LimitedSource, checkpoint: Checkpoint) -> None:
    """Start a keyset SQL source after its claim high-water mark, an incremental
    one after its resume point (every version read before it is done)."""
    from sources.sql import SqlSource
    from sources.stream import StreamSource

    if isinstance(source, StreamSource):
        resume = checkpoint.resume_after
        source.reset(checkpoint.high_water, None if resume is None else resume[0])
        if checkpoint.high_water is not None:
            log.info("source %s: resuming the stream after %s", source.name,
                     checkpoint.high_water)  # fmt: skip
        return
    if not isinstance(source, SqlSource):
        return
    after = checkpoint.resume_after if source.cfg.mode == "incremental" else checkpoint.high_water
    if after is not None:
        source.reset(tuple(after))
        log.info("source %s: resuming after %s", source.name, after)
