"""A stream's batches one after the other, without waiting for the ledger between them.

A stream source's batches apply in the stream's order. The feeder claims the
next one while the one before it imports, and
:meth:`~scheduler.inflight.BatchesInFlight.dispatch_in_turn` holds it until
that one ends: it goes to the sink the moment the one before is in the target,
before the ledger records that one's end (the claim and the record are off the
stream's path). After a failure it does not run: it waits in the ledger, its
attempt not counted, and runs as a retry (the target makes it wait its turn).
The ledger is a real SQLite ledger; the sink is the test's, whose imports end
when the test says.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from config.loader import load_config_text
from config.models import SluiceConfig
from scheduler.inflight import BatchesInFlight
from scheduler.ledger import Ledger, fingerprint
from scheduler.stats import RunStats
from spark_jobs.common.manifest import Manifest
from spark_jobs.common.outcomes import BatchImportFailed, ImportResult

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  items: {kind: sql, url: "sqlite:///s.db", table: items, key: id, target: lake.items}
targets:
  lake: {kind: parquet, path: ./lake}
retry: {max_attempts: 3, backoff: 30s, max_backoff: 60s}
"""


class HeldSink:
    """Imports that end when the test ends them; what happened, in order, in ``events``."""

    parallel = 2

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.futures: dict[str, Future[ImportResult]] = {}

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        self.events.append(f"submit {manifest.batch_id}")
        future: Future[ImportResult] = Future()
        self.futures[manifest.batch_id] = future
        return future

    def in_flight(self) -> int:
        return sum(not f.done() for f in self.futures.values())

    def end(self, batch_id: str) -> None:
        self.futures[batch_id].set_result(ImportResult(batch_id, 1, 1, "lake.items", False))

    def fail(self, batch_id: str) -> None:
        self.futures[batch_id].set_exception(BatchImportFailed("connection lost"))


def _setup(tmp_path: Path) -> tuple[SluiceConfig, Ledger, HeldSink, BatchesInFlight, list[str]]:
    cfg = load_config_text(CONFIG, str(tmp_path / "sluice.yaml"))
    ledger = Ledger(cfg.ledger)
    ledger.owners.register()
    ledger.sources.register("items", fingerprint(cfg.sources["items"]))
    events: list[str] = []
    finish = ledger.finish

    def recorded_finish(batch_id: str, *args: object, **kwargs: object) -> object:
        events.append(f"done in the ledger {batch_id}")
        return finish(batch_id, *args, **kwargs)  # type: ignore[arg-type]

    ledger.finish = recorded_finish  # type: ignore[method-assign]
    sink = HeldSink(events)
    inflight = BatchesInFlight(ledger, sink, {}, RunStats(), cfg.retry,  # type: ignore[arg-type]
                               threading.Event(), die=lambda e: None, halt=lambda e: None)
    return cfg, ledger, sink, inflight, events


def _claim(ledger: Ledger, batch_id: str, key: int) -> Manifest:
    manifest = ledger.claim_keys(batch_id, "items", "lake.items", [[key]], begin=True)
    assert manifest is not None
    return manifest


def _claim_while_recording(
    ledger: Ledger, inflight: BatchesInFlight, ending: str, claimed: Manifest
) -> None:
    """Have the loop dispatch ``claimed`` in turn right after the ledger records the end of
    batch ``ending`` (while its import's end is still being handled)."""
    finish = ledger.finish

    def finish_then_claim(batch_id: str, *args: object, **kwargs: object) -> object:
        done = finish(batch_id, *args, **kwargs)  # type: ignore[arg-type]
        if batch_id == ending:
            inflight.dispatch_in_turn(claimed)
        return done

    ledger.finish = finish_then_claim  # type: ignore[method-assign]


def test_the_next_batch_of_a_stream_goes_once_the_one_before_is_in_the_target(
    tmp_path: Path,
) -> None:
    _, ledger, sink, inflight, events = _setup(tmp_path)
    inflight.dispatch_in_turn(_claim(ledger, "b1", 1))
    inflight.dispatch_in_turn(_claim(ledger, "b2", 2))
    assert events == ["submit b1"]  # b2 waits for b1
    assert inflight.has_next("items") and inflight.busy()

    sink.end("b1")
    # b2 went before the ledger heard of b1's end: nothing waited for the ledger.
    assert events == ["submit b1", "submit b2", "done in the ledger b1"]
    assert not inflight.has_next("items")

    inflight.dispatch_in_turn(_claim(ledger, "b3", 3))
    sink.end("b2")
    sink.end("b3")
    assert events[3:] == ["submit b3", "done in the ledger b2", "done in the ledger b3"]
    assert not inflight.busy()
    assert {ledger.reads.state_of(b) for b in ("b1", "b2", "b3")} == {"done"}


