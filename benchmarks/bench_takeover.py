"""``make bench BENCH=takeover``: the time to a target that can take over, against pgcopydb.

What a user waits for is not the rows but a target the application can write to:
its rows, indexes, constraints and sequences. Each contender copies into an empty
PostgreSQL database, a fresh process each, timed as a whole (start-up, copy,
schema, exit), in rounds that interleave the contenders (``ROUNDS``, default 3);
each figure is the median of its rounds.

- ``takeover_indexed``: the peers ``orders`` table (``ROWS``, default 10,000,000;
  :mod:`benchmarks.peers_data`) with 3 secondary indexes and a check. sluice: ``sluice
  run --until-drained`` with its defaults (no ``batch:``), which ends once the
  table's indexes and constraints are built; pgcopydb: ``pgcopydb clone --table-jobs 2
  --index-jobs 2``. Ratio: pgcopydb's time over sluice's (≥ 1: sluice is faster).
- ``takeover_tables``: one parent table and ``TABLES`` (default 1,000) tables of
  ``TABLE_ROWS`` (default 1,000) rows, each with a foreign key to the parent.
  sluice: a ``tables: ["public.*"]`` source with ``order: foreign_keys`` (what
  ``sluice init`` writes), until drained; pgcopydb as above. Ratio as above.
- ``takeover_data``: the data alone: sluice copying the indexed table with ``schema:
  {build: false}`` against the COPY pipe (``psql COPY … TO STDOUT (FORMAT binary) |
  psql COPY … FROM STDIN (FORMAT binary)``) into a keyed table. Ratio: the pipe's time
  over sluice's.

Every target is checked: its rows against the source (``peers_data.check``), and
its indexes and constraints against the source's (``pg_indexes``,
``pg_get_constraintdef``). ``KEEP_SOURCES=1`` keeps the seeded sources
(``sluice_takeover_src_*``) for the next run; targets are always dropped.
``CONTENDERS=sluice,pgcopydb,copy_pipe,sluice_data`` picks; ``PARTS=indexed,tables``.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks import peers_data  # noqa: E402
from benchmarks.common import Run, Server, report, timed  # noqa: E402

ROWS = int(os.environ.get("ROWS", "10000000"))
TABLES = int(os.environ.get("TABLES", "1000"))
TABLE_ROWS = int(os.environ.get("TABLE_ROWS", "1000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
KEEP_SOURCES = os.environ.get("KEEP_SOURCES") == "1"
PARTS = os.environ.get("PARTS", "indexed,tables").split(",")
CONTENDERS = [c for c in os.environ.get("CONTENDERS", "").split(",") if c]
PG_ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
SLUICE = str(Path(sys.executable).with_name("sluice"))

INDEXES = [
    "CREATE INDEX orders_customer_idx ON orders (customer)",
    "CREATE INDEX orders_placed_idx ON orders (placed_at DESC)",
    "CREATE INDEX orders_tag_amount_idx ON orders (tag, amount)",
    "ALTER TABLE orders ADD CONSTRAINT orders_amount_check CHECK (amount > -1000000)",
]


def dsn(url: str) -> str:
    """A SQLAlchemy URL as libpq takes it."""
    parsed = sa.make_url(url)
    return f"postgres://{parsed.username}@{parsed.host}:{parsed.port}/{parsed.database}"


def seed_indexed(server: Server) -> str:
    """The indexed orders table, seeded or kept from an earlier run of the same size."""
    name = f"sluice_takeover_src_{ROWS}"
    url = server.url(name)
    engine = sa.create_engine(url)
    try:
        if peers_data.seeded_rows(engine) == ROWS and _objects(url) == _EXPECTED:
            return url
    except sa.exc.OperationalError:
        pass
    finally:
        engine.dispose()
    url = server.create(name)
    engine = sa.create_engine(url)
    started = time.perf_counter()
    peers_data.seed(engine, ROWS)
    with engine.begin() as conn:
        for statement in INDEXES:
            conn.execute(sa.text(statement))
    engine.dispose()
    print(f"# seeded {ROWS:,} indexed rows in {time.perf_counter() - started:.0f} s", flush=True)
    return url


def seed_tables(server: Server) -> str:
    """One parent and TABLES children of TABLE_ROWS rows, each referring to the parent."""
    name = f"sluice_takeover_src_{TABLES}x{TABLE_ROWS}"
    url = server.url(name)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f'")).scalar_one()
        if found == TABLES:
            return url
    except sa.exc.OperationalError:
        pass
    finally:
        engine.dispose()
    url = server.create(name)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE parent (id bigint PRIMARY KEY, name text)"))
        conn.execute(sa.text("INSERT INTO parent SELECT g, 'parent ' || g "
                             "FROM generate_series(1, 100) g"))  # fmt: skip
        for i in range(TABLES):
            conn.execute(sa.text(
                f"CREATE TABLE child_{i:04d} (id bigint PRIMARY KEY, parent_id bigint NOT NULL "
                f"REFERENCES parent (id), at timestamptz, amount numeric(12,2), note text)"))
            conn.execute(sa.text(
                f"INSERT INTO child_{i:04d} SELECT g, 1 + g % 100, timestamptz '2024-01-01' "
                f"+ g * interval '1 s', g / 7.0, md5(g::text) FROM generate_series(1, :n) g"),
                {"n": TABLE_ROWS})  # fmt: skip
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    engine.dispose()
    return url


_EXPECTED = sorted([
    ("orders_customer_idx", "CREATE INDEX orders_customer_idx ON T USING btree (customer)"),
    ("orders_pkey", "CREATE UNIQUE INDEX orders_pkey ON T USING btree (id)"),
    ("orders_placed_idx", "CREATE INDEX orders_placed_idx ON T USING btree (placed_at DESC)"),
    ("orders_tag_amount_idx", "CREATE INDEX orders_tag_amount_idx ON T USING btree (tag, amount)"),
    ("orders_amount_check", "CHECK ((amount > ('-1000000'::integer)::numeric))"),
    ("orders_pkey", "PRIMARY KEY (id)"),
])


def _objects(url: str) -> list[tuple[str, str]]:
    """The orders table's indexes and constraints as the server prints them."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        indexes = [(n, re.sub(r" ON \S+ ", " ON T ", d)) for n, d in conn.execute(sa.text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'orders'"))]
        constraints = [tuple(r) for r in conn.execute(sa.text(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = to_regclass('orders')"))]
    engine.dispose()
    return sorted([*indexes, *constraints])  # type: ignore[list-item]


def _foreign_keys(url: str) -> int:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(sa.text(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND convalidated")).scalar_one()
    engine.dispose()
    return int(found)


def run_sluice(folder: Path, source: str, target: str, extra: str = "", whole: bool = False) -> Run:
    folder.mkdir(parents=True)
    what = ('tables: ["public.*"]\n    order: foreign_keys\n    target: out' if whole
            else "table: orders\n    key: id\n    target: out.orders")  # fmt: skip
    (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  src:
    kind: sql
    url: "{source}"
    {what}{extra}
targets:
  out: {{kind: jdbc, url: "{target}"}}
""")
    return timed([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=folder, expect="sluice: ")


def run_pgcopydb(folder: Path, source: str, target: str) -> Run:
    work = folder / f"pgcopydb-{time.monotonic_ns()}"
    return timed(["pgcopydb", "clone", "--dir", str(work), "--source", dsn(source),
                  "--target", dsn(target), "--table-jobs", "2", "--index-jobs", "2"])  # fmt: skip


def run_copy_pipe(source: str, target: str) -> Run:
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.execute(sa.text(peers_data.PG_TABLE))
    engine.dispose()
    return timed(
        f"set -o pipefail; psql -X -q '{dsn(source)}' -c 'COPY orders TO STDOUT (FORMAT binary)'"
        f" | psql -X -q '{dsn(target)}' -c 'COPY orders FROM STDIN (FORMAT binary)'"
    )


def main() -> int:
    if shutil.which("pgcopydb") is None:
        print("pgcopydb is missing: make bench installs Debian's package", file=sys.stderr)
        return 1
    pg = Server(PG_ADMIN)
    folder = Path(tempfile.mkdtemp(prefix="sluice-takeover-"))
    made: list[str] = []
    times: dict[str, list[float]] = {}

    def fresh(name: str) -> str:
        made.append(f"sluice_takeover_dst_{name}")
        return pg.create(made[-1])

    def timing(label: str, run: Callable[[], Run]) -> None:
        if CONTENDERS and label.split(":")[1] not in CONTENDERS:
            return
        pg.checkpoint()
        load = os.getloadavg()[0]
        seconds = run().seconds
        times.setdefault(label, []).append(seconds)
        print(f"# {label}: {seconds:.1f} s (load before {load:.2f})", flush=True)

    sources: dict[str, str] = {}
    try:
        if "indexed" in PARTS:
            sources["indexed"] = seed_indexed(pg)
        if "tables" in PARTS:
            sources["tables"] = seed_tables(pg)
        for round_ in range(1, ROUNDS + 1):
            print(f"# round {round_}", flush=True)
            if "indexed" in sources:
                src = sources["indexed"]

                def indexed(kind: str, src: str = src) -> Callable[[], Run]:
                    def go() -> Run:
                        url = fresh(kind)
                        if kind == "copy_pipe":
                            return run_copy_pipe(src, url)
                        if kind == "pgcopydb":
                            run = run_pgcopydb(folder, src, url)
                        else:
                            extra = "\n    schema: {build: false}" if kind == "sluice_data" else ""
                            run = run_sluice(folder / f"{kind}-{time.monotonic_ns()}", src, url,
                                             extra)  # fmt: skip
                        if kind != "sluice_data" and _objects(url) != _EXPECTED:
                            raise SystemExit(f"{kind}: the target's objects are {_objects(url)}")
                        _check_rows(src, url, kind)
                        return run
                    return go

                for kind in ("sluice", "pgcopydb", "sluice_data", "copy_pipe"):
                    timing(f"indexed:{kind}", indexed(kind))
            if "tables" in sources:
                src = sources["tables"]

                def tables(kind: str, src: str = src) -> Callable[[], Run]:
                    def go() -> Run:
                        url = fresh(f"tables_{kind}")
                        run = (run_pgcopydb(folder, src, url) if kind == "pgcopydb" else
                               run_sluice(folder / f"tables-{time.monotonic_ns()}", src, url,
                                          whole=True))  # fmt: skip
                        if _foreign_keys(url) != TABLES:
                            raise SystemExit(f"{kind}: {_foreign_keys(url)} valid foreign keys")
                        return run
                    return go

                for kind in ("sluice", "pgcopydb"):
                    timing(f"tables:{kind}", tables(kind))
            for name in made:
                pg.drop(name)
            made.clear()
    finally:
        for name in made:
            pg.drop(name)
        if not KEEP_SOURCES:
            for url in sources.values():
                pg.drop(sa.make_url(url).database or "")
        shutil.rmtree(folder, ignore_errors=True)
    median = {label: statistics.median(runs) for label, runs in times.items()}
    for label, runs in times.items():
        print(f"# {label}: " + " ".join(f"{s:.1f}" for s in runs), flush=True)
    _figure("takeover_indexed", median, "indexed:sluice", "indexed:pgcopydb")
    _figure("takeover_tables", median, "tables:sluice", "tables:pgcopydb")
    _figure("takeover_data", median, "indexed:sluice_data", "indexed:copy_pipe")
    return 0


def _figure(name: str, median: dict[str, float], mine: str, peer: str) -> None:
    if mine not in median:
        return
    # The ratio is the peer's time over sluice's: above 1, sluice is faster.
    value, baseline = median[mine], median.get(peer)
    settings = {"rows": ROWS} if name != "takeover_tables" else {
        "tables": TABLES, "rows_each": TABLE_ROWS}  # fmt: skip
    if baseline is None:
        report(name, value, "s", **settings)
    else:
        report(name, value, "s", baseline, speed_ratio=round(baseline / value, 3), **settings)


_FINGERPRINTS: dict[str, tuple[int, int]] = {}


def _check_rows(source: str, target: str, label: str) -> None:
    """Stop the benchmark unless the target's ``orders`` equals its source, row by row."""
    engine_a, engine_b = sa.create_engine(source), sa.create_engine(target)
    try:
        if source not in _FINGERPRINTS:
            _FINGERPRINTS[source] = peers_data.fingerprint(engine_a, None)
        peers_data.check_copy(engine_a, _FINGERPRINTS[source], engine_b, None, label)
    finally:
        engine_a.dispose()
        engine_b.dispose()


if __name__ == "__main__":
    sys.exit(main())
