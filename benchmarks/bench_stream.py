"""``mode: stream``, PostgreSQL → PostgreSQL: a live table followed, then cut over.

A PostgreSQL of the benchmark's own (``tests.servers.LogicalPostgres``:
``wal_level=logical``, which the machine's shared server does not have and must
not be given) holds ``items`` (bigint key, text, numeric, timestamptz, a
version bigint) of ``ROWS`` rows (default 100,000); the target is an empty
``items`` (with an index on ``version``, for the sampler) in a throwaway
``sluice_bench_stream_*`` database of the machine's server. With sluice's
default batch settings:

1. ``sluice run CONFIG`` (a subprocess, logging JSON to a file) loads the
   table beside its change stream; the load's time is printed, not a figure.
2. Once the target holds every row, a writer (a thread of this process, one
   connection) makes ``RATE`` changes per second (default 5,000) for
   ``SECONDS`` (default 60): transactions of 100 changes (40 inserts of new
   keys, 40 updates, 20 deletes of live keys), paced by the clock. Each
   inserted or updated row gets the next ``version`` of one counter, in
   commit order, and ``changed_at = clock_timestamp()``; the writer keeps,
   per transaction, its highest version, the changes made up to it and the
   moment its commit returned.
3. Every 0.5 s a sampler reads ``max(version)`` in the target. sluice applies
   whole transactions in commit order, so the target holds every transaction
   up to the last one whose versions it holds, and nothing after: that gives
   the changes applied so far and the lag, measured as sluice's own
   ``lag`` is defined: now against the commit of the oldest change the
   target does not hold yet (0 when it holds all committed). Both clocks are
   this process's; neither reads sluice's view of itself.
4. The writer stops; ``sluice cutover CONFIG --json`` runs until READY (the
   daemon sees the flag, does its final pass and exits; the command runs its
   own, verifies with Spark and drops sluice's slot and publication). Then an
   independent read compares the two tables row by row (an md5 of every row's
   text, in key order, on each server) and checks the slot is gone.

Figures:

- ``stream_pg_changes_per_s``: the changes applied while the writer ran
  (from its start to its stop, read as above) over that time; baseline the
  writer's own rate, offered (ratio: applied / offered; a backlog left at the
  stop counts against it);
- ``stream_pg_lag_median``, ``stream_pg_lag_p99``: of the lag samples taken
  while the writer ran, in seconds (no baseline);
- ``stream_pg_cutover_window``: seconds from the writer's stop to
  ``sluice cutover`` exiting READY: the window the application's writes are
  stopped (the command's JVM start included; sluice's own "READY in" seconds
  are ``reported_s``); baseline the 10 s the feature aims at.

MariaDB → PostgreSQL streams are not built yet (the binary log reader is,
the ``mode: stream`` source is PostgreSQL's only): no figure for them.

The machine has two cores shared by both servers, the daemon and the writer:
run no other benchmark beside it. Everything (the own server, the target
database, the temporary folder with the ledger, the daemon) is removed or
stopped on the way out, also after a failure.

    python benchmarks/bench_stream.py
    ROWS=20000 RATE=2000 SECONDS=20 python benchmarks/bench_stream.py
    LOGS=/tmp/stream-logs python benchmarks/bench_stream.py   # keeps daemon.log, cutover.log
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.common import Server, report  # noqa: E402
from tests.servers import PG_BIN, LogicalPostgres  # noqa: E402

ROWS = int(os.environ.get("ROWS", "100000"))
RATE = int(os.environ.get("RATE", "5000"))  # changes per second offered
SECONDS = float(os.environ.get("SECONDS", "60"))
ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PER_TXN = (40, 40, 20)  # inserts, updates, deletes per transaction
SAMPLE = 0.5  # seconds between two lag samples
LOGS = os.environ.get("LOGS")  # a folder to keep the daemon's and the cutover's logs in
LOAD_TIMEOUT = 600.0
CUTOVER_TIMEOUT = 600.0
WINDOW_TARGET = 10.0  # seconds: what the cutover window should not exceed
ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    if not LogicalPostgres.available():
        # Said on stdout: the runner shows stderr only for a script that failed.
        print(f"PostgreSQL's initdb and pg_ctl are not in {PG_BIN}: no stream figures")
        return 0
    server = LogicalPostgres()
    machine = Server(ADMIN)
    target_db = f"sluice_bench_stream_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-stream-"))
    daemon: subprocess.Popen[bytes] | None = None
    writer: Writer | None = None
    try:
        server.start()
        own = Server(server.admin_url)
        source = own.create("src")
        own.admin.dispose()
        target = machine.create(target_db)
        seed(source, target)
        (folder / "sluice.yaml").write_text(config(source, target))
        machine.checkpoint()
        started = time.monotonic()
        daemon = start_daemon(folder)
        wait_loaded(target, daemon, folder)
        print(f"load: {ROWS:,} rows in {time.monotonic() - started:.1f} s "
              "(from the daemon's start)", flush=True)  # fmt: skip

        writer = Writer(source, ROWS)
        sampler = Sampler(target, writer)
        writer.start()
        sampler.start()
        writer.join(SECONDS + 30)
        stop_at = writer.stopped_at
        sampler.stop()
        if writer.error is not None:
            raise SystemExit(f"the writer failed: {writer.error}")
        if daemon.poll() is not None:
            raise SystemExit(f"the daemon exited with {daemon.returncode} while the writer ran")

        cutover = run_cutover(folder, stop_at)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print("problem: the daemon was still running 60 s after READY", flush=True)
        equal = same_rows(source, target)
        slots = leftover_slots(source)
        problems = daemon_log(folder / "daemon.log", daemon.returncode)
        if not equal:
            problems.append("the target's rows differ from the source's after READY")
        if slots:
            problems.append(f"slots or publications left on the source: {slots}")
        for problem in problems:
            print(f"problem: {problem}", flush=True)

        offered = writer.changes / (stop_at - writer.started_at)
        last_at, applied_n, _ = sampler.samples[-1]  # taken at the writer's stop
        applied = applied_n / (last_at - writer.started_at)
        lags = [lag for at, _, lag in sampler.samples if at <= stop_at]
        print(f"writer: {writer.changes:,} changes in {writer.transactions:,} transactions "
              f"over {stop_at - writer.started_at:.1f} s, {writer.late:,} begun late; "
              f"the target held {applied_n:,} at its stop; lag samples: {len(lags)}, "
              f"max {max(lags):.2f} s", flush=True)  # fmt: skip
        report("stream_pg_changes_per_s", applied, "changes/s", offered, rows=ROWS)
        report("stream_pg_lag_median", statistics.median(lags), "s", samples=len(lags))
        report("stream_pg_lag_p99", percentile(lags, 0.99), "s", samples=len(lags))
        report("stream_pg_cutover_window", cutover["window_s"], "s", WINDOW_TARGET,
               reported_s=round(cutover["seconds"], 3), ready=cutover["ready"])  # fmt: skip
        return 0 if cutover["ready"] and equal and not slots else 1
    finally:
        if writer is not None:
            writer.halt.set()
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        try:
            if LOGS:
                for log in folder.glob("*.log"):
                    shutil.copy(log, Path(LOGS) / log.name)
            server.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            machine.drop(target_db)
            machine.admin.dispose()


def seed(source: str, target: str) -> None:
    """The source's ``items`` of ROWS rows; the target's, empty, with an index on version."""
    columns = ("id bigint PRIMARY KEY, name text NOT NULL, amount numeric(14,2), "
               "changed_at timestamptz NOT NULL, version bigint NOT NULL")  # fmt: skip
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE items ({columns})"))
        conn.execute(sa.text(
            "INSERT INTO items SELECT i, 'item ' || i, (i % 100000) / 100.0, "
            "timestamptz '2024-01-01' + i * interval '1 second', 0 "
            "FROM generate_series(1, :n) AS i"
        ), {"n": ROWS})  # fmt: skip
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM (ANALYZE) items"))
    engine.dispose()
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE items ({columns})"))
        conn.execute(sa.text("CREATE INDEX items_version ON items (version)"))
    engine.dispose()


def config(source: str, target: str) -> str:
    """The config of the brief: one stream source, sluice's default batch settings."""
    return f"""
ledger: sqlite:///ledger.db
spark: {{master: "local[2]"}}
sources:
  items:
    kind: sql
    url: '{source}'
    table: items
    key: id
    mode: stream
    target: wh.items
targets:
  wh: {{kind: jdbc, url: '{target}'}}
"""


