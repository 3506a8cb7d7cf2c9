"""A stream's batches in turn: one claimed ahead at most, started as the one before it ends.

A stream source's batches apply in the stream's order (the target's position
is a compare-and-set, :mod:`spark_jobs.changes.apply_changes`). The feeder claims a
stream's next batch while the one before it imports;
:class:`~scheduler.inflight.BatchesInFlight` holds it here until that batch
ends, and until no batch of a full load's ranges of that stream is in flight
(those import side by side and need none before them,
:mod:`spark_jobs.changes.load_ranges`). A stream whose batch failed claims nothing
more until a batch of it succeeds: what it claimed would only fail as before its turn.
"""

from __future__ import annotations

from spark_jobs.changes.change_batches import only_ranges
from spark_jobs.common.manifest import Manifest


class StreamTurns:
    """The held batch of each stream (with the id of the batch it waits for), and the streams
    whose batch failed and waits for its retry. Not thread-safe: its owner's lock guards it.
    """

    def __init__(self) -> None:
        self._next: dict[str, tuple[str, Manifest]] = {}
        self._stalled: set[str] = set()

    def holds(self, source: str) -> bool:
        """Whether stream ``source`` may claim no batch now: one waits here, or one failed."""
        return source in self._next or source in self._stalled

    def hold(self, manifest: Manifest, before: str) -> None:
        """``manifest`` waits for batch ``before`` of its stream (dispatched last)."""
        assert manifest.source not in self._next, "one batch of a stream waits at most"
        self._next[manifest.source] = (before, manifest)

    def waits(self, manifest: Manifest, before: list[str]) -> bool:
        """Whether ``manifest`` waits here for the last of ``before`` (its stream's batches in
        flight, in the order dispatched): a full load's ranges need none before them."""
        if not before or only_ranges(manifest.payloads):
            return False
        self.hold(manifest, before[-1])
        return True

    def go_on(self, source: str, after: str, others: list[str], *, applied: bool
              ) -> Manifest | None:  # fmt: skip
        """The batch of ``source`` that waited for batch ``after`` (which just ended) and goes
        on now; None when none waits for it, or when ``after`` is in the target (``applied``)
        and others of ``others`` (the stream's batches in flight) still import: it waits for
        the last of them then (ranges of a full load, side by side)."""
        manifest = self.take(source, after)
        if manifest is None:
            return None
        left = [o for o in others if o not in (after, manifest.batch_id)]
        if applied and left:
            self.hold(manifest, left[-1])
            return None
        return manifest

    def take(self, source: str, after: str) -> Manifest | None:
        """The batch of ``source`` that waited for batch ``after`` (which just ended), no
        longer held; None when none waits for it."""
        waiting = self._next.get(source)
        if waiting is None or waiting[0] != after:
            return None  # none waits, or it waits for another (a batch ahead of this one)
        del self._next[source]
        return waiting[1]

    def ended(self, manifest: Manifest, *, ok: bool, waits: bool = False) -> None:
        """A batch ended: a stream's success lets it claim again; its failure, but one of a
        batch before its turn, stops its claims until then."""
        if manifest.kind != "changes":
            return
        if ok:
            self._stalled.discard(manifest.source)
        elif not waits:
            self._stalled.add(manifest.source)
