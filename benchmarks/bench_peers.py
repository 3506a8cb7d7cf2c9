"""sluice against the tools a data engineer would otherwise use, in one run.

One ``orders`` table (see :mod:`benchmarks.peers_data`) is copied into an
empty PostgreSQL database by each contender, a fresh process each, timed as
a whole (start-up, copy, exit):

- ``sluice``: ``sluice run --until-drained`` with its defaults: no ``batch:``
  and no ``buffer:`` section at all;
- ``sluice_tuned`` (when ``SLUICE_BATCH`` is set): the same with
  ``batch.max_items`` of ``SLUICE_BATCH``, the best settings found by hand;
- ``cx_adbc`` (PostgreSQL targets): ConnectorX reading the whole table as Arrow
  (two partitions on the key) then ADBC's ``adbc_ingest`` (binary COPY), the
  six-line script a data engineer would try next, in a virtualenv of its own
  (``benchmarks/.peers-venv``, made on first use from PyPI): at least once,
  the whole table in memory;
- ``spark``: a plain PySpark JDBC read then write (``local[2]``, 2 read
  partitions, fetchsize 10,000, batchsize 10,000, ``reWriteBatchedInserts``)
  into a keyed table, as ``../shared/NOTES.md`` measured it;
- ``pgloader``: ``pgloader --dynamic-space-size PGLOADER_HEAP SRC DST`` (its
  default heap dies on large tables with "Heap exhausted");
- ``copy_pipe`` (PostgreSQL sources only): ``psql COPY … TO STDOUT (FORMAT
  binary) | psql COPY … FROM STDIN (FORMAT binary)`` into a keyed table, the
  limit of what can be done.

Pairs (``PAIRS``): ``pg`` (PostgreSQL → PostgreSQL), ``mariadb``
(MariaDB → PostgreSQL, pgloader's home ground) and ``pg_mariadb``
(PostgreSQL → MariaDB: sluice's ``LOAD DATA`` against the plain Spark copy's
batched INSERTs with ``rewriteBatchedStatements``; pgloader and the COPY
pipe load only PostgreSQL). Sizes (``ROWS``, a comma
list; default 1,000,000). Every copy is checked row by row against its
source. Rounds (``ROUNDS``, default 3) interleave the contenders; each figure
is the median of the rounds' times, and every round is printed with the load
average before each run. Also measured, once per round at the smallest size:

- ``peers_batch_cost_ms``: the slope of sluice's wall time against its number
  of batches, PostgreSQL → PostgreSQL at 100k, 50k, 20k and 10k rows a batch
  (``SLOPE=0`` skips it);
- ``peers_pg_to_parquet``: sluice against a plain Spark JDBC read and
  ``write.parquet`` (``EXTRAS=0`` skips it and the next);
- ``peers_sqs_to_pg``: ``SQS_MESSAGES`` JSON messages on a moto_server through
  sluice into PostgreSQL (no peer: its own figure, for later comparisons).

Memory: the peak RSS of sluice's Python process and of its JVM, per size,
and their ratio from the smallest size to the largest; the ConnectorX + ADBC
pipeline's peak RSS beside them.

The data plane: sluice's rows/s from its first batch to its last (its own
summary line: Spark's start-up and the key planning before the first batch
left out) against the COPY pipe's rows/s, whole process.

    ROWS=1000000,10000000 python benchmarks/bench_peers.py
    PAIRS=pg ROUNDS=1 KEEP_SOURCES=1 python benchmarks/bench_peers.py

``CONTENDERS=copy_pipe,sluice_before`` runs only those beside sluice.
``BEFORE=/path/to/checkout`` adds that checkout's sluice as the contender
``sluice_before`` (the same config, its code on ``PYTHONPATH``): a change's
speed against the code before it, in the same run.
``KEEP_SOURCES=1`` keeps the seeded source databases (``sluice_peers_src_*``)
for the next run; target databases are always dropped at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks import peers_data  # noqa: E402
from benchmarks.common import Run, Server, first_to_last, report, timed  # noqa: E402

ROWS = [int(n) for n in os.environ.get("ROWS", "1000000").split(",")]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PAIRS = os.environ.get("PAIRS", "pg,mariadb,pg_mariadb").split(",")
FIGURE = {"pg": "pg_to_pg", "mariadb": "mariadb_to_pg", "pg_mariadb": "pg_to_mariadb"}
SLUICE_BATCH = int(os.environ["SLUICE_BATCH"]) if os.environ.get("SLUICE_BATCH") else None
"""``batch.max_items`` of the ``sluice_tuned`` contender; unset: no such contender."""
PGLOADER_HEAP = os.environ.get("PGLOADER_HEAP", "8192")
EXTRAS = os.environ.get("EXTRAS", "1") == "1"
SLOPE = os.environ.get("SLOPE", "1") == "1"
SQS_MESSAGES = int(os.environ.get("SQS_MESSAGES", "500"))
KEEP_SOURCES = os.environ.get("KEEP_SOURCES") == "1"
BEFORE = Path(os.environ["BEFORE"]).resolve() if os.environ.get("BEFORE") else None
CONTENDERS = [c for c in os.environ.get("CONTENDERS", "").split(",") if c]
"""Run only these beside sluice (default: every one)."""
"""A checkout of an earlier sluice: run as the contender ``sluice_before`` (same config)."""
PG_ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MARIADB_ADMIN = os.environ.get("SLUICE_BENCH_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test")
SLOPE_BATCHES = (100_000, 50_000, 20_000, 10_000)
HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE / ".peers-venv"
PEERS_PACKAGES = ["connectorx==0.4.6", "adbc-driver-postgresql==1.13.0", "pyarrow"]
"""The ConnectorX + ADBC peer's packages, in its own virtualenv (never sluice's)."""


@dataclass
class Figures:
    """Every run of one contender at one size, in order."""

    runs: list[Run] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)


# ------------------------------------------------------------------ databases


def source_database(server: Server, rows: int) -> tuple[str, tuple[int, int]]:
    """The seeded source of ``rows`` rows (reused when kept), and its fingerprint."""
    name = f"sluice_peers_src_{rows}"
    url = server.url(name)
    engine = sa.create_engine(url)
    try:
        if peers_data.seeded_rows(engine) != rows:
            engine.dispose()
            url = server.create(name)
            engine = sa.create_engine(url)
            started = time.perf_counter()
            peers_data.seed(engine, rows)
            print(f"# seeded {name}: {rows:,} rows in {time.perf_counter() - started:.0f} s",
                  flush=True)  # fmt: skip
        return url, peers_data.fingerprint(engine)
    finally:
        engine.dispose()


# ------------------------------------------------------------------ processes


def run_sluice(
    folder: Path, source: str, target: str, batch: int | None, code: Path | None = None
) -> Run:
    """``sluice run --until-drained``: defaults, except ``batch.max_items`` when ``batch``
    is given; ``code``: the checkout whose sluice runs (``BEFORE``), default this one."""
    folder.mkdir(parents=True)
    section = "" if batch is None else f"batch: {{max_items: {batch}}}\n"
    (folder / "sluice.yaml").write_text(
        f"""