def sluice_env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT),
            "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip


def sluice() -> str:
    return str(Path(sys.executable).with_name("sluice"))


def start_daemon(folder: Path) -> subprocess.Popen[bytes]:
    """``sluice run`` as a daemon, its output in ``daemon.log``."""
    with open(folder / "daemon.log", "wb") as log:
        return subprocess.Popen(
            [sluice(), "run", "sluice.yaml", "--log-format", "json"], cwd=folder,
            env=sluice_env(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_loaded(target: str, daemon: subprocess.Popen[bytes], folder: Path) -> None:
    """Until the target holds every row of the full load (nothing else writes yet)."""
    engine = sa.create_engine(target)
    deadline = time.monotonic() + LOAD_TIMEOUT
    stop = threading.Event()
    try:
        with engine.connect() as conn:
            while conn.scalar(sa.text("SELECT count(*) FROM items")) < ROWS:
                conn.rollback()
                if daemon.poll() is not None:
                    tail = (folder / "daemon.log").read_text(errors="replace")[-3000:]
                    raise SystemExit(f"the daemon exited with {daemon.returncode}:\n{tail}")
                if time.monotonic() > deadline:
                    raise SystemExit(f"the load was not done after {LOAD_TIMEOUT:.0f} s")
                stop.wait(0.2)
    finally:
        engine.dispose()


class Writer(threading.Thread):
    """The application: RATE changes a second in transactions of 100, paced by the clock.

    ``log`` holds, per transaction, (its highest version, the changes made up
    to and with it, the moment its commit returned), in commit order."""

    def __init__(self, url: str, rows: int) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self.engine = sa.create_engine(url)
        self.halt = threading.Event()
        self.random = random.Random(7)
        self.live = list(range(1, rows + 1))
        self.next_id = rows + 1
        self.version = 0
        self.changes = 0
        self.transactions = 0
        self.late = 0  # transactions begun after their time: the writer could not keep up
        self.log: list[tuple[int, int, float]] = []
        self.started_at = self.stopped_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        per_s = RATE / sum(PER_TXN)
        try:
            with self.engine.connect() as conn:
                self.started_at = time.monotonic()
                end = self.started_at + SECONDS
                while True:
                    due = self.started_at + self.transactions / per_s
                    if due >= end:  # the last transaction's share of the time runs out too
                        self.halt.wait(max(0.0, end - time.monotonic()))
                        break
                    if due < time.monotonic() - 0.005:
                        self.late += 1
                    if self.halt.wait(max(0.0, due - time.monotonic())):
                        break
                    self._transaction(conn)
        except BaseException as error:  # noqa: BLE001 - said by main, which stops
            self.error = error
        finally:
            self.stopped_at = time.monotonic()
            self.engine.dispose()

    def _transaction(self, conn: sa.Connection) -> None:
        inserts, updates, deletes = PER_TXN
        picked = self.random.sample(range(len(self.live)), updates + deletes)
        changed = [self.live[i] for i in picked[:updates]]
        gone = sorted(picked[updates:], reverse=True)
        removed = [self.live[i] for i in gone]
        new = list(range(self.next_id, self.next_id + inserts))
        first = self.version + 1
        new_versions = list(range(first, first + inserts))
        changed_versions = list(range(first + inserts, first + inserts + updates))
        conn.execute(sa.text(
            "INSERT INTO items SELECT u.id, 'item ' || u.id || ' v' || u.v, u.v % 100000 / 100.0, "
            "clock_timestamp(), u.v "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:vs AS bigint[])) AS u(id, v)"
        ), {"ids": new, "vs": new_versions})  # fmt: skip
        conn.execute(sa.text(
            "UPDATE items SET name = 'item ' || u.id || ' v' || u.v, "
            "amount = u.v % 100000 / 100.0, changed_at = clock_timestamp(), version = u.v "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:vs AS bigint[])) AS u(id, v) "
            "WHERE items.id = u.id"
        ), {"ids": changed, "vs": changed_versions})  # fmt: skip
        conn.execute(sa.text("DELETE FROM items WHERE id = ANY(CAST(:ids AS bigint[]))"),
                     {"ids": removed})  # fmt: skip
        conn.commit()
        committed = time.monotonic()
        for i in gone:  # highest index first: a swap with the last never moves one still to go
            self.live[i] = self.live[-1]
            self.live.pop()
        self.live.extend(new)
        self.next_id += inserts
        self.version += inserts + updates
        self.changes += inserts + updates + deletes
        self.transactions += 1
        self.log.append((self.version, self.changes, committed))


