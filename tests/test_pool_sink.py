"""PoolSink: batches queue for its threads; batches of one group waiting together share a job."""

from __future__ import annotations

import threading
from collections.abc import Hashable

import pytest

from sinks.abc import PoolSink, SinkClosed
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult


class Recording(PoolSink):
    """One thread; batches of a source form a group, except source ``solo``'s.

    Each import (alone or grouped) waits for :attr:`go` to be set, so that
    the test decides what is queued when the thread frees up.
    """

    max_group = 3

    def __init__(self) -> None:
        super().__init__(1, "test-sink")
        self.jobs: list[list[str]] = []
        self.go = threading.Event()
        self.started = threading.Event()

    def _group_key(self, manifest: Manifest) -> Hashable | None:
        return None if manifest.source == "solo" else manifest.source

    def _run(self, ticket: int, manifest: Manifest) -> ImportResult:
        self._job([manifest])
        if manifest.batch_id.startswith("bad"):
            raise ValueError(f"{manifest.batch_id} failed")
        return ImportResult(manifest.batch_id, manifest.items, manifest.items, manifest.target)

    def _run_group(
        self, tickets: list[int], manifests: list[Manifest]
    ) -> list[ImportResult | BaseException]:
        self._job(manifests)
        return [
            ValueError(f"{m.batch_id} failed")
            if m.batch_id.startswith("bad")
            else ImportResult(m.batch_id, m.items, m.items, m.target)
            for m in manifests
        ]

    def _job(self, manifests: list[Manifest]) -> None:
        self.jobs.append([m.batch_id for m in manifests])
        self.started.set()
        assert self.go.wait(10)

    def close(self, wait: bool = True) -> None:
        with self._lock:
            self._closed = True
        self._shutdown(wait)


def batch(batch_id: str, source: str = "orders", items: int = 10) -> Manifest:
    return Manifest(batch_id, source, "wh.t", "range", items, 1, None, [1])


def test_batches_of_a_group_waiting_together_share_one_job_and_keep_their_own_futures() -> None:
    sink = Recording()
    first = sink.submit(batch("a-1"))
    assert sink.started.wait(10)  # a-1 runs alone: nothing else was waiting
    waiting = {
        name: sink.submit(batch(name, source))
        for name, source in [
            ("a-2", "orders"),
            ("b-1", "users"),
            ("bad-a-3", "orders"),
            ("s-1", "solo"),
            ("a-4", "orders"),
            ("s-2", "solo"),
            ("a-5", "orders"),
        ]
    }
    assert sink.in_flight() == 8 and sink.pending_items() == 80
    sink.go.set()
    assert first.result(10).rows_written == 10
    for name, future in waiting.items():
        if name.startswith("bad"):
            with pytest.raises(ValueError, match="bad-a-3 failed"):
                future.result(10)
        else:
            assert future.result(10).batch_id == name
    sink.close()
    # At most max_group per job; the others keep their turn, in order.
    assert sink.jobs == [["a-1"], ["a-2", "bad-a-3", "a-4"], ["b-1"], ["s-1"], ["s-2"], ["a-5"]]
    assert sink.in_flight() == 0 and sink.pending_items() == 0


def test_closing_without_waiting_cancels_what_is_queued() -> None:
    sink = Recording()
    running = sink.submit(batch("a-1"))
    assert sink.started.wait(10)
    queued = [sink.submit(batch("a-2")), sink.submit(batch("s-1", "solo"))]
    sink.close(wait=False)
    assert all(f.cancelled() for f in queued)
    with pytest.raises(SinkClosed):
        sink.submit(batch("a-3"))
    sink.go.set()
    assert running.result(10).batch_id == "a-1"
    assert sink.jobs == [["a-1"]]


def test_an_error_of_the_whole_group_reaches_every_batch_of_it() -> None:
    class Broken(Recording):
        def _run_group(
            self, tickets: list[int], manifests: list[Manifest]
        ) -> list[ImportResult | BaseException]:
            self._job(manifests)
            raise RuntimeError("the job died")

    sink = Broken()
    sink.submit(batch("a-1"))
    assert sink.started.wait(10)
    grouped = [sink.submit(batch("a-2")), sink.submit(batch("a-3"))]
    sink.go.set()
    for future in grouped:
        with pytest.raises(RuntimeError, match="the job died"):
            future.result(10)
    sink.close()
