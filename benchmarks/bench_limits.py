"""Source limits, read from the source database's side: rows per second and connections.

A PostgreSQL source table of ``ROWS`` rows (default 500,000) is read through
a role the database itself lets open two connections (``CONNECTION LIMIT
2``), with ``limits: {max_connections: 2, max_rows_per_s: RATE}`` (default
20,000), into a PostgreSQL target, by ``sluice run --until-drained``:

- once by one daemon (``limits_one_daemon_*``);
- once by two daemons started together on one PostgreSQL ledger, hot-hot,
  sharing the budget (``limits_two_daemons_*``);
- once by one daemon with ``sluice verify`` started on its ledger once a
  fifth of the rows are in, the two sharing the budget
  (``limits_verify_beside_a_daemon_*``; the verify must find the rows done
  so far equal).

While they run, the table's own tuple counters (``pg_stat_user_tables``:
``seq_tup_read + idx_tup_fetch``, what every reader of the table fetched) are
sampled each second, and the role's sessions in ``pg_stat_activity`` every
10 ms; the tuples read by sequential scans are printed apart (the import
jobs' key ranges are index scans: a whole-table count would show there).
Figures per run:

- ``…_max_10s_rows_per_s``: the highest rate over any 10 s window of the
  samples; baseline the limit (the bound: ratio at most 1.1);
- ``…_mean_rows_per_s``: rows fetched over the time from the first fetch to
  the last; baseline the limit (ratio at least 0.8);
- ``…_max_connections``: the most sessions of the role seen at once
  (baseline 2);
- ``…_refused_connections``: connections the database refused, as the
  daemons logged them (baseline 0), with ``…_failed_attempts``: batch
  attempts that failed, from the ledger.

The Spark JVM's start is not in the rate: the windows begin at the first
fetch. Both runs also check that the target holds every row.

    python benchmarks/bench_limits.py
    ROWS=100000 RATE=10000 python benchmarks/bench_limits.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.bench_e2e import create_database, drop_database  # noqa: E402
from benchmarks.common import report  # noqa: E402

ROWS = int(os.environ.get("ROWS", "500000"))
RATE = float(os.environ.get("RATE", "20000"))
ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
TIMEOUT = 1800  # seconds per run: a hung run fails the benchmark, never the machine
WINDOW = 10  # seconds


def main() -> int:
    admin = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    prefix = f"sluice_bench_{uuid.uuid4().hex[:6]}"
    role = f"{prefix}_reader"
    names = ("src", "tgt1", "tgt2", "tgt3", "ledger1", "ledger2", "ledger3")
    urls = {name: create_database(admin, f"{prefix}_{name}") for name in names}
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-limits-"))
    try:
        seed(urls["src"], role)
        reader = sa.make_url(urls["src"]).set(username=role).render_as_string(hide_password=False)
        runs = (("one_daemon", 1, "1", False), ("two_daemons", 2, "2", False),
                ("verify_beside_a_daemon", 1, "3", True))  # fmt: skip
        for label, daemons, n, verify in runs:
            figures = run(folder / label, reader, urls[f"tgt{n}"], urls[f"ledger{n}"],
                          urls["src"], role, daemons, verify=verify)  # fmt: skip
            for name, (value, unit, baseline) in figures.items():
                report(f"limits_{label}_{name}", value, unit, baseline)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with admin.connect() as conn:
            for url in urls.values():
                drop_database(admin, sa.make_url(url).database or "")
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()
    return 0


def seed(url: str, role: str) -> None:
    """``orders`` of ROWS rows, readable by ``role``, which may open two connections."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(
            "CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, "
            "amount numeric(12,2), placed_at timestamp)"
        ))  # fmt: skip
        conn.execute(sa.text(
            "INSERT INTO orders SELECT i, 'customer-' || (i % 9973), (i % 100000) / 100.0, "
            "timestamp '2024-01-01' + i * interval '1 second' FROM generate_series(1, :n) AS i"
        ), {"n": ROWS})  # fmt: skip
        # As autovacuum soon would: key walks are index-only scans, which
        # fetch no tuple (the counters then count the import jobs' reads).
        conn.execute(sa.text("VACUUM (ANALYZE) orders"))
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2"))
        conn.execute(sa.text(f"GRANT SELECT ON orders TO {role}"))
    engine.dispose()


class Sampler:
    """The source table's fetched-tuple counter each second, the role's sessions every 10 ms."""

    def __init__(self, admin_url: str, role: str) -> None:
        self.engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.role = role
        self.counts: list[tuple[float, int]] = []
        self.seq: list[int] = []  # of which read by sequential scans
        self.sessions = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=f, daemon=True) for f in (self._tuples, self._conns)
        ]

    def __enter__(self) -> Sampler:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self.engine.dispose()

    def _tuples(self) -> None:
        query = sa.text("SELECT seq_tup_read, coalesce(idx_tup_fetch, 0) "
                        "FROM pg_stat_user_tables WHERE relname = 'orders'")  # fmt: skip
        with self.engine.connect() as conn:
            next_at = time.monotonic()
            while not self._stop.is_set():
                seq, idx = conn.execute(query).one()
                self.counts.append((time.monotonic(), int(seq) + int(idx)))
                self.seq.append(int(seq))
                next_at += 1.0
                self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _conns(self) -> None:
        query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE usename = :r")
        with self.engine.connect() as conn:
            while not self._stop.is_set():
                self.sessions = max(self.sessions, int(conn.scalar(query, {"r": self.role}) or 0))
                self._stop.wait(0.01)


