"""SetQueue: throughput of offer_many + poll_many, and memory per queued key.

Figures (each with its baseline, measured in this run):

- ``setqueue_offer_poll_int``: 1,000,000 int keys offered in refills of
  10,000 and polled in batches of 1,000, each batch acknowledged, in items/s.
  Baseline: a bare ``set`` + ``deque`` loop doing the same work with bulk
  operations (``isdisjoint`` to skip known keys, ``update``/``extend`` to
  queue, ``islice`` + ``popleft`` to poll, ``difference_update`` to forget),
  without a lock, held keys or batches.
- ``setqueue_bytes_per_int_key`` / ``setqueue_bytes_per_str_key``: memory
  traced by ``tracemalloc`` while 1,000,000 keys (ints; 20-character strings)
  are queued, per key, not counting the key objects themselves. Baseline: the
  same keys in a bare ``set`` + ``deque``.

Each timing is the best of several rounds, alternating SetQueue and baseline,
so that noise from other processes hits both alike.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import report  # noqa: E402
from sources.setqueue import SetQueue  # noqa: E402

N = 1_000_000
REFILL = 10_000
BATCH = 1_000
ROUNDS = 7


def setqueue_loop(keys: list[int]) -> None:
    q: SetQueue[int] = SetQueue(2 * REFILL)
    batch = 0
    for start in range(0, len(keys), REFILL):
        q.offer_many(keys[start : start + REFILL])
        while q.poll_many(BATCH, batch):
            q.ack(batch)
            batch += 1


def bare_loop(keys: list[int]) -> None:
    queued: set[int] = set()
    order: deque[int] = deque()
    for start in range(0, len(keys), REFILL):
        part = keys[start : start + REFILL]
        fresh = part if queued.isdisjoint(part) else [k for k in part if k not in queued]
        queued.update(fresh)
        order.extend(fresh)
        while order:
            taken = list(islice(order, BATCH))
            for _ in range(len(taken)):
                order.popleft()
            queued.difference_update(taken)


def best_rate(run: Callable[[list[int]], None], keys: list[int]) -> float:
    gc.collect()
    start = time.perf_counter()
    run(keys)
    return len(keys) / (time.perf_counter() - start)


def bytes_per_key(keys: list[object], fill: Callable[[list[object]], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        held = fill(keys)
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del held
    return current / len(keys)


def fill_setqueue(keys: list[object]) -> object:
    q: SetQueue[object] = SetQueue(len(keys))
    for start in range(0, len(keys), REFILL):
        q.offer_many(keys[start : start + REFILL])
    assert len(q) == len(keys)
    return q


def fill_bare(keys: list[object]) -> object:
    queued: set[object] = set()
    order: deque[object] = deque()
    for start in range(0, len(keys), REFILL):
        part = keys[start : start + REFILL]
        queued.update(part)
        order.extend(part)
    return queued, order


def main() -> None:
    keys = list(range(N))
    ours: list[float] = []
    bare: list[float] = []
    for _ in range(ROUNDS):
        ours.append(best_rate(setqueue_loop, keys))
        bare.append(best_rate(bare_loop, keys))
    report("setqueue_offer_poll_int", max(ours), "items/s", max(bare))

    ints: list[object] = list(range(N))
    strings: list[object] = [f"key-{i:016d}" for i in range(N)]
    assert all(len(s) == 20 for s in strings[:3])  # type: ignore[arg-type]
    for name, sample in (("int", ints), ("str", strings)):
        report(
            f"setqueue_bytes_per_{name}_key",
            bytes_per_key(sample, fill_setqueue),
            "bytes/key",
            bytes_per_key(sample, fill_bare),
        )


if __name__ == "__main__":
    main()