ledger: sqlite:///ledger.db
sources:
  orders: {{kind: sql, url: "{source}", table: orders, key: id, target: out.orders}}
targets:
  out: {target}
{section}"""
    )
    sluice = str(Path(sys.executable).with_name("sluice"))
    return timed([sluice, "run", "sluice.yaml", "--until-drained"], cwd=folder, expect="sluice: ",
                 code=code)  # fmt: skip


def run_spark(source: str, target: str, kind: str = "jdbc") -> Run:
    """The plain Spark copy in a fresh process (see :func:`plain_copy`)."""
    return timed([sys.executable, str(Path(__file__)), "plain", source, target, kind])


def peers_python() -> str:
    """The peers virtualenv's Python (made, with :data:`PEERS_PACKAGES`, on first use)."""
    python = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / ".installed"
    wanted = " ".join(PEERS_PACKAGES)
    if not stamp.exists() or stamp.read_text() != wanted:
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS_PACKAGES],
                       check=True)  # fmt: skip
        stamp.write_text(wanted)
    return str(python)


def plain_url(url: str) -> str:
    """A SQLAlchemy URL as the peers take it: ``postgresql://`` or ``mysql://``, no driver."""
    parsed = sa.make_url(url)
    scheme = "postgresql" if parsed.get_backend_name() == "postgresql" else "mysql"
    return f"{scheme}://{parsed.username}@{parsed.host}:{parsed.port}/{parsed.database}"


