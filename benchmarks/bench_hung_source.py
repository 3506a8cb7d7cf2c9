"""A hung source database beside two that answer: their drain time, with and without it.

``make bench BENCH=hung_source``: two PostgreSQL keyset sources of ``ROWS`` rows each
(default 400,000) drained by ``sluice run --until-drained`` alone, then beside a third
source whose host (a proxy on loopback) hangs: it accepts connections and never answers
until the two are drained, then forwards, and every row of the third migrates too. It
hangs from the start (``hung_source_drain``), or mid-run (``hung_source_mid_run_drain``:
it forwards until the third's first rows are in, then cuts what it forwarded and hangs;
the third reads at most ``ROWS / 20`` rows a second, so that it is mid-way then). And
beside a third table of their own database whose ``where:`` makes each key query take
2 s (``slow_neighbour_drain``: the run is stopped once the two are in). Each figure: the
two sources' drain time beside the third (from ``sluice run`` to their last row in the
target), median of 3 interleaved rounds, against their time alone.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def _drain(folder: Path, hung: str | None) -> float:
    """Seconds until the two answering sources are in the target (the run then ends), beside
    a third whose host hangs (``hung``: "start", "mid-run"), one of their own database
    slow in its key queries ("slow"), or alone (None)."""
    target_db = f"sluice_hung_dst_{folder.name}"
    _admin(f"DROP DATABASE IF EXISTS {target_db} WITH (FORCE)", f"CREATE DATABASE {target_db}")
    target = f"postgresql+psycopg://postgres@127.0.0.1:5432/{target_db}"
    proxy = Proxy(5432)
    far = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/sluice_hung_src?connect_timeout=2"
    more = f", limits: {{max_rows_per_s: {ROWS // 20}}}" if hung == "mid-run" else ""
    if hung == "slow":  # the two's database, each key query 2 s (a statement's InitPlan)
        far, more = SOURCE, ', where: "(SELECT pg_sleep(2)) IS NOT NULL"'
    third = f'  far: {{kind: sql, url: "{far}", table: far, key: id, target: out.far{more}}}\n'
    if hung in ("mid-run", "slow"):
        proxy.forward()
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
    def wait_for(done: Callable[[], bool]) -> None:
        while not done():
            if run.poll() not in (None, 0):
                raise SystemExit(log.read_text()[-3000:])
            time.sleep(0.2)

    try:
        if hung == "mid-run":
            wait_for(lambda: count_rows(target, "far") > 0)
            proxy.hang()
        wait_for(lambda: count_rows(target, "fast_a") == ROWS == count_rows(target, "fast_b"))
        took = time.monotonic() - started
        proxy.forward()
        if hung == "slow":  # its 2 s a key query would take minutes: stopped, not waited for
            run.send_signal(signal.SIGTERM)
            run.wait(600)
        elif run.wait(600) != 0 or (hung and count_rows(target, "far") != ROWS):
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
        times: dict[str | None, list[float]] = {None: [], "start": [], "mid-run": [], "slow": []}
        for n in range(ROUNDS):
            for hung, runs in times.items():
                runs.append(_drain(folder / f"{(hung or 'alone').replace('-', '_')}{n}", hung))
            print(f"# round {n + 1}: alone {times[None][-1]:.1f} s, beside a source hung "
                  f"from the start {times['start'][-1]:.1f} s, mid-run "
                  f"{times['mid-run'][-1]:.1f} s, beside a slow one "
                  f"{times['slow'][-1]:.1f} s", flush=True)  # fmt: skip
    finally:
        _admin("DROP DATABASE IF EXISTS sluice_hung_src WITH (FORCE)")
    base = statistics.median(times[None])
    for name, hung in (("hung_source_drain", "start"), ("hung_source_mid_run_drain", "mid-run"),
                       ("slow_neighbour_drain", "slow")):  # fmt: skip
        value = statistics.median(times[hung])
        print(json.dumps({"bench": name, "value": round(value, 2), "unit": "s",
                          "baseline": round(base, 2), "ratio": round(value / base, 3),
                          "rows_each": ROWS}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
