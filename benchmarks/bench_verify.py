"""Verify against the copy: ``sluice verify`` of 1,000,000 rows PostgreSQL → PostgreSQL.

One process, one SparkSession started before anything is timed (the JVM's
start is excluded from both figures). Each round, on throwaway
``sluice_bench_*`` databases dropped at the end:

1. the copy: a daemon (``sluice run --until-drained``, in-process on that
   session) moves ``orders`` (bigint key, text, numeric, timestamp) in
   batches of 100,000, exactly once, into an empty target;
2. the verify: :func:`~scheduler.verify_tables.verify_config` on the same
   config and session compares every row (per-bucket hashes), which must
   find the two equal.

- ``verify_1m_pg_seconds``: the verify's time; baseline: the copy's own time
  in the same round; the ratio (verify / copy, median of the rounds' times)
  must be at most 1.

    python benchmarks/bench_verify.py
    ROWS=200000 ROUNDS=1 python benchmarks/bench_verify.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import sqlalchemy as sa  # noqa: E402

from benchmarks.bench_e2e import (  # noqa: E402
    ADMIN,
    ROUNDS,
    ROWS,
    check_count,
    checkpoint,
    create_database,
    drop_database,
    seed,
    sluice_yaml,
)
from benchmarks.common import report  # noqa: E402

BATCH = 100_000


def main() -> int:
    from config.loader import load_config
    from config.models import SparkConfig
    from scheduler.commands.cutover import run_until_drained
    from scheduler.verify_tables import verify_config
    from spark_jobs.tasks.session import build_session

    admin = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    prefix = f"sluice_bench_{uuid.uuid4().hex[:6]}"
    source = create_database(admin, f"{prefix}_src")
    targets: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-verify-"))
    spark = build_session(
        SparkConfig(master="local[2]", conf={"spark.driver.host": "127.0.0.1",
                                              "spark.driver.bindAddress": "127.0.0.1"}),
        app_name="sluice-bench-verify",
    )  # fmt: skip
    copies: list[float] = []
    verifies: list[float] = []
    try:
        seed(source)
        for round_ in range(ROUNDS):
            # A new target database each round: an importer remembers which
            # databases already have sluice's own tables.
            target = create_database(admin, f"{prefix}_dst{round_}")
            targets.append(target)
            work = folder / f"round-{round_}"
            work.mkdir()
            path = work / "sluice.yaml"
            path.write_text(sluice_yaml(source, target, BATCH))
            cfg = load_config(path)
            checkpoint(admin)
            started = time.perf_counter()
            summary = run_until_drained(spark, cfg, path)
            copies.append(time.perf_counter() - started)
            if summary.exit_code != 0:
                raise SystemExit(f"the copy exited with {summary.exit_code}: {summary}")
            check_count(target, "orders")
            checkpoint(admin)
            started = time.perf_counter()
            verified = verify_config(spark, cfg)
            verifies.append(time.perf_counter() - started)
            [table] = verified.tables
            if not verified.equal or table.checked != ROWS:
                raise SystemExit(f"verify did not find {ROWS} equal rows: {table}")
            print(f"# round {round_ + 1}: copy {copies[-1]:.1f} s, verify {verifies[-1]:.1f} s "
                  f"(ratio {verifies[-1] / copies[-1]:.2f})", flush=True)  # fmt: skip
        report("verify_1m_pg_seconds", statistics.median(verifies), "s",
               statistics.median(copies))  # fmt: skip
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)
        for url in (source, *targets):
            drop_database(admin, sa.make_url(url).database or "")
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