def run_cx_adbc(source: str, target: str) -> Run:
    """ConnectorX + ADBC (:mod:`benchmarks.peer_cx_adbc`) in its own virtualenv."""
    return timed([peers_python(), str(HERE / "peer_cx_adbc.py"), plain_url(source),
                  plain_url(target), "orders"], expect="cx_adbc: ")  # fmt: skip


def run_pgloader(source: str, target: str) -> Run:
    return timed(["pgloader", "--dynamic-space-size", PGLOADER_HEAP, "--on-error-stop",
                  plain_url(source), plain_url(target)])  # fmt: skip


def run_copy_pipe(source: str, target: str) -> Run:
    def dsn(url: str) -> str:
        parsed = sa.make_url(url)
        return (f"host={parsed.host} port={parsed.port} user={parsed.username} "
                f"dbname={parsed.database}")  # fmt: skip

    return timed(
        f"set -o pipefail; psql -X -q '{dsn(source)}' -c 'COPY orders TO STDOUT (FORMAT binary)' | "
        f"psql -X -q '{dsn(target)}' -c 'COPY orders FROM STDIN (FORMAT binary)'"
    )


def plain_copy(source: str, target: str, kind: str) -> int:
    """Read ``orders`` over JDBC in 2 ranges of the key and write it as it comes."""
    from config.models import SparkConfig
    from spark_jobs.common.jdbc import JdbcEndpoint
    from spark_jobs.tasks.session import build_session

    engine = sa.create_engine(source)
    with engine.connect() as conn:
        low, high = conn.execute(sa.text("SELECT min(id), max(id) FROM orders")).one()
    engine.dispose()
    # Plain Spark: the JVM's own JIT thresholds, not the ones sluice sets for its driver.
    plain_jit = {"spark.driver.extraJavaOptions": "-XX:CompileThresholdScaling=1"}
    spark = build_session(SparkConfig(master="local[2]", conf=plain_jit), app_name="plain-copy")
    src = JdbcEndpoint.from_url(source)
    frame = spark.read.jdbc(
        src.url, "orders", column="id", lowerBound=low, upperBound=high + 1, numPartitions=2,
        properties=src.connection_properties(fetchsize="10000"),
    )  # fmt: skip
    if kind == "parquet":
        frame.write.mode("overwrite").parquet(target)
    else:
        dst = JdbcEndpoint.from_url(target)
        options = {"batchsize": "10000", "numPartitions": "2", "reWriteBatchedInserts": "true",
                   "rewriteBatchedStatements": "true"}  # fmt: skip
        frame.write.jdbc(dst.url, "orders", mode="append",
                         properties=dst.connection_properties(**options))  # fmt: skip
    spark.stop()
    print("plain copy: done")
    return 0


# ------------------------------------------------------------------ the rounds


def _keyed_table(url: str) -> None:
    engine = sa.create_engine(url)
    ddl = peers_data.PG_TABLE if engine.dialect.name == "postgresql" else peers_data.MARIADB_TABLE
    with engine.begin() as conn:
        conn.execute(sa.text(ddl))
    engine.dispose()


