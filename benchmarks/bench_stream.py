"""``mode: stream`` into PostgreSQL, from PostgreSQL and from MariaDB: a live table followed,
then cut over.

One run measures each source engine in turn (``ENGINES``, default ``pg,mariadb,tables``),
the same way; ``tables`` is a whole database of 100 tables in one ``tables:`` source
(:mod:`benchmarks.bench_stream_tables`, its own figures). A server of the benchmark's own
holds ``items`` (a bigint key, text, a decimal of 14,2, a timestamp with its zone, a
version bigint) of ``ROWS`` rows (default 100,000):

- ``pg``: ``tests.servers.LogicalPostgres`` (``wal_level=logical``, which the
  machine's shared server does not have and must not be given), the columns
  ``bigint, text, numeric(14,2), timestamptz, bigint``; sluice reads its
  logical slot;
- ``mariadb``: ``tests.servers.BinlogMariaDB`` (``log_bin``,
  ``binlog_format=ROW``, ``binlog_row_metadata=FULL``: the machine's server runs
  with ``log_bin=OFF``), the table in utf8mb4, ``bigint, text, decimal(14,2),
  timestamp(6), bigint``, seeded from ``seq_1_to_N``; sluice reads its row
  binary log by GTID.

The target is an empty ``items`` in a throwaway ``sluice_bench_stream_*``
database of the machine's PostgreSQL, made by the benchmark before the daemon
starts in the types sluice maps the source's to (from MariaDB: ``bigint, text,
numeric(14,2), timestamptz(6), bigint``, the README's mapping), with an index on
``version`` for the sampler: a table sluice made would have it only once the
benchmark added it after the first batch. With sluice's default batch settings:

1. ``sluice run CONFIG`` (a subprocess, logging JSON to a file) loads the
   table beside its change stream; the load's time is printed, not a figure.
2. Once the target holds every row, a writer (a thread of this process, one
   connection) makes ``RATE`` changes per second (default 5,000) for
   ``SECONDS`` (default 60): transactions of 100 changes (40 inserts of new
   keys, 40 updates, 20 deletes of live keys), paced by the clock; the same
   statements on both engines but for their SQL (the rows as one JSON
   parameter, read by ``jsonb_to_recordset`` or ``JSON_TABLE``). Each
   inserted or updated row gets the next ``version`` of one counter, in
   commit order, and ``changed_at`` the server's clock (``clock_timestamp()``,
   ``NOW(6)``): a value to carry, not a clock the figures read. The writer
   keeps, per transaction, its highest version, the changes made up to it
   and the moment its commit returned (this process's monotonic clock).
3. Every 0.5 s a sampler reads ``max(version)`` in the target. sluice applies
   whole transactions in commit order, so the target holds every transaction
   up to the last one whose versions it holds, and nothing after: that gives
   the changes applied so far and the lag, measured as sluice's own
   ``lag`` is defined: now against the commit of the oldest change the
   target does not hold yet (0 when it holds all committed). Both moments
   are read on this process's clock; neither reads a server's clock nor
   sluice's view of itself.
   Two seconds in, ``sluice verify CONFIG --json`` compares the tables while
   the writer goes on (past ``SECONDS`` until the verify ends), as an operator
   would before the switch: a MariaDB stream keeps a mark there, and the
   cutover compares only the rows changed since (``scheduler/verify_marks.py``).
4. The writer stops; ``sluice cutover CONFIG --json`` runs until READY (the
   daemon sees the flag, does its final pass and exits; the command runs its
   own, verifies with Spark and drops what sluice made on the source: the
   slot and publication, or the watermark table). Then an independent read
   compares the two tables row by row (every row of each, in key order, its
   values as Python's text: the timestamps as UTC instants, since the two
   engines print them differently) and checks nothing sluice made is left
   on the source.

Figures, ``ENGINE`` being ``pg`` or ``mariadb``:

- ``stream_ENGINE_load_rows_per_s``: the full load's rows over the seconds from
  the daemon's start until the target holds every row (step 1); baseline the
  same for a keyset copy (``mode: keyset``) of the same table into a table made
  alike, run just before it (ratio: the stream's load at that share of the
  copy's speed);

- ``stream_ENGINE_changes_per_s``: the changes applied while the writer ran
  (from its start to its stop, read as above) over that time; baseline the
  writer's own rate, offered (ratio: applied / offered; a backlog left at the
  stop counts against it);
- ``stream_ENGINE_lag_median``, ``stream_ENGINE_lag_p99``: of the lag samples
  taken while the writer ran, in seconds (no baseline);
- ``stream_ENGINE_verify_live_s``: the seconds the verify of step 2 took
  (no baseline);
- ``stream_ENGINE_cutover_window``: seconds from the writer's stop to
  ``sluice cutover`` exiting READY: the window the application's writes are
  stopped (the command's JVM start included; sluice's own "READY in" seconds
  are ``reported_s``); baseline the 10 s the feature aims at.

The machine has two cores shared by both servers, the daemon and the writer:
run no other benchmark beside it. Everything of each engine's part (its own
server, the target database, the temporary folder with the ledger, the
daemon) is removed or stopped before the next begins, also after a failure;
a part that fails does not keep the other from running.

    python benchmarks/bench_stream.py
    ENGINES=mariadb ROWS=20000 RATE=2000 SECONDS=20 python benchmarks/bench_stream.py
    LOGS=/tmp/stream-logs python benchmarks/bench_stream.py   # keeps ENGINE-{daemon,cutover}.log
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import zip_longest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.common import Server, report  # noqa: E402
from tests.servers import MARIADBD, PG_BIN, BinlogMariaDB, LogicalPostgres  # noqa: E402

ROWS = int(os.environ.get("ROWS", "100000"))
RATE = int(os.environ.get("RATE", "5000"))  # changes per second offered
SECONDS = float(os.environ.get("SECONDS", "60"))
# The source engines measured; "tables": a tables: group (benchmarks/bench_stream_tables.py).
ENGINES = os.environ.get("ENGINES", "pg,mariadb,tables").split(",")
ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PER_TXN = (40, 40, 20)  # inserts, updates, deletes per transaction
SAMPLE = 0.5  # seconds between two lag samples
LOGS = os.environ.get("LOGS")  # a folder to keep the daemons' and the cutovers' logs in
LOAD_TIMEOUT = 600.0
CUTOVER_TIMEOUT = 600.0
WINDOW_TARGET = 10.0  # seconds: what the cutover window should not exceed
ROOT = Path(__file__).resolve().parent.parent
# A session whose timestamps are UTC, per dialect: the seed's literals and the compare's reads.
UTC_SESSION = {"postgresql": "SET TIME ZONE 'UTC'", "mysql": "SET time_zone = '+00:00'"}
DELETE = sa.text("DELETE FROM items WHERE id IN :ids").bindparams(
    sa.bindparam("ids", expanding=True))  # fmt: skip


@dataclass(frozen=True)
class Engine:
    """What differs between two source engines: their server, their SQL, what sluice leaves.

    ``insert`` and ``update`` take ``:rows``, a JSON array of ``{"id", "v"}``;
    ``leftovers`` lists what sluice made on the source, nothing once it is dropped."""

    name: str  # the figures' infix
    label: str
    server: type[LogicalPostgres] | type[BinlogMariaDB]
    missing: str  # said when the server's binaries are not installed
    source_columns: str
    target_columns: str  # the types sluice maps the source's to
    seed: str  # ROWS rows: ``{n}``
    analyze: str
    insert: str
    update: str
    leftovers: str


_PG_COLUMNS = ("id bigint PRIMARY KEY, name text NOT NULL, amount numeric(14,2), "
               "changed_at timestamptz NOT NULL, version bigint NOT NULL")  # fmt: skip
PG = Engine(
    name="pg", label="PostgreSQL", server=LogicalPostgres,
    missing=f"PostgreSQL's initdb and pg_ctl are not in {PG_BIN}",
    source_columns=_PG_COLUMNS, target_columns=_PG_COLUMNS,
    seed="INSERT INTO items SELECT i, 'item ' || i, (i % 100000) / 100.0, "
         "timestamptz '2024-01-01' + i * interval '1 second', 0 FROM generate_series(1, {n}) AS i",
    analyze="VACUUM (ANALYZE) items",
    insert="INSERT INTO items SELECT u.id, 'item ' || u.id || ' v' || u.v, "
           "u.v % 100000 / 100.0, clock_timestamp(), u.v "
           "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS u(id bigint, v bigint)",
    update="UPDATE items SET name = 'item ' || u.id || ' v' || u.v, "
           "amount = u.v % 100000 / 100.0, changed_at = clock_timestamp(), version = u.v "
           "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS u(id bigint, v bigint) "
           "WHERE items.id = u.id",
    leftovers="SELECT slot_name FROM pg_replication_slots UNION ALL "
              "SELECT pubname FROM pg_publication",
)  # fmt: skip
_JSON_ROWS = "JSON_TABLE(:rows, '$[*]' COLUMNS (id bigint PATH '$.id', v bigint PATH '$.v')) AS u"
MARIADB = Engine(
    name="mariadb", label="MariaDB", server=BinlogMariaDB,
    missing=f"mariadb-install-db or {MARIADBD} is not installed",
    # An explicit default: a bare NOT NULL timestamp would also be ON UPDATE CURRENT_TIMESTAMP.
    source_columns="id bigint PRIMARY KEY, name text NOT NULL, amount decimal(14,2), "
                   "changed_at timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
                   "version bigint NOT NULL",
    # The source's default too: cutover is READY only when the target has it.
    target_columns="id bigint PRIMARY KEY, name text NOT NULL, amount numeric(14,2), "
                   "changed_at timestamptz(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
                   "version bigint NOT NULL",
    seed="INSERT INTO items SELECT seq, CONCAT('item ', seq), MOD(seq, 100000) / 100.0, "
         "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, 0 FROM seq_1_to_{n}",
    analyze="ANALYZE TABLE items",
    insert="INSERT INTO items SELECT u.id, CONCAT('item ', u.id, ' v', u.v), "
           f"MOD(u.v, 100000) / 100.0, NOW(6), u.v FROM {_JSON_ROWS}",
    update=f"UPDATE items JOIN {_JSON_ROWS} ON items.id = u.id "
           "SET items.name = CONCAT('item ', u.id, ' v', u.v), "
           "items.amount = MOD(u.v, 100000) / 100.0, items.changed_at = NOW(6), "
           "items.version = u.v",
    leftovers="SELECT table_name FROM information_schema.tables "
              "WHERE table_schema = DATABASE() AND table_name = 'sluice_watermarks'",
)  # fmt: skip
BY_NAME = {e.name: e for e in (PG, MARIADB)}


def main() -> int:
    unknown = [name for name in ENGINES if name not in BY_NAME and name != "tables"]
    if unknown:
        raise SystemExit(f"ENGINES: unknown {', '.join(unknown)}; known: "
                         f"{', '.join(BY_NAME)}, tables")  # fmt: skip
    ok = True
    for engine in (BY_NAME[name] for name in ENGINES if name in BY_NAME):
        print(f"== {engine.label} → PostgreSQL", flush=True)
        if not engine.server.available():
            # Said on stdout: the runner shows stderr only for a script that failed.
            print(f"{engine.missing}: no stream_{engine.name} figures", flush=True)
            continue
        try:
            ok = measure(engine) and ok
        except SystemExit as stop:  # one engine's failure: the next is still measured
            print(f"problem: {engine.label}: {stop}", flush=True)
            ok = False
    if "tables" in ENGINES:  # a whole database: benchmarks/bench_stream_tables.py
        from benchmarks import bench_stream_tables

        print("== a tables: group of PostgreSQL → PostgreSQL", flush=True)
        try:
            ok = bench_stream_tables.main() == 0 and ok
        except SystemExit as stop:
            print(f"problem: tables: {stop}", flush=True)
            ok = False
    return 0 if ok else 1


def measure(engine: Engine) -> bool:
    """One engine's part (see the module): its figures reported; whether it ended READY, equal
    and clean. Raises SystemExit when it cannot get as far as the figures."""
    server = engine.server()
    machine = Server(ADMIN)
    target_db = f"sluice_bench_stream_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix=f"sluice-bench-stream-{engine.name}-"))
    daemon: subprocess.Popen[bytes] | None = None
    writer: Writer | None = None
    sampler: Sampler | None = None
    try:
        server.start()
        own = Server(server.admin_url)
        source = own.create("src")
        own.admin.dispose()
        target = machine.create(target_db)
        seed(engine, source, target)
        (folder / "sluice.yaml").write_text(config(source, target))
        copy_s = keyset_load_s(engine, source, machine)
        machine.checkpoint()
        started = time.monotonic()
        daemon = start_daemon(folder)
        wait_loaded(target, daemon, folder)
        load_s = time.monotonic() - started
        print(f"load: {ROWS:,} rows in {load_s:.1f} s (from the daemon's start); the keyset "
              f"copy of the same table: {copy_s:.1f} s", flush=True)  # fmt: skip

        writer = Writer(engine, source, ROWS)
        sampler = Sampler(target, writer)
        writer.start()
        sampler.start()
        verify_s = live_verify(folder, writer)
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
        left = leftovers(engine, source)
        problems = daemon_log(folder / "daemon.log", daemon.returncode)
        if not equal:
            problems.append("the target's rows differ from the source's after READY")
        if left:
            problems.append(f"left on the source by sluice: {left}")
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
        figure = f"stream_{engine.name}"
        report(f"{figure}_load_rows_per_s", ROWS / load_s, "rows/s", ROWS / copy_s, rows=ROWS)
        report(f"{figure}_changes_per_s", applied, "changes/s", offered, rows=ROWS)
        report(f"{figure}_lag_median", statistics.median(lags), "s", samples=len(lags))
        report(f"{figure}_lag_p99", percentile(lags, 0.99), "s", samples=len(lags))
        report(f"{figure}_verify_live_s", verify_s, "s", rows=ROWS)
        report(f"{figure}_cutover_window", cutover["window_s"], "s", WINDOW_TARGET,
               reported_s=round(cutover["seconds"], 3), ready=cutover["ready"])  # fmt: skip
        return bool(cutover["ready"]) and equal and not left
    finally:
        # In order: the application, then sluice, then the servers; each step runs even
        # when one before it failed.
        if writer is not None:
            writer.halt.set()
            if writer.is_alive():
                writer.join(30)
        if sampler is not None:
            sampler.stop()
        try:
            stop_daemon(daemon)
            if LOGS:
                for log in folder.glob("*.log"):
                    shutil.copy(log, Path(LOGS) / f"{engine.name}-{log.name}")
        finally:
            try:
                server.stop()
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                machine.drop(target_db)
                machine.admin.dispose()


def seed(engine: Engine, source: str, target: str) -> None:
    """The source's ``items`` of ROWS rows; the target's, empty, with an index on version."""
    db = sa.create_engine(source)
    with db.begin() as conn:
        conn.execute(sa.text(UTC_SESSION[db.dialect.name]))
        utf8 = " CHARACTER SET utf8mb4" if db.dialect.name == "mysql" else ""
        conn.execute(sa.text(f"CREATE TABLE items ({engine.source_columns}){utf8}"))
        conn.execute(sa.text(engine.seed.format(n=ROWS)))
    with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(engine.analyze)).close()  # ANALYZE TABLE returns a result
    db.dispose()
    db = sa.create_engine(target)
    with db.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE items ({engine.target_columns})"))
        conn.execute(sa.text("CREATE INDEX items_version ON items (version)"))
    db.dispose()


def config(source: str, target: str, mode: str = "stream") -> str:
    """The config of the brief: one stream source (or a keyset one: ``mode``), sluice's
    default batch settings."""
    return f"""
