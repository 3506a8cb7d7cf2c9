"""A stream source's batches claimed in the ledger: positions of its change stream.

Like a keyset walk's ranges, a stream source's spans are claimed by a
compare-and-set on the source's high-water mark (here, the last stream
position claimed), with their events and the full load's progress after them
(:func:`~scheduler.ledger.store.claim_changes`). The batches then apply in
the stream's order, one after the other: the feeder claims a stream's next
batch while the one before it imports and hands it to the sink once that one
is in the target (:meth:`~scheduler.inflight.BatchesInFlight.dispatch_in_turn`),
and a target refuses a batch whose predecessor it does not hold yet
(:mod:`spark_jobs.changes.apply_changes`).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import cast

from config.errors import ClaimConflict
from scheduler.ledger import Checkpoint, Ledger
from scheduler.ledger.store import claim_changes
from sources.abc import Item
from sources.stream import StreamSource
from spark_jobs.common.manifest import Manifest

log = logging.getLogger("sluice.loop")


def claim_stream(
    ledger: Ledger, stream: StreamSource, checkpoints: MutableMapping[str, Checkpoint],
    batch_id: str, items: list[Item],
) -> Manifest | None:  # fmt: skip
    """Claim ``stream``'s spans ``(high-water, last position]``; None when they were dropped.

    The spans must continue the mark: they do while the walk is this
    daemon's. When another daemon claimed (the mark moved) or the spans are
    of an earlier walk, the batch is dropped and the walk starts again from
    the ledger's mark and progress: its spans would repeat or skip what the
    other daemon's batches hold. ``checkpoints`` is updated.
    """
    source = stream.name
    checkpoint = checkpoints[source]
    if any(item.handle != stream.epoch for item in items):
        return None
    changes = [text for item in items for text in item.payload]
    last = items[-1]
    position = list(cast(tuple[int, int], last.key))
    try:
        manifest, checkpoints[source] = claim_changes(
            ledger, batch_id, source, stream.cfg.target, checkpoint, position, changes,
            [last.version],
        )
    except ClaimConflict:
        checkpoints[source] = checkpoint = ledger.sources.checkpoint(source)
        resume = checkpoint.resume_after
        stream.reset(checkpoint.high_water, None if resume is None else resume[0])
        log.info("source %s: another daemon claimed the stream up to %s; reading on from "
                 "there", source, checkpoint.high_water)  # fmt: skip
        return None
    return manifest