def _log(label: str, run: Run) -> None:
    load = os.getloadavg()[0]
    print(f"# {label}: {run.seconds:.1f} s (python {run.python_mb:.0f} MB, "
          f"jvm {run.jvm_mb:.0f} MB; load before {load:.2f})", flush=True)  # fmt: skip


Contender = Callable[[], tuple[Run, str, str | None]]


def contenders(pair: str, source: str, into: Server, folder: Path) -> dict[str, Contender]:
    """Each contender: a callable that copies into a fresh database; (run, target url, schema)."""

    def fresh(name: str) -> str:
        return into.create(f"sluice_peers_dst_{name}")

    def sluice() -> tuple[Run, str, str | None]:
        url = fresh("sluice")
        run = run_sluice(folder / f"sluice-{time.monotonic_ns()}", source,
                         f"{{kind: jdbc, url: '{url}'}}", None)  # fmt: skip
        return run, url, None

    def sluice_tuned() -> tuple[Run, str, str | None]:
        url = fresh("sluice_tuned")
        run = run_sluice(folder / f"tuned-{time.monotonic_ns()}", source,
                         f"{{kind: jdbc, url: '{url}'}}", SLUICE_BATCH)  # fmt: skip
        return run, url, None

    def cx_adbc() -> tuple[Run, str, str | None]:
        url = fresh("cx_adbc")
        _keyed_table(url)
        return run_cx_adbc(source, url), url, None

    def spark() -> tuple[Run, str, str | None]:
        url = fresh("spark")
        _keyed_table(url)
        return run_spark(source, url), url, None

    def pgloader() -> tuple[Run, str, str | None]:
        url = fresh("pgloader")
        # pgloader puts a MySQL database's tables in a schema named after it.
        schema = None if pair == "pg" else sa.make_url(source).database
        return run_pgloader(source, url), url, schema

    def copy_pipe() -> tuple[Run, str, str | None]:
        url = fresh("copy_pipe")
        _keyed_table(url)
        return run_copy_pipe(source, url), url, None

    def sluice_before() -> tuple[Run, str, str | None]:
        url = fresh("sluice_before")
        run = run_sluice(folder / f"before-{time.monotonic_ns()}", source,
                         f"{{kind: jdbc, url: '{url}'}}", None, BEFORE)  # fmt: skip
        return run, url, None

    runs: dict[str, Contender] = {"sluice": sluice}
    if SLUICE_BATCH is not None:
        runs["sluice_tuned"] = sluice_tuned
    if BEFORE is not None:
        runs["sluice_before"] = sluice_before
    if pair != "pg_mariadb":
        runs["cx_adbc"] = cx_adbc
    runs["spark"] = spark
    if pair != "pg_mariadb":
        runs["pgloader"] = pgloader
    if pair == "pg":
        runs["copy_pipe"] = copy_pipe
    if CONTENDERS:
        runs = {n: r for n, r in runs.items() if n == "sluice" or n in CONTENDERS}
    return runs