class Sampler(threading.Thread):
    """Every SAMPLE seconds: the target's highest version, read as (when, changes applied,
    lag) against the writer's log (see the module)."""

    def __init__(self, url: str, writer: Writer) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        self.writer = writer
        self.halt = threading.Event()
        self.samples: list[tuple[float, int, float]] = []
        self._held = 0

    def run(self) -> None:
        with self.engine.connect() as conn:
            next_at = time.monotonic()
            while True:
                self.sample(conn)
                next_at += SAMPLE
                if self.halt.wait(max(0.0, next_at - time.monotonic())):
                    break
            self.sample(conn)  # at the writer's stop
        self.engine.dispose()

    def stop(self) -> None:
        self.halt.set()
        self.join(30)

    def sample(self, conn: sa.Connection) -> None:
        at = time.monotonic()
        held = int(conn.scalar(sa.text("SELECT coalesce(max(version), 0) FROM items")) or 0)
        # A delete of the row holding the highest version would lower the maximum.
        self._held = max(self._held, held)
        log = list(self.writer.log)
        holds = bisect_right(log, self._held, key=lambda t: t[0])  # transactions in the target
        applied = log[holds - 1][1] if holds else 0
        waiting = [t for t in log[holds:] if t[2] <= at]
        lag = at - waiting[0][2] if waiting else 0.0
        self.samples.append((at, applied, lag))


