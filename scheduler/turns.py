"""A stream's batches in turn: one claimed ahead at most, started as the one before it ends.

A stream source's batches apply in the stream's order (the target's position
is a compare-and-set, :mod:`spark_jobs.apply_changes`). The feeder claims a
stream's next batch while the one before it imports;
:class:`~scheduler.inflight.BatchesInFlight` holds it here until that batch
ends, and until no batch of a full load's ranges of that stream is in flight
(those import side by side and need none before them,
:mod:`spark_jobs.load_ranges`). A stream whose batch failed claims nothing more until a batch of it
succeeds: what it claimed would only fail as before its turn.
"""

from __future__ import annotations

from spark_jobs.manifest import Manifest


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
