"""``make bench BENCH=scale``: 100 M rows PostgreSQL → PostgreSQL, killed half-way, verified.

The source is one narrow table, ``events`` (``id bigint`` key, ``account
bigint``, ``at timestamptz``, ``note text`` of 16 characters; ~41 bytes of
values a row, ~73 bytes a row on disk), so that source and target fit the
disk at 100 M rows. sluice copies it with no setting but the source and the
target (``sluice run --until-drained``, no ``batch:`` or ``buffer:``); when
the target holds ``KILL_AT`` of the rows (committed batches, from
``_sluice_commits``), the daemon's whole process group is killed (SIGKILL)
and started again at once; then ``sluice verify`` compares the two
databases, and the benchmark checks them itself (count and a sum of each
row's hash on each side), so that a verify that says equal wrongly shows.

Every 2 seconds the benchmark samples the rows committed in the target and
the resident memory of the daemon's Python processes and of its JVM; a line
every ``PRINT_EVERY`` rows shows them. Figures:

- ``scale_rows_per_s``: rows over the two runs' wall time (JVM start-ups,
  planning, the kill and the restart in it), baseline the COPY pipe's
  (``psql COPY … TO STDOUT (binary) | psql COPY … FROM STDIN``) on the same
  table, unless ``PIPE=0``;
- ``scale_python_rss_mb`` / ``scale_jvm_rss_mb``: the peak over the whole
  copy, baseline the peak up to the first 10 % of the rows (ratio ≤ 1.10:
  flat from 10 M to 100 M);
- ``scale_restart_s``: from the restart after the kill until the target
  commits its next batch (rows flow again);
- ``scale_ledger_mb``: the ledger (SQLite, with its WAL) at the end;
- ``scale_verify_s``: ``sluice verify``, baseline the copy's wall time;
- ``scale_bytes``: the values moved (the columns' average width, from the
  source's statistics, times the rows), in GB.

Environment: ``ROWS`` (100,000,000), ``KILL_AT`` (0.5; 0 for no kill),
``PIPE`` (1), ``KEEP_SOURCES=1`` (keep the seeded source,
``sluice_scale_src_<rows>``, for the next run), ``SLUICE_BENCH_PG`` (the
server's admin URL), ``BENCH_DIR`` (the daemon's folder).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.common import ROOT, Server, first_to_last, report, timed, tree_rss  # noqa: E402

ROWS = int(os.environ.get("ROWS", "100000000"))
KILL_AT = float(os.environ.get("KILL_AT", "0.5"))
PIPE = os.environ.get("PIPE", "1") == "1"
KEEP_SOURCES = os.environ.get("KEEP_SOURCES") == "1"
PG_ADMIN = os.environ.get(
    "SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PRINT_EVERY = max(ROWS // 10, 1)
SEED_CHUNK = 5_000_000
TARGET_DB = "sluice_scale_dst"
TABLE = (
    "CREATE TABLE events (id bigint NOT NULL, account bigint NOT NULL, at timestamptz, note text)"
)


def seed(server: Server) -> str:
    """The source database, seeded in chunks by two connections (or kept from an earlier run)."""
    name = f"sluice_scale_src_{ROWS}"
    url = server.url(name)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # Written once the seeding is whole (a count of 100 M rows takes a while).
            seeded = conn.execute(sa.text("SELECT obj_description('events'::regclass)"))
            if seeded.scalar() == f"rows={ROWS}":
                return url
    except sa.exc.DBAPIError:
        pass  # not there yet, or not whole
    finally:
        engine.dispose()
    url = server.create(name)
    engine = sa.create_engine(url, pool_size=2)
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(sa.text(TABLE))

    def fill(low: int) -> None:
        high = min(low + SEED_CHUNK - 1, ROWS)
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO events SELECT g * 3 + g % 2, g % 100003, "
                "timestamptz '2024-01-01 00:00:00+00' + g * interval '317.123 ms', "
                "substr(md5(g::text), 1, 16) FROM generate_series(:low, :high) g"),
                {"low": low, "high": high},
            )  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(fill, range(1, ROWS + 1, SEED_CHUNK)))
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE events ADD PRIMARY KEY (id)"))
        conn.execute(sa.text(f"COMMENT ON TABLE events IS 'rows={ROWS}'"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE events"))
    engine.dispose()
    print(f"# seeded {name}: {ROWS:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
    return url


def value_bytes(url: str) -> int:
    """The values a copy moves: the columns' average width (ANALYZE's) times the rows."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        width = conn.execute(
            sa.text("SELECT sum(avg_width) FROM pg_stats WHERE tablename = 'events'")
        ).scalar_one()
    engine.dispose()
    return int(width) * ROWS


def digest(url: str) -> tuple[int, int]:
    """(rows, sum of each row's hash): the benchmark's own check, beside sluice verify."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count, total = conn.execute(sa.text(
            "SELECT count(*), sum(hashtextextended(e::text, 0) % 1000000007) "
            "FROM events e")).one()  # fmt: skip
    engine.dispose()
    return int(count), int(total or 0)


@dataclass
class Sample:
    """One look at the daemon: seconds since the copy started, rows committed, RSS (MB)."""

    seconds: float
    rows: int
    python_mb: float
    jvm_mb: float


@dataclass
class Watch:
    """The daemon's samples, and the figures drawn from them."""

    samples: list[Sample] = field(default_factory=list)
    restart_s: float | None = None

    def peak(self, attribute: str, until_rows: int | None = None) -> float:
        seen = [getattr(s, attribute) for s in self.samples
                if until_rows is None or s.rows <= until_rows]  # fmt: skip
        return max(seen, default=0.0)