def test_after_a_failure_the_next_batch_waits_in_the_ledger_and_runs_as_a_retry(
    tmp_path: Path,
) -> None:
    _, ledger, sink, inflight, events = _setup(tmp_path)
    inflight.dispatch_in_turn(_claim(ledger, "b1", 1))
    inflight.dispatch_in_turn(_claim(ledger, "b2", 2))
    sink.fail("b1")
    # b1 waits for its retry's backoff; b2 never ran: it is failed in the ledger, its
    # attempt not counted, due at once (nothing is held here: a stop drains at once).
    assert events == ["submit b1"]
    assert not inflight.busy() and not inflight.has_next("items")
    assert ledger.reads.state_of("b1") == ledger.reads.state_of("b2") == "failed"
    due = [m.batch_id for m in ledger.reads.due_retries(["items"], ledger.clock())]
    assert due == ["b2"]  # b1's backoff has not passed; b2 has none
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        [(error,)] = db.execute("SELECT error FROM sluice_batches WHERE id = 'b2'").fetchall()
    assert "waits for batch b1 before it, which failed" in error


def test_a_batch_of_another_source_is_not_held(tmp_path: Path) -> None:
    _, ledger, sink, inflight, events = _setup(tmp_path)
    inflight.dispatch_in_turn(_claim(ledger, "b1", 1))
    ledger.sources.register("other", "digest")
    other = ledger.claim_keys("o1", "other", "lake.other", [[1]], begin=True)
    assert other is not None
    inflight.dispatch_in_turn(other)
    assert events == ["submit b1", "submit o1"]


def test_the_batch_after_next_waits_for_the_next_not_for_the_one_that_ended(
    tmp_path: Path,
) -> None:
    _, ledger, sink, inflight, events = _setup(tmp_path)
    # The loop claims b3 while b1's end is recorded, b2 importing.
    _claim_while_recording(ledger, inflight, "b1", _claim(ledger, "b3", 3))
    inflight.dispatch_in_turn(_claim(ledger, "b1", 1))
    inflight.dispatch_in_turn(_claim(ledger, "b2", 2))
    sink.end("b1")
    assert events == ["submit b1", "submit b2", "done in the ledger b1"]  # b3 waits for b2
    assert inflight.has_next("items")
    sink.end("b2")
    assert events[3:] == ["submit b3", "done in the ledger b2"]


def test_a_batch_held_while_the_one_before_records_its_end_goes_when_that_one_is_done(
    tmp_path: Path,
) -> None:
    _, ledger, sink, inflight, events = _setup(tmp_path)
    # Claimed after b1's import, before b1 has left the flight.
    _claim_while_recording(ledger, inflight, "b1", _claim(ledger, "b2", 2))
    inflight.dispatch_in_turn(_claim(ledger, "b1", 1))
    sink.end("b1")
    assert events == ["submit b1", "done in the ledger b1", "submit b2"]
    sink.end("b2")
    assert not inflight.busy()


def test_a_stream_whose_batch_failed_claims_nothing_until_one_of_its_batches_succeeds(
    tmp_path: Path,
) -> None:
    _, ledger, sink, inflight, _ = _setup(tmp_path)

    def changes(batch_id: str, key: int) -> Manifest:
        return replace(_claim(ledger, batch_id, key), kind="changes")

    inflight.dispatch_in_turn(changes("b1", 1))
    sink.fail("b1")
    assert inflight.has_next("items")  # b1 waits for its retry: claiming b2 would not help
    inflight.dispatch(changes("b2", 2), begun=True)  # one that failed as before its turn
    failed = BatchImportFailed("before its turn")
    failed.waits = True
    sink.futures["b2"].set_exception(failed)
    assert inflight.has_next("items")
    inflight.dispatch(changes("b3", 3), begun=True)  # b1's retry, say
    sink.end("b3")
    assert not inflight.has_next("items")
