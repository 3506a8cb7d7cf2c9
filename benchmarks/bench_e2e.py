"""End to end: 1,000,000 rows through ``sluice run --until-drained`` against plain Spark.

Each figure is the wall time of a whole fresh process (Python start, JVM
start, the copy, the exit), measured in the same run, on throwaway
``sluice_bench_*`` PostgreSQL databases on loopback that are dropped at the end:

- ``e2e_pg_to_pg_rows_per_s``: ``sluice run --until-drained``, PostgreSQL →
  PostgreSQL, batches of 100,000 (10 batches), exactly once (staging table,
  upsert, commit record per batch). Baseline: a plain Spark JDBC read-then-write
  of the same table in a fresh process (same ``local[2]``, 2 read partitions,
  fetchsize 10,000, 2 write partitions, batchsize 10,000,
  ``reWriteBatchedInserts``) into a table Spark creates (no key: at least once).
  The ratio is sluice's speed over the plain copy's (target: 0.7 or better).
- ``e2e_pg_to_parquet_rows_per_s``: the same rows to a Parquet table through
  sluice; baseline: plain Spark JDBC read then ``write.parquet``.
- ``e2e_pg_to_pg_100_batches_rows_per_s``: the same 1,000,000 rows as 100
  batches of 10,000; baseline: the 10-batch run.
- ``e2e_batch_overhead_ms``: (100-batch time − 10-batch time) / 90: what one
  more batch costs end to end.

Rounds (``ROUNDS``, default 3) alternate the variants; each figure is the
median of its rounds, so that one round disturbed by other work on the
machine decides nothing. Each round also prints its own sluice/plain ratios
(the runs of one round shared the machine's mood), and their median. A
``CHECKPOINT`` before each run keeps the previous run's dirty pages from
being flushed during the next one.

    python benchmarks/bench_e2e.py            # all figures (several minutes)
    ROWS=200000 ROUNDS=1 python benchmarks/bench_e2e.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.common import report  # noqa: E402

ROWS = int(os.environ.get("ROWS", "1000000"))
ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PARTITIONS = 2
FETCHSIZE = 10_000
BATCHSIZE = 10_000
ROUNDS = int(os.environ.get("ROUNDS", "3"))
TIMEOUT = 1800  # seconds per process: a hung run fails the benchmark, never the machine


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "plain":
        return plain_copy(*sys.argv[2:])
    admin = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    prefix = f"sluice_bench_{uuid.uuid4().hex[:6]}"
    names = ("src", "sluice10", "sluice100", "plain")
    urls = {name: create_database(admin, f"{prefix}_{name}") for name in names}
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-e2e-"))
    runs: dict[str, Callable[[Path], float]] = {
        "plain_pg": lambda _: run_plain(urls["src"], "jdbc", urls["plain"]),
        "sluice_pg_10": lambda f: run_sluice(f, urls["src"], urls["sluice10"], 100_000),
        "plain_parquet": lambda f: run_plain(urls["src"], "parquet", str(f / "lake")),
        "sluice_parquet": lambda f: run_sluice(f, urls["src"], None, 100_000),
        "sluice_pg_100": lambda f: run_sluice(f, urls["src"], urls["sluice100"], 10_000),
    }
    written = {"plain_pg": "plain", "sluice_pg_10": "sluice10", "sluice_pg_100": "sluice100"}
    times: dict[str, list[float]] = {}
    paired: dict[str, list[float]] = {"PostgreSQL": [], "Parquet": []}
    try:
        seed(urls["src"])
        for round_ in range(ROUNDS):
            for name, run in runs.items():
                for url in (urls["sluice10"], urls["sluice100"], urls["plain"]):
                    drop_tables(url)
                checkpoint(admin)
                seconds = run(folder / f"{name}-{round_}")
                print(f"# round {round_ + 1} {name}: {seconds:.1f} s", flush=True)
                if name in written:
                    check_count(urls[written[name]], "orders")
                times.setdefault(name, []).append(seconds)
            paired["PostgreSQL"].append(times["plain_pg"][-1] / times["sluice_pg_10"][-1])
            paired["Parquet"].append(times["plain_parquet"][-1] / times["sluice_parquet"][-1])
            print(f"# round {round_ + 1} ratios: sluice/plain speed "
                  + ", ".join(f"{k} {v[-1]:.2f}" for k, v in paired.items()), flush=True)
        print("# median of the rounds' ratios: "
              + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in paired.items()),
              flush=True)  # fmt: skip
        median = {name: statistics.median(seconds) for name, seconds in times.items()}
        report("e2e_pg_to_pg_rows_per_s", ROWS / median["sluice_pg_10"], "rows/s",
               ROWS / median["plain_pg"])  # fmt: skip
        report("e2e_pg_to_parquet_rows_per_s", ROWS / median["sluice_parquet"], "rows/s",
               ROWS / median["plain_parquet"])  # fmt: skip
        report("e2e_pg_to_pg_100_batches_rows_per_s", ROWS / median["sluice_pg_100"], "rows/s",
               ROWS / median["sluice_pg_10"])  # fmt: skip
        overhead = (median["sluice_pg_100"] - median["sluice_pg_10"]) / 90 * 1000
        report("e2e_batch_overhead_ms", overhead, "ms")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for url in urls.values():
            drop_database(admin, sa.make_url(url).database or "")
        admin.dispose()
    return 0


# ------------------------------------------------------------------ databases


def create_database(admin: sa.Engine, name: str) -> str:
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    return admin.url.set(database=name).render_as_string(hide_password=False)


def drop_database(admin: sa.Engine, name: str) -> None:
    with admin.connect() as conn:
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": name},
        )
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))


def seed(url: str) -> None:
    """``orders``: ROWS rows of 4 columns (bigint key, text, numeric, timestamp)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, "
                "amount numeric(12,2), placed_at timestamp)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO orders SELECT i, 'customer-' || (i % 9973), (i % 100000) / 100.0, "
                "timestamp '2024-01-01' + i * interval '1 second' "
                "FROM generate_series(1, :n) AS i"
            ),
            {"n": ROWS},
        )
    # What autovacuum does to any table soon after a bulk load (it is off on
    # some servers, and a bench does not wait for it): without it, every key
    # read (sluice's key walk, an index-only scan) also visits the heap.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM (ANALYZE) orders"))
    engine.dispose()