def bench_pair(pair: str, rows: int, pg: Server, folder: Path) -> dict[str, Figures]:
    mariadb = Server(MARIADB_ADMIN)
    server = mariadb if pair == "mariadb" else pg
    into = mariadb if pair == "pg_mariadb" else pg
    source, expected = source_database(server, rows)
    source_engine = sa.create_engine(source)
    figures: dict[str, Figures] = {}
    runs = contenders(pair, source, into, folder)
    try:
        for round_ in range(ROUNDS):
            for name, run in runs.items():
                into.checkpoint()
                server.checkpoint()
                result, url, schema = run()
                _log(f"{pair} {rows:,} round {round_ + 1} {name}", result)
                target = sa.create_engine(url)
                try:
                    peers_data.check_copy(source_engine, expected, target, schema, f"{pair} {name}")
                finally:
                    target.dispose()
                    into.drop(sa.make_url(url).database or "")
                figures.setdefault(name, Figures()).runs.append(result)
            ratios = {n: f.runs[-1].seconds / figures["sluice"].runs[-1].seconds
                      for n, f in figures.items() if n != "sluice"}  # fmt: skip
            print(f"# {pair} {rows:,} round {round_ + 1}: sluice speed over "
                  + ", ".join(f"{n} {r:.2f}" for n, r in ratios.items()), flush=True)
    finally:
        source_engine.dispose()
        if not KEEP_SOURCES:
            server.drop(f"sluice_peers_src_{rows}")
    for name, fig in figures.items():
        if name == "sluice":
            continue
        speed = rows / figures["sluice"].median()
        settings = {"batch.max_items": SLUICE_BATCH} if name == "sluice_tuned" else {}
        report(f"peers_{FIGURE[pair]}_{rows}_vs_{name}", speed, "rows/s", rows / fig.median(),
               settings=settings)  # fmt: skip
    rates = [r for r in map(first_to_last, figures["sluice"].runs) if r is not None]
    if rates:
        print(f"# {pair} {rows:,} sluice rows/s from the first batch to the last: "
              + ", ".join(f"{r:,.0f}" for r in rates), flush=True)  # fmt: skip
        pipe = figures.get("copy_pipe")
        report(f"peers_{FIGURE[pair]}_{rows}_data_plane", statistics.median(rates), "rows/s",
               rows / pipe.median() if pipe else None)  # fmt: skip
    for name in ("sluice", "cx_adbc"):
        if name in figures:
            runs = figures[name].runs
            report(f"peers_{FIGURE[pair]}_{rows}_memory_{name}",
                   max(r.python_mb + r.jvm_mb for r in runs), "MB",
                   python_mb=round(max(r.python_mb for r in runs)),
                   jvm_mb=round(max(r.jvm_mb for r in runs)))  # fmt: skip
    return figures