ledger: sqlite:///ledger.db
spark: {{master: "local[2]"}}
sources:
  items:
    kind: sql
    url: '{source}'
    table: items
    key: id
    mode: {mode}
    target: wh.items
targets:
  wh: {{kind: jdbc, url: '{target}'}}
"""


def keyset_load_s(engine: Engine, source: str, machine: Server) -> float:
    """Seconds from ``sluice run``'s start until a keyset copy (``mode: keyset``, the
    baseline of the full load's speed) of the source's ``items`` is all in a target table
    made alike (its index on version too), measured as the stream's load is."""
    name = f"sluice_bench_copy_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-stream-copy-"))
    daemon: subprocess.Popen[bytes] | None = None
    try:
        target = machine.create(name)
        db = sa.create_engine(target)
        with db.begin() as conn:
            conn.execute(sa.text(f"CREATE TABLE items ({engine.target_columns})"))
            conn.execute(sa.text("CREATE INDEX items_version ON items (version)"))
        db.dispose()
        (folder / "sluice.yaml").write_text(config(source, target, "keyset"))
        machine.checkpoint()
        started = time.monotonic()
        daemon = start_daemon(folder)
        wait_loaded(target, daemon, folder)
        return time.monotonic() - started
    finally:
        stop_daemon(daemon)
        shutil.rmtree(folder, ignore_errors=True)
        machine.drop(name)


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