def committed(admin: sa.Engine) -> int:
    """Rows of the batches the target has committed (0 before its first)."""
    with admin.connect() as conn:
        try:
            rows = conn.execute(
                sa.text("SELECT coalesce(sum(rows), 0) FROM _sluice_commits WHERE rows > 0")
            )
            return int(rows.scalar_one())
        except sa.exc.ProgrammingError:
            return 0


def daemon(folder: Path) -> subprocess.Popen[bytes]:
    """``sluice run --until-drained`` in a process group of its own (the kill takes its JVM)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT)}
    log = (folder / "run.log").open("ab")
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("sluice")), "run", "sluice.yaml", "--until-drained"],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def copy(folder: Path, source: str, target: str) -> tuple[float, Watch]:
    """The copy's wall time over both runs, and what was watched."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("ledger.db*"):
        old.unlink()
    (folder / "run.log").unlink(missing_ok=True)
    (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sql, url: "{source}", table: events, key: id, target: out.events}}
targets:
  out: {{kind: jdbc, url: "{target}"}}
""")
    admin = sa.create_engine(target, pool_size=1)
    watch = Watch()
    started = time.perf_counter()
    proc = daemon(folder)
    killed_at: int | None = None
    restarted = 0.0
    next_line = PRINT_EVERY
    try:
        while True:
            rows = committed(admin)
            python, jvm = tree_rss(proc.pid)
            now = time.perf_counter() - started
            watch.samples.append(Sample(now, rows, python, jvm))
            if rows >= next_line:
                print(f"# {now:7.1f} s  {rows:>13,} rows  python {python:6.0f} MB  "
                      f"jvm {jvm:6.0f} MB", flush=True)  # fmt: skip
                next_line = (rows // PRINT_EVERY + 1) * PRINT_EVERY
            if killed_at is not None and watch.restart_s is None and rows > killed_at:
                watch.restart_s = now - restarted
            if proc.poll() is not None:
                break
            if KILL_AT and killed_at is None and rows >= ROWS * KILL_AT:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                killed_at = committed(admin)
                print(f"# {now:7.1f} s  killed (SIGKILL) at {killed_at:,} rows; restarting",
                      flush=True)  # fmt: skip
                restarted = time.perf_counter() - started
                proc = daemon(folder)
            time.sleep(2.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        admin.dispose()
    seconds = time.perf_counter() - started
    output = (folder / "run.log").read_text(errors="replace")
    if proc.returncode != 0:
        sys.stderr.write(output[-4000:])
        raise SystemExit(f"sluice run exited with {proc.returncode}")
    found = first_to_last(output.rsplit("sluice run", 1)[-1])
    print(f"# sluice: {ROWS:,} rows in {seconds:.1f} s; the second run's data plane "
          f"{found or 0:,.0f} rows/s", flush=True)  # fmt: skip
    return seconds, watch


def copy_pipe(source: str, target: str) -> float:
    """The COPY pipe into a keyed table: the limit, whole process."""
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.execute(sa.text(TABLE.replace("id bigint NOT NULL", "id bigint PRIMARY KEY")))
    engine.dispose()

    def dsn(url: str) -> str:
        p = sa.make_url(url)
        return f"host={p.host} port={p.port} user={p.username} dbname={p.database}"

    return timed(
        f"set -o pipefail; psql -X -q '{dsn(source)}' -c 'COPY events TO STDOUT (FORMAT binary)' | "
        f"psql -X -q '{dsn(target)}' -c 'COPY events FROM STDIN (FORMAT binary)'"
    ).seconds


def main() -> int:
    server = Server(PG_ADMIN)
    source = seed(server)
    moved = value_bytes(source)
    expected = digest(source)
    folder = Path(os.environ.get("BENCH_DIR", "/tmp/sluice-bench-scale"))
    pipe_s = None
    try:
        if PIPE:
            server.checkpoint()
            pipe_s = copy_pipe(source, server.create("sluice_scale_pipe"))
            server.drop("sluice_scale_pipe")
            print(f"# COPY pipe: {pipe_s:.1f} s ({ROWS / pipe_s:,.0f} rows/s)", flush=True)
        target = server.create(TARGET_DB)
        server.checkpoint()
        copy_s, watch = copy(folder, source, target)
        ledger = sum(f.stat().st_size for f in folder.glob("ledger.db*"))
        check = timed([str(Path(sys.executable).with_name("sluice")), "verify", "sluice.yaml"],
                      cwd=folder)  # fmt: skip
        print(f"# sluice verify: {check.seconds:.1f} s", flush=True)
        got = digest(target)
        if got != expected:
            raise SystemExit(f"the copy differs from its source: {got} vs {expected}")
    finally:
        server.drop(TARGET_DB)
        server.drop("sluice_scale_pipe")
        if not KEEP_SOURCES:
            server.drop(f"sluice_scale_src_{ROWS}")
    settings = f"{ROWS:,} rows of events (4 columns), defaults, kill -9 at {KILL_AT:.0%}"
    report("scale_rows_per_s", ROWS / copy_s, "rows/s", ROWS / pipe_s if pipe_s else None,
           settings=settings)  # fmt: skip
    tenth = ROWS // 10
    for name, attribute in (("scale_python_rss_mb", "python_mb"), ("scale_jvm_rss_mb", "jvm_mb")):
        report(name, watch.peak(attribute), "MB", watch.peak(attribute, tenth), settings=settings)
    if watch.restart_s is not None:
        report("scale_restart_s", watch.restart_s, "s", settings=settings)
    report("scale_ledger_mb", ledger / 2**20, "MB", settings=settings)
    report("scale_verify_s", check.seconds, "s", copy_s, settings=settings)
    report("scale_bytes", moved / 1e9, "GB", settings=settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