def checkpoint(admin: sa.Engine) -> None:
    """Flush what earlier runs left dirty now, not during the next timed run."""
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("CHECKPOINT"))
    except sa.exc.DBAPIError as error:  # not a superuser: the runs only get noisier
        print(f"# CHECKPOINT refused: {error.orig}", flush=True)


def drop_tables(url: str) -> None:
    """Empty a target database for the next run: its table and sluice's own."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table in ("orders", "_sluice_commits", "_sluice_rejects"):
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def check_count(url: str, table: str) -> None:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    if count != ROWS:
        raise SystemExit(f"{url.rsplit('/', 1)[-1]}.{table}: {count} rows, expected {ROWS}")


# ------------------------------------------------------------------ the runs


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": root}


def _timed(command: list[str], cwd: Path | None = None, expect: str = "") -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout + proc.stderr)[-4000:])
        raise SystemExit(f"{command[:3]} exited with {proc.returncode}")
    if expect not in proc.stdout:
        raise SystemExit(f"{command[:3]}: {expect!r} not in its output: {proc.stdout[-2000:]}")
    return seconds


def run_sluice(folder: Path, source: str, target: str | None, batch: int) -> float:
    """``sluice run --until-drained`` in a fresh process; its wall time."""
    folder.mkdir(parents=True)
    (folder / "sluice.yaml").write_text(sluice_yaml(source, target, batch))
    sluice = Path(sys.executable).with_name("sluice")
    command = [str(sluice), "run", "sluice.yaml", "--until-drained"]
    return _timed(command, cwd=folder, expect=f"sluice: {ROWS:,} rows")


def sluice_yaml(source: str, target: str | None, batch: int) -> str:
    """The benchmarks' config: ``orders`` from ``source`` into ``target`` (None: Parquet)."""
    # Keys for two more batches always buffered: a refill never holds up the
    # next batch while two are importing.
    capacity = max(4 * batch, 100_000)
    # Two batches pending at most, and a new one as soon as one is done: with
    # resume_below at half, both would have to finish before the next starts.
    pending = 2 * batch
    if target is None:
        target_yaml = "{kind: parquet, path: ./lake}"
    else:
        target_yaml = (
            f"{{kind: jdbc, url: '{target}', "
            f"write: {{batchsize: {BATCHSIZE}, num_partitions: {PARTITIONS}}}}}"
        )
    return f"""
ledger: sqlite:///ledger.db
work_dir: ./work
spark: {{master: "local[2]", max_concurrent_imports: 2}}
sources:
  orders:
    kind: sql
    url: {source}
    table: orders
    key: id
    page_size: 50000
    buffer: {{capacity: {capacity}, replenish_below: {capacity - batch}}}
    read: {{num_partitions: {PARTITIONS}, fetchsize: {FETCHSIZE}}}
    target: out.orders
targets:
  out: {target_yaml}
batch: {{max_items: {batch}, max_wait: 2s}}
backpressure: {{max_pending: {pending}, resume_below: {pending}, max_importing_batches: 2}}
"""


def run_plain(source: str, kind: str, target: str) -> float:
    """The plain Spark copy in a fresh process; its wall time."""
    return _timed([sys.executable, str(Path(__file__).resolve()), "plain", source, kind, target])


def plain_copy(source: str, kind: str, target: str) -> int:
    """Read ``orders`` over JDBC in PARTITIONS ranges of the key and write it as it comes."""
    from config.models import SparkConfig
    from spark_jobs.common.jdbc import JdbcEndpoint
    from spark_jobs.tasks.session import build_session

    spark = build_session(SparkConfig(master="local[2]"), app_name="plain-copy")
    src = JdbcEndpoint.from_url(source)
    frame = spark.read.jdbc(
        src.url,
        "orders",
        column="id",
        lowerBound=1,
        upperBound=ROWS + 1,
        numPartitions=PARTITIONS,
        properties=src.connection_properties(fetchsize=str(FETCHSIZE)),
    )
    if kind == "parquet":
        frame.write.mode("overwrite").parquet(target)
    else:
        dst = JdbcEndpoint.from_url(target)
        options = {
            "batchsize": str(BATCHSIZE),
            "numPartitions": str(PARTITIONS),
            "reWriteBatchedInserts": "true",
        }
        frame.write.jdbc(
            dst.url, "orders", mode="overwrite", properties=dst.connection_properties(**options)
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