def stop_daemon(daemon: subprocess.Popen[bytes] | None) -> None:
    """A daemon still running: SIGTERM (it drains), SIGKILL after 60 s."""
    if daemon is None or daemon.poll() is not None:
        return
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()


def wait_loaded(target: str, daemon: subprocess.Popen[bytes], folder: Path,
                count: str = "SELECT count(*) FROM items", rows: int = ROWS) -> None:  # fmt: skip
    """Until ``count`` on the target gives ``rows``: every row of the full load is there
    (nothing else writes yet; a table sluice has not made yet counts as empty)."""
    engine = sa.create_engine(target)
    deadline = time.monotonic() + LOAD_TIMEOUT
    stop = threading.Event()
    try:
        with engine.connect() as conn:
            while True:
                try:
                    if int(conn.scalar(sa.text(count)) or 0) >= rows:
                        return
                except sa.exc.ProgrammingError:
                    pass  # a table not made yet
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
    """The application: RATE changes a second in transactions of 100, paced by the clock,
    in ``engine``'s SQL.

    ``log`` holds, per transaction, (its highest version, the changes made up
    to and with it, the moment its commit returned), in commit order."""

    def __init__(self, engine: Engine, url: str, rows: int) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self.insert, self.update = sa.text(engine.insert), sa.text(engine.update)
        self.engine = sa.create_engine(url)
        self.halt = threading.Event()
        self.keep_on = threading.Event()  # past SECONDS while set: a verify is reading
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
                    if due >= end and not self.keep_on.is_set():
                        # The last transaction's share of the time runs out too.
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
        new_versions = range(first, first + inserts)
        changed_versions = range(first + inserts, first + inserts + updates)
        conn.execute(self.insert, {"rows": rows_json(new, new_versions)})
        conn.execute(self.update, {"rows": rows_json(changed, changed_versions)})
        conn.execute(DELETE, {"ids": removed})
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