def batch_cost(source: str, pg: Server, folder: Path, rows: int) -> None:
    """Wall time against the number of batches, 1 M rows PostgreSQL → PostgreSQL."""
    times: dict[int, list[float]] = {}
    for round_ in range(ROUNDS):
        for batch in SLOPE_BATCHES:
            url = pg.create("sluice_peers_dst_slope")
            pg.checkpoint()
            run = run_sluice(folder / f"slope-{batch}-{round_}", source,
                             f"{{kind: jdbc, url: '{url}'}}", batch)  # fmt: skip
            pg.drop("sluice_peers_dst_slope")
            _log(f"slope round {round_ + 1}, batches of {batch:,}", run)
            times.setdefault(batch, []).append(run.seconds)
    xs = [-(-rows // b) for b in SLOPE_BATCHES]
    ys = [statistics.median(times[b]) for b in SLOPE_BATCHES]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    print("# batches: " + ", ".join(f"{x} -> {y:.1f} s" for x, y in zip(xs, ys, strict=True)))
    report("peers_batch_cost_ms", slope * 1000, "ms per batch", settings={"rows": rows})


def parquet(source: str, folder: Path, rows: int) -> None:
    times: dict[str, list[float]] = {"sluice": [], "spark": []}
    for round_ in range(ROUNDS):
        lake = folder / f"lake-{round_}"
        run = run_sluice(folder / f"parquet-{round_}", source,
                         f"{{kind: parquet, path: '{lake}'}}", None)  # fmt: skip
        _log(f"parquet round {round_ + 1} sluice", run)
        times["sluice"].append(run.seconds)
        run = run_spark(source, str(folder / f"plain-lake-{round_}"), "parquet")
        _log(f"parquet round {round_ + 1} spark", run)
        times["spark"].append(run.seconds)
        shutil.rmtree(lake, ignore_errors=True)
        shutil.rmtree(folder / f"plain-lake-{round_}", ignore_errors=True)
    report("peers_pg_to_parquet", rows / statistics.median(times["sluice"]), "rows/s",
           rows / statistics.median(times["spark"]),
           settings={"rows": rows})  # fmt: skip


def sqs(pg: Server, folder: Path) -> None:
    from benchmarks.bench_sqs import client, start_moto

    proc, endpoint = start_moto()
    try:
        sqs_client = client(endpoint)
        times = []
        for round_ in range(ROUNDS):
            queue = sqs_client.create_queue(QueueName=f"peers-{round_}-{os.getpid()}")["QueueUrl"]
            for start in range(0, SQS_MESSAGES, 10):
                sqs_client.send_message_batch(QueueUrl=queue, Entries=[
                    {"Id": str(i), "MessageBody": json.dumps(
                        {"id": i, "customer": f"c{i % 97}", "amount": i / 4, "note": "ü" * 40})}
                    for i in range(start, min(start + 10, SQS_MESSAGES))
                ])  # fmt: skip
            url = pg.create("sluice_peers_dst_sqs")
            run_folder = folder / f"sqs-{round_}"
            run_folder.mkdir()
            (run_folder / "sluice.yaml").write_text(
                f"""
ledger: sqlite:///ledger.db
sources:
  events: {{kind: sqs, queue_url: "{queue}", endpoint_url: "{endpoint}", key: id,
           access_key_id: testing, secret_access_key: testing, wait_time: 1s,
           visibility_timeout: 10s, drain_quiet: 1s, target: out.events}}
targets:
  out: {{kind: jdbc, url: '{url}'}}
"""
            )
            sluice = str(Path(sys.executable).with_name("sluice"))
            run = timed([sluice, "run", "sluice.yaml", "--until-drained"], cwd=run_folder,
                        expect=f"sluice: {SQS_MESSAGES:,} rows")  # fmt: skip
            pg.drop("sluice_peers_dst_sqs")
            sqs_client.delete_queue(QueueUrl=queue)
            _log(f"sqs round {round_ + 1}", run)
            times.append(run.seconds)
        report("peers_sqs_to_pg", SQS_MESSAGES / statistics.median(times), "rows/s",
               settings={"messages": SQS_MESSAGES})  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "plain":
        return plain_copy(*sys.argv[2:5])
    if shutil.which("pgloader") is None and (not CONTENDERS or "pgloader" in CONTENDERS):
        raise SystemExit("pgloader is not installed: `make bench` installs it "
                         "(the Debian package pgloader)")  # fmt: skip
    pg = Server(PG_ADMIN)
    folder = Path(tempfile.mkdtemp(prefix="sluice-bench-peers-"))
    memory: dict[int, Run] = {}
    tuned = "" if SLUICE_BATCH is None else f"; sluice_tuned: batch.max_items {SLUICE_BATCH:,}"
    print(f"# sluice: its defaults{tuned}; pgloader --dynamic-space-size {PGLOADER_HEAP}",
          flush=True)  # fmt: skip
    try:
        for rows in ROWS:
            for pair in PAIRS:
                figures = bench_pair(pair, rows, pg, folder)
                if pair == "pg":
                    memory[rows] = Run(0.0, max(r.python_mb for r in figures["sluice"].runs),
                                       max(r.jvm_mb for r in figures["sluice"].runs))  # fmt: skip
        smallest = min(ROWS)
        if "pg" in PAIRS:
            source, _ = source_database(pg, smallest)
            if SLOPE:
                batch_cost(source, pg, folder, smallest)
            if EXTRAS:
                parquet(source, folder, smallest)
                sqs(pg, folder)
            if not KEEP_SOURCES:
                pg.drop(f"sluice_peers_src_{smallest}")
        for rows, run in sorted(memory.items()):
            base = memory[smallest]
            report(f"peers_memory_python_{rows}", run.python_mb, "MB",
                   base.python_mb if rows != smallest else None)  # fmt: skip
            report(f"peers_memory_jvm_{rows}", run.jvm_mb, "MB",
                   base.jvm_mb if rows != smallest else None)  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        pg.admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
