"""A hung source database beside two that answer: their drain time, with and without it.

``make bench BENCH=hung_source``: two PostgreSQL keyset sources of ``ROWS`` rows each
(default 400,000) drained by ``sluice run --until-drained`` alone, then beside a third
source whose host (a proxy on loopback) accepts connections and never answers until the
two are drained; then it forwards, and every row of the third migrates too. The figure:
the two sources' drain time beside the hung one (from ``sluice run`` to their last row in
the target), median of 3 interleaved pairs, against their time alone.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers import count_rows, seed_orders  # noqa: E402 - the project is on the path
from tests.proxy import Proxy  # noqa: E402

ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SOURCE = "postgresql+psycopg://postgres@127.0.0.1:5432/sluice_hung_src"
ROWS = int(os.environ.get("ROWS", "400000"))
ROUNDS = 3
SLUICE = str(Path(sys.executable).with_name("sluice"))


def _admin(*statements: str) -> None:
    engine = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def _drain(folder: Path, hung: bool) -> float:
    """Seconds until the two answering sources are in the target (the run then ends)."""
    target_db = f"sluice_hung_dst_{folder.name}"
    _admin(f"DROP DATABASE IF EXISTS {target_db} WITH (FORCE)", f"CREATE DATABASE {target_db}")
    target = f"postgresql+psycopg://postgres@127.0.0.1:5432/{target_db}"
    proxy = Proxy(5432)
    far = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/sluice_hung_src?connect_timeout=2"
    third = f'  far: {{kind: sql, url: "{far}", table: far, key: id, target: out.far}}\n'
    folder.mkdir()
    (folder / "sluice.yaml").write_text(f"""ledger: sqlite:///ledger.db
sources:
  fast_a: {{kind: sql, url: "{SOURCE}", table: fast_a, key: id, target: out.fast_a}}
  fast_b: {{kind: sql, url: "{SOURCE}", table: fast_b, key: id, target: out.fast_b}}
{third if hung else ""}targets:
  out: {{kind: jdbc, url: "{target}"}}
""")
    log = folder / "run.log"
    started = time.monotonic()
    with log.open("w") as out:
        run = subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=folder,
                               stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})  # fmt: skip
    try:
        while not count_rows(target, "fast_a") == ROWS == count_rows(target, "fast_b"):
            if run.poll() not in (None, 0):
                raise SystemExit(log.read_text()[-3000:])
            time.sleep(0.2)
        took = time.monotonic() - started
        proxy.forward()
        if run.wait(600) != 0 or (hung and count_rows(target, "far") != ROWS):
            raise SystemExit(log.read_text()[-3000:])
    finally:
        if run.poll() is None:
            run.kill()
        proxy.close()
        _admin(f"DROP DATABASE IF EXISTS {target_db} WITH (FORCE)")
    return took


def main() -> int:
    _admin("DROP DATABASE IF EXISTS sluice_hung_src WITH (FORCE)",
           "CREATE DATABASE sluice_hung_src")  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="sluice-hung-"))
    try:
        for table in ("fast_a", "fast_b", "far"):
            seed_orders(SOURCE, ROWS, table=table)
        alone: list[float] = []
        beside: list[float] = []
        for n in range(ROUNDS):
            alone.append(_drain(folder / f"alone{n}", hung=False))
            beside.append(_drain(folder / f"beside{n}", hung=True))
            print(f"# round {n + 1}: alone {alone[-1]:.1f} s, beside a hung source "
                  f"{beside[-1]:.1f} s", flush=True)  # fmt: skip
    finally:
        _admin("DROP DATABASE IF EXISTS sluice_hung_src WITH (FORCE)")
    base, value = statistics.median(alone), statistics.median(beside)
    print(json.dumps({"bench": "hung_source_drain", "value": round(value, 2), "unit": "s",
                      "baseline": round(base, 2), "ratio": round(value / base, 3),
                      "rows_each": ROWS}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