def run(
    folder: Path, source: str, target: str, ledger: str, admin_url: str, role: str, daemons: int,
    *, verify: bool = False,
) -> dict[str, tuple[float, str, float]]:  # fmt: skip
    """Migrate the table with ``daemons`` daemons (and a verify beside them, if asked);
    the figures read from the database."""
    folder.mkdir(parents=True)
    (folder / "sluice.yaml").write_text(f"""
ledger: '{ledger}'
work_dir: ./work
spark: {{master: "local[2]", max_concurrent_imports: 2}}
sources:
  orders:
    kind: sql
    url: '{source}'
    table: orders
    key: id
    read: {{num_partitions: 2, fetchsize: 10000}}
    limits: {{max_connections: 2, max_rows_per_s: {RATE}}}
    target: out.orders
targets:
  out: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 100000, max_wait: 200ms}}
backpressure: {{max_pending: 200000, resume_below: 100000, max_importing_batches: 2}}
""")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # fmt: skip
    sluice = str(Path(sys.executable).with_name("sluice"))
    with Sampler(admin_url, role) as sampler:
        procs = [
            subprocess.Popen([sluice, "run", "sluice.yaml", "--until-drained"], cwd=folder,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(daemons)
        ]  # fmt: skip
        if verify:
            wait_for_rows(ledger, ROWS // 5, procs[0])
            procs.append(subprocess.Popen(
                [sluice, "verify", "sluice.yaml"], cwd=folder, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # fmt: skip
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
        time.sleep(2.0)  # the last reads' counters reach the statistics
    for proc, output in zip(procs, outputs, strict=True):
        if proc.returncode != 0:
            sys.stderr.write(output[-4000:])
            raise SystemExit(f"{' '.join(proc.args[1:])} exited with {proc.returncode}")
    if verify:
        said = [line for line in outputs[-1].splitlines() if line.startswith("orders -> ")]
        print("# verify: " + " ".join(said), flush=True)
    check_count(target)
    refused = sum(o.count("too many connections") for o in outputs)
    engine = sa.create_engine(ledger)
    with engine.connect() as conn:
        failed = int(conn.scalar(sa.text("SELECT coalesce(sum(attempts - 1), 0) "
                                         "FROM sluice_batches")) or 0)  # fmt: skip
    engine.dispose()
    max_rate, mean_rate, fetched = rates(sampler.counts)
    by_seq = sampler.seq[-1] - sampler.seq[0]
    print(f"# {daemons} daemon(s): {fetched:,} tuples fetched ({by_seq:,} by sequential scans), "
          f"{len(sampler.counts)} samples", flush=True)  # fmt: skip
    return {
        "max_10s_rows_per_s": (max_rate, "rows/s", RATE),
        "mean_rows_per_s": (mean_rate, "rows/s", RATE),
        "max_connections": (float(sampler.sessions), "connections", 2.0),
        "refused_connections": (float(refused), "connections", 0.0),
        "failed_attempts": (float(failed), "attempts", 0.0),
    }


def wait_for_rows(ledger: str, rows: int, daemon: subprocess.Popen[str]) -> None:
    """Wait until the ledger counts ``rows`` rows done (or the daemon ended)."""
    engine = sa.create_engine(ledger)
    query = sa.text("SELECT coalesce(sum(rows), 0) FROM sluice_batches WHERE state = 'done'")
    try:
        while daemon.poll() is None:
            try:
                with engine.connect() as conn:
                    if int(conn.scalar(query) or 0) >= rows:
                        return
            except sa.exc.ProgrammingError:  # the daemon has not made the ledger yet
                pass
            time.sleep(0.5)
    finally:
        engine.dispose()


def rates(counts: list[tuple[float, int]]) -> tuple[float, float, int]:
    """The highest rate over any WINDOW seconds of the active span, the mean, and the rows."""
    first = next(i for i in range(1, len(counts)) if counts[i][1] > counts[0][1]) - 1
    last = next(i for i in range(len(counts) - 1, 0, -1) if counts[i][1] > counts[i - 1][1])
    span = counts[first : last + 1]
    fetched = span[-1][1] - span[0][1]
    mean = fetched / (span[-1][0] - span[0][0])
    windows = [
        (span[j][1] - span[i][1]) / (span[j][0] - span[i][0])
        for i in range(len(span)) for j in range(i + 1, len(span))
        if abs(span[j][0] - span[i][0] - WINDOW) < 0.5
    ]  # fmt: skip
    return (max(windows) if windows else mean), mean, fetched


def check_count(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(sa.text("SELECT count(*) FROM orders")).scalar_one()
    engine.dispose()
    if count != ROWS:
        raise SystemExit(f"{url.rsplit('/', 1)[-1]}.orders: {count} rows, expected {ROWS}")


if __name__ == "__main__":
    sys.exit(main())