def run_cutover(folder: Path, stop_at: float) -> dict[str, Any]:
    """``sluice cutover --json``: its report, with ``window_s`` from the writer's stop."""
    proc = subprocess.run(
        [sluice(), "cutover", "sluice.yaml", "--json"], cwd=folder, env=sluice_env(),
        capture_output=True, text=True, timeout=CUTOVER_TIMEOUT, check=False,
    )  # fmt: skip
    window = time.monotonic() - stop_at
    (folder / "cutover.log").write_text(proc.stderr)
    lines = proc.stdout.splitlines()
    begin = next((i for i, line in enumerate(lines) if line == "{"), None)  # the document
    if begin is None:
        raise SystemExit(f"sluice cutover exited with {proc.returncode}, no report:\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")  # fmt: skip
    found = json.loads("\n".join(lines[begin:]))
    print(f"cutover: exit {proc.returncode}, ready {found['ready']}, final pass: "
          f"{found['final_pass']}; READY in {found['seconds']:.1f} s by its own clock, "
          f"{window:.1f} s from the writer's stop; {'; '.join(found['streams'])}",
          flush=True)  # fmt: skip
    for problem in found["problems"]:
        print(f"cutover problem: {problem}", flush=True)
    return {**found, "window_s": window}


def same_rows(source: str, target: str) -> bool:
    """An md5 of every row's text in key order, read on each server in UTC."""
    query = sa.text(
        "SELECT count(*), md5(string_agg(concat_ws('|', id, name, amount, changed_at, version), "
        "E'\\n' ORDER BY id)) FROM items"
    )  # fmt: skip
    found = []
    for url in (source, target):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SET TIME ZONE 'UTC'"))
            found.append(tuple(conn.execute(query).one()))
        engine.dispose()
    print(f"rows: source {found[0][0]:,}, target {found[1][0]:,}; "
          f"{'equal' if found[0] == found[1] else 'DIFFERENT'}", flush=True)  # fmt: skip
    return found[0] == found[1]


def leftover_slots(source: str) -> list[str]:
    """The slots and publications left on the source's server."""
    engine = sa.create_engine(source)
    with engine.connect() as conn:
        left = list(conn.scalars(sa.text(
            "SELECT slot_name FROM pg_replication_slots UNION ALL "
            "SELECT pubname FROM pg_publication"
        )))  # fmt: skip
    engine.dispose()
    return left


def daemon_log(path: Path, code: int | None) -> list[str]:
    """What the daemon's log says went wrong: its warnings and errors, counted by message."""
    problems = [] if code == 0 else [f"the daemon exited with {code}"]
    seen: Counter[str] = Counter()
    lines = path.read_text(errors="replace").splitlines()
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if "Traceback" in line or "Error" in line:
                seen[f"(not JSON) {line[:300]}"] += 1
            continue
        if isinstance(entry, dict) and entry.get("level") in ("warning", "error", "critical"):
            seen[f"{entry['level']} {entry.get('logger')}: {str(entry.get('message'))[:300]}"] += 1
    print(f"daemon log: {len(lines):,} lines, {sum(seen.values())} warnings or errors",
          flush=True)  # fmt: skip
    problems.extend(f"daemon log, {n}x: {message}" for message, n in seen.most_common(20))
    return problems


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


if __name__ == "__main__":
    sys.exit(main())
