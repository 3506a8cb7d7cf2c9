"""The type matrix migrations, timed: each engine pair's table of every type (the tests'
``tests/type_matrix.py``), copied by ``sluice run --until-drained`` in a fresh process.

A table of ~130 rows, one value of one type each: the time is the pair's fixed cost
(the JVM's start, the catalogue's look-ups, the casts into the target's types), which
a whole-database migration pays once per table type mix. Median of ``ROUNDS`` rounds.

    python benchmarks/bench_matrix.py        (make bench BENCH=matrix)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_peers import MARIADB_ADMIN, PG_ADMIN, Server  # noqa: E402
from benchmarks.common import report  # noqa: E402
from tests import type_matrix as tm  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
SLUICE = str(Path(sys.executable).with_name("sluice"))


def _run(folder: Path, source: str, target: str) -> float:
    folder.mkdir(parents=True)
    (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  matrix: {{kind: sql, url: '{source}', table: matrix, key: id, target: out.matrix}}
targets:
  out: {target}
""")  # fmt: skip
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "AWS_EC2_METADATA_DISABLED": "true",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=folder,
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: the rows the mapping refuses
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"sluice run exited {done.returncode}")
    return seconds


def main() -> None:
    pg, maria = Server(PG_ADMIN), Server(MARIADB_ADMIN)
    sources = {"pg": pg.create("sluice_matrix_pg"), "maria": maria.create("sluice_matrix_ma")}
    tm.pg_create_source(sources["pg"], "matrix", tm.PG_TYPES)
    tm.mariadb_create_source(sources["maria"], "matrix", tm.MARIADB_TYPES)
    pairs = {
        "postgresql_to_postgresql": ("pg", pg), "postgresql_to_mariadb": ("pg", maria),
        "mariadb_to_mariadb": ("maria", maria), "mariadb_to_postgresql": ("maria", pg),
        "postgresql_to_parquet": ("pg", None), "postgresql_to_sqlite": ("pg", None),
        "mariadb_to_parquet": ("maria", None), "mariadb_to_sqlite": ("maria", None),
    }
    folder = Path(tempfile.mkdtemp(prefix="sluice-matrix-"))
    times: dict[str, list[float]] = {}
    try:
        for round_ in range(ROUNDS):
            for pair, (side, server) in pairs.items():
                if server is not None:
                    url = server.create("sluice_matrix_dst")
                    target = f"{{kind: jdbc, url: '{url}'}}"
                elif pair.endswith("parquet"):
                    target = f"{{kind: parquet, path: '{folder}/lake-{pair}-{round_}'}}"
                else:
                    target = f"{{kind: jdbc, url: 'sqlite:///{folder}/{pair}-{round_}.db'}}"
                seconds = _run(folder / f"{pair}-{round_}", sources[side], target)
                print(f"# round {round_ + 1} {pair}: {seconds:.1f} s", flush=True)
                times.setdefault(pair, []).append(seconds)
                if server is not None:
                    server.drop("sluice_matrix_dst")
    finally:
        pg.drop("sluice_matrix_pg")
        maria.drop("sluice_matrix_ma")
    for pair, runs in times.items():
        report(f"matrix_{pair}_seconds", statistics.median(runs), "s",
               rows=tm.rows_of(tm.PG_TYPES if pair.startswith("postgresql") else
                               tm.MARIADB_TYPES), rounds=runs)  # fmt: skip


if __name__ == "__main__":
    main()
