"""A whole live database streamed: ``TABLES`` tables (default 100) in one ``tables:`` source
with ``mode: stream``, PostgreSQL into PostgreSQL, under a writer, then cut over.

A server of the benchmark's own (``tests.servers.LogicalPostgres``: ``wal_level=logical``,
20 replication slots, fewer than the tables) holds ``t000`` … of ``TABLE_ROWS`` rows each
(default 2,000; the columns of ``bench_stream``'s ``items``). The target is an empty
throwaway database of the machine's PostgreSQL: sluice creates the tables.

1. ``sluice run`` (a subprocess) loads every table beside the group's one stream; the
   load's time is printed, not a figure.
2. A writer (a thread of this process) makes ``RATE`` changes a second (default 2,000)
   for ``SECONDS`` (default 30), in transactions of 50 inserts and 50 updates of one
   table picked at random; each row written gets the next ``version`` of one counter.
   It keeps, per transaction, its table, highest version and the moment its commit
   returned.
3. Every 0.5 s a sampler reads each target table's ``max(version)``. A table's
   transactions are applied in its commit order, so the target holds, per table, the
   transactions up to the one of the highest version it holds: that gives the changes
   applied and the lag (now against the commit of the oldest change the target does not
   hold), on this process's clock.
4. The writer stops; ``sluice cutover --json`` runs until READY; each table is compared
   with its source (count and an md5 of its rows in key order), and nothing of sluice's
   may be left on the source (no slot, no publication).

Figures: ``stream_tables_changes_per_s`` (baseline: the writer's offered rate),
``stream_tables_lag_median`` and ``_p99`` (s), ``stream_tables_cutover_window`` (s from
the writer's stop to READY; baseline the 10 s aimed at); the most slots and
publications seen while it ran are printed (one of each is the design).

    python benchmarks/bench_stream_tables.py        # or ENGINES=tables make bench BENCH=stream
    TABLES=20 TABLE_ROWS=500 SECONDS=10 python benchmarks/bench_stream_tables.py
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.bench_stream import (  # noqa: E402
    WINDOW_TARGET,
    daemon_log,
    percentile,
    run_cutover,
    start_daemon,
    stop_daemon,
    wait_loaded,
)
from benchmarks.common import Server, report  # noqa: E402
from tests.servers import LogicalPostgres  # noqa: E402

TABLES = int(os.environ.get("TABLES", "100"))
ROWS = int(os.environ.get("TABLE_ROWS", "2000"))  # not ROWS: bench_stream's table
RATE = int(os.environ.get("RATE", "2000"))
SECONDS = float(os.environ.get("SECONDS", "30"))
ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PER_TXN = 100  # half inserts of new keys, half updates
SAMPLE = 0.5
COLUMNS = ("id bigint PRIMARY KEY, name text NOT NULL, amount numeric(14,2), "
           "changed_at timestamptz NOT NULL, version bigint NOT NULL")  # fmt: skip
NAMES = [f"t{n:03d}" for n in range(TABLES)]


def main() -> int:
    server, machine = LogicalPostgres(), Server(ADMIN)
    target_db = f"sluice_bench_stream_tables_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-stream-tables-"))
    daemon = None
    writer: Writer | None = None
    try:
        server.start()
        own = Server(server.admin_url)
        source = own.create("src")
        own.admin.dispose()
        target = machine.create(target_db)
        _seed(source)
        (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
spark: {{master: "local[2]"}}
sources:
  shop: {{kind: sql, url: '{source}', tables: ["t*"], mode: stream, target: wh}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
        started = time.monotonic()
        daemon = start_daemon(folder)
        counts = " UNION ALL ".join(f"SELECT count(*) AS n FROM {t}" for t in NAMES)
        wait_loaded(target, daemon, folder, f"SELECT sum(n) FROM ({counts}) AS c", TABLES * ROWS)
        print(f"load: {TABLES} tables of {ROWS:,} rows in {time.monotonic() - started:.1f} s "
              "(from the daemon's start)", flush=True)  # fmt: skip

        writer = Writer(source)
        samples: list[tuple[float, int, float]] = []
        kept: list[tuple[int, int]] = []
        halt = threading.Event()
        sampler = threading.Thread(target=_sample, args=(target, source, writer, samples,
                                                         kept, halt), daemon=True)  # fmt: skip
        writer.start()
        sampler.start()
        writer.join(SECONDS + 30)
        halt.set()
        sampler.join(30)
        if writer.error is not None:
            raise SystemExit(f"the writer failed: {writer.error}")
        stop_at = writer.stopped_at
        cutover = run_cutover(folder, stop_at)
        daemon.wait(timeout=60)
        equal = _same(source, target)
        left = _one(source, "SELECT count(*) FROM pg_replication_slots") + _one(
            source, "SELECT count(*) FROM pg_publication")
        problems = daemon_log(folder / "daemon.log", daemon.returncode)
        for problem in problems:
            print(f"problem: {problem}", flush=True)
        lags = [lag for at, _, lag in samples if at <= stop_at]
        offered = writer.changes / (stop_at - writer.started_at)
        last_at, applied_n, _ = max((s for s in samples if s[0] <= stop_at + SAMPLE),
                                    key=lambda s: s[0])  # fmt: skip
        applied = applied_n / (last_at - writer.started_at)
        print(f"writer: {writer.changes:,} changes in {len(writer.log):,} transactions over "
              f"{stop_at - writer.started_at:.1f} s; slots, publications seen: "
              f"{sorted(set(kept))}; tables equal: {equal}; left on the source: {left}",
              flush=True)  # fmt: skip
        report("stream_tables_changes_per_s", applied, "changes/s", offered, tables=TABLES,
               rows=ROWS)  # fmt: skip
        report("stream_tables_lag_median", statistics.median(lags), "s", samples=len(lags))
        report("stream_tables_lag_p99", percentile(lags, 0.99), "s", samples=len(lags))
        report("stream_tables_cutover_window", cutover["window_s"], "s", WINDOW_TARGET,
               reported_s=round(cutover["seconds"], 3), ready=cutover["ready"])  # fmt: skip
        return 0 if cutover["ready"] and equal and not left and set(kept) == {(1, 1)} else 1
    finally:
        if writer is not None:
            writer.halt.set()
        try:
            stop_daemon(daemon)
        finally:
            try:
                server.stop()
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                machine.drop(target_db)
                machine.admin.dispose()


def _seed(source: str) -> None:
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        for name in NAMES:
            conn.execute(sa.text(f"CREATE TABLE {name} ({COLUMNS})"))
            conn.execute(sa.text(
                f"INSERT INTO {name} SELECT i, 'item ' || i, (i % 100000) / 100.0, "
                f"timestamptz '2024-01-01' + i * interval '1 second', 0 "
                f"FROM generate_series(1, {ROWS}) AS i"
            ))  # fmt: skip
    engine.dispose()


def _one(url: str, query: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(query)).scalar() or 0)
    finally:
        engine.dispose()


class Writer(threading.Thread):
    """RATE changes a second, in transactions of PER_TXN on one table picked at random.
    ``log``: per transaction, (table, its highest version, changes up to it, commit time)."""

    def __init__(self, url: str) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self.engine = sa.create_engine(url)
        self.halt = threading.Event()
        self.random = random.Random(7)
        self.next_id = dict.fromkeys(NAMES, ROWS + 1)
        self.version = self.changes = 0
        self.log: list[tuple[str, int, int, float]] = []
        self.started_at = self.stopped_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        per_s = RATE / PER_TXN
        try:
            with self.engine.connect() as conn:
                self.started_at = time.monotonic()
                while not self.halt.is_set():
                    due = self.started_at + len(self.log) / per_s
                    if due >= self.started_at + SECONDS:
                        break
                    if self.halt.wait(max(0.0, due - time.monotonic())):
                        break
                    self._transaction(conn)
        except BaseException as error:  # noqa: BLE001 - said by main
            self.error = error
        finally:
            self.stopped_at = time.monotonic()
            self.engine.dispose()

    def _transaction(self, conn: sa.Connection) -> None:
        table = self.random.choice(NAMES)
        half = PER_TXN // 2
        first = self.next_id[table]
        new_v = self.version + half
        conn.execute(sa.text(
            f"INSERT INTO {table} SELECT i, 'new ' || i, 1.5, clock_timestamp(), "
            f"CAST(:v0 AS bigint) + i - CAST(:first AS bigint) "
            f"FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS i"
        ), {"v0": self.version + 1, "first": first, "last": first + half - 1})  # fmt: skip
        conn.execute(sa.text(
            f"UPDATE {table} SET version = CAST(:v0 AS bigint) + (id % {half}), "
            f"changed_at = clock_timestamp() "
            f"WHERE id IN (SELECT (random() * {ROWS - 1})::int + 1 FROM generate_series(1, "
            f"{half * 2}) LIMIT {half})"
        ), {"v0": new_v + 1})  # fmt: skip
        conn.commit()
        self.next_id[table] = first + half
        self.version = new_v + half  # the updates' versions lie above the inserts'
        self.changes += PER_TXN
        # The inserts' highest version: always in the table once the transaction is.
        self.log.append((table, new_v, self.changes, time.monotonic()))


def _sample(target: str, source: str, writer: Writer, samples: list[tuple[float, int, float]],
            kept: list[tuple[int, int]], halt: threading.Event) -> None:  # fmt: skip
    """Every SAMPLE seconds: the changes the target holds and the lag (see the module); the
    source's slots and publications."""
    engine = sa.create_engine(target, isolation_level="AUTOCOMMIT")
    source_engine = sa.create_engine(source)
    maxima = " UNION ALL ".join(f"SELECT '{t}', coalesce(max(version), 0) FROM {t}" for t in NAMES)
    with engine.connect() as conn, source_engine.connect() as src:
        while True:
            at = time.monotonic()
            held = {t: int(v) for t, v in conn.execute(sa.text(maxima))}
            log = list(writer.log)
            missing = [t for t in log if t[1] > held[t[0]] and t[3] <= at]
            applied = sum(1 for t in log if t[1] <= held[t[0]]) * PER_TXN
            lag = at - min(t[3] for t in missing) if missing else 0.0
            samples.append((at, applied, lag))
            kept.append((int(src.execute(sa.text("SELECT count(*) FROM pg_replication_slots"))
                             .scalar() or 0),
                         int(src.execute(sa.text("SELECT count(*) FROM pg_publication"))
                             .scalar() or 0)))  # fmt: skip
            src.rollback()
            if halt.wait(SAMPLE):
                break
    engine.dispose()
    source_engine.dispose()


def _same(source: str, target: str) -> bool:
    """Each table: the same count and md5 of its rows in key order on both sides."""
    query = " UNION ALL ".join(
        f"SELECT '{t}', count(*), md5(string_agg(concat_ws('|', id, name, amount, "
        f"changed_at, version), ',' ORDER BY id)) FROM {t}" for t in NAMES
    )
    read = {}
    for url in (source, target):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SET TimeZone = 'UTC'"))
            read[url] = {r[0]: r[1:] for r in conn.execute(sa.text(query))}
        engine.dispose()
    differing = [t for t in NAMES if read[source][t] != read[target][t]]
    print(f"tables: {TABLES}, differing: {differing[:10]}", flush=True)
    return not differing


if __name__ == "__main__":
    sys.exit(main())