def rows_json(ids: list[int], versions: range) -> str:
    """The ``:rows`` parameter of the writer's statements."""
    return json.dumps([{"id": i, "v": v} for i, v in zip(ids, versions, strict=True)])


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
        if self.is_alive():
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


def live_verify(folder: Path, writer: Writer) -> float:
    """``sluice verify --json`` while the writer goes on (past ``SECONDS`` if need be), once
    the target holds some of its changes; the seconds it took."""
    time.sleep(min(2.0, SECONDS / 2))
    writer.keep_on.set()
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sluice(), "verify", "sluice.yaml", "--json"], cwd=folder, env=sluice_env(),
            capture_output=True, text=True, timeout=CUTOVER_TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        writer.keep_on.clear()
    took = time.monotonic() - started
    (folder / "verify.log").write_text(proc.stderr)
    lines = proc.stdout.splitlines()
    begin = next((i for i, line in enumerate(lines) if line == "{"), None)
    if begin is None:
        raise SystemExit(f"sluice verify exited with {proc.returncode}, no report:\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")  # fmt: skip
    for table in json.loads("\n".join(lines[begin:]))["tables"]:
        print(f"live verify: {took:.1f} s, {table.get('checked')} rows checked, "
              f"{table.get('in_flight')} in flight, missing {table.get('missing')}, "
              f"different {table.get('different')}, extra {table.get('extra')}", flush=True)
    return took


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
    """Whether the two ``items`` hold the same rows: read side by side in key order."""
    counts, first = [0, 0], None
    for theirs, ours in zip_longest(table_rows(source), table_rows(target)):
        counts[0] += theirs is not None
        counts[1] += ours is not None
        if theirs != ours and first is None:
            first = f"first difference: source {theirs}, target {ours}"
    print(f"rows: source {counts[0]:,}, target {counts[1]:,}; "
          f"{'equal' if first is None else f'DIFFERENT, {first}'}", flush=True)  # fmt: skip
    return first is None


def table_rows(url: str) -> Iterator[tuple[str, ...]]:
    """``items``' rows in key order, each value as Python's text: the same on both engines
    for the same value (a timestamp as its UTC instant, a decimal with its scale)."""
    db = sa.create_engine(url)
    query = sa.text("SELECT id, name, amount, changed_at, version FROM items ORDER BY id")
    try:
        with db.connect() as conn:
            conn.execute(sa.text(UTC_SESSION[db.dialect.name]))
            for row in conn.execution_options(stream_results=True, yield_per=10_000).execute(
                    query):  # fmt: skip
                yield tuple(value_text(value) for value in row)
    finally:
        db.dispose()


def value_text(value: Any) -> str:
    if isinstance(value, datetime):  # MariaDB's in the session's zone, UTC, without one
        zoned = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return zoned.astimezone(UTC).isoformat()
    return str(value)


def leftovers(engine: Engine, source: str) -> list[str]:
    """What sluice made on the source and left there: slots and publications, or its
    watermark table."""
    db = sa.create_engine(source)
    with db.connect() as conn:
        left = list(conn.scalars(sa.text(engine.leftovers)))
    db.dispose()
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
