"""The scheduler's own cost: the main loop from in-memory sources to a null sink.

Figures:
- ``loop_items_per_s_sqlite_ledger`` / ``loop_items_per_s_pg_ledger``: items
  per second through the real MainLoop (strategy, gate, range claims in the
  ledger, begin/finish of every batch) from three in-memory sources to a sink
  that completes at once. Target: 250,000 items/s with the SQLite ledger.
- ``ledger_group_commit_ratio_*``: ledger writes per second from 8 threads
  through the single writer (group commit) against the same writes each in
  its own transaction behind a lock (the baseline).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import pg_database, report  # noqa: E402
from config.loader import load_config_text  # noqa: E402
from scheduler.ledger import Ledger, fingerprint  # noqa: E402
from scheduler.ledger.schema import poison_table  # noqa: E402
from scheduler.loop import MainLoop  # noqa: E402
from scheduler.strategy import build_strategy  # noqa: E402
from sinks.abc import MemorySink  # noqa: E402
from sources.abc import MemorySource  # noqa: E402
from sources.queueing import QueueingLimitedSource  # noqa: E402

PG_ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PER_SOURCE = 400_000
CONFIG = """
ledger: {ledger}
sources:
  a: {{kind: sql, url: "sqlite:///a.db", table: t, key: id, target: lake.a,
       buffer: {{capacity: 60000, replenish_below: 20000}}}}
  b: {{kind: sql, url: "sqlite:///b.db", table: t, key: id, target: lake.b,
       buffer: {{capacity: 60000, replenish_below: 20000}}}}
  c: {{kind: sql, url: "sqlite:///c.db", table: t, key: id, target: lake.c,
       buffer: {{capacity: 60000, replenish_below: 20000}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
strategy: {{fair: {{a: 2, b: 1, c: 1}}}}
batch: {{max_items: 10000, max_wait: 10ms}}
backpressure: {{max_pending: 100000, resume_below: 50000, max_importing_batches: 8}}
"""


def loop_items_per_s(ledger_url: str, folder: Path) -> float:
    cfg = load_config_text(CONFIG.format(ledger=ledger_url), str(folder / "bench.yaml"))
    ledger = Ledger(cfg.ledger)
    checkpoints = {n: ledger.sources.register(n, fingerprint(s)) for n, s in cfg.sources.items()}
    holder: list[MainLoop] = []
    queues = {
        name: QueueingLimitedSource(
            MemorySource(name, [(k,) for k in range(PER_SOURCE)]),
            src.buffer.capacity, src.buffer.replenish_below,
            on_refill=lambda: holder[0].notify() if holder else None,
        )
        for name, src in cfg.sources.items()
    }
    loop = MainLoop(cfg, queues, build_strategy(cfg), ledger, MemorySink(), checkpoints)
    holder.append(loop)
    for queue in queues.values():
        queue.start()
    started = time.perf_counter()
    stats = loop.run(until_drained=True)
    elapsed = time.perf_counter() - started
    for queue in queues.values():
        queue.stop(1.0)
    ledger.close()
    assert stats.rows == 3 * PER_SOURCE, stats
    return stats.rows / elapsed


def writes_per_s(ledger: Ledger, grouped: bool, threads: int = 8, each: int = 300) -> float:
    lock = threading.Lock()
    statement = poison_table.insert()

    def one(conn: sa.Connection, n: int) -> None:
        conn.execute(statement.values(source="bench", message_id=str(n), reason="r", body="{}",
                                      recorded_at=0.0))

    def worker(offset: int) -> None:
        for n in range(offset, offset + each):
            if grouped:
                ledger.writer.call(lambda conn, n=n: one(conn, n))
            else:
                with lock, ledger.engine.begin() as conn:
                    one(conn, n)

    pool = [threading.Thread(target=worker, args=(i * each,)) for i in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return threads * each / (time.perf_counter() - started)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report("loop_items_per_s_sqlite_ledger",
               loop_items_per_s(f"sqlite:///{folder / 'ledger.db'}", folder), "items/s")
        sqlite_ledger = Ledger(f"sqlite:///{folder / 'writes.db'}")
        direct = writes_per_s(sqlite_ledger, grouped=False)
        report("ledger_group_commit_sqlite", writes_per_s(sqlite_ledger, grouped=True),
               "writes/s", baseline=direct)
        sqlite_ledger.close()
        with pg_database(PG_ADMIN) as url:
            if url is None:
                return
            report("loop_items_per_s_pg_ledger", loop_items_per_s(url, folder), "items/s")
            pg_ledger = Ledger(url)
            direct = writes_per_s(pg_ledger, grouped=False)
            report("ledger_group_commit_pg", writes_per_s(pg_ledger, grouped=True),
                   "writes/s", baseline=direct)
            pg_ledger.close()


if __name__ == "__main__":
    main()
