"""``make bench BENCH=tables``: a whole PostgreSQL database of many tables, against pgloader.

The source database holds ``SMALL_TABLES`` tables of ``SMALL_ROWS`` rows and
``LARGE_TABLES`` tables of ``LARGE_ROWS`` rows (an id, a parent id, a
timestamp, a number and ~60 bytes of text); every tenth small table refers
to the first by a foreign key. One ``tables: ["public.*"]`` source with
``order: foreign_keys`` and no other setting copies it into a new database
(``sluice run --until-drained``), then ``sluice verify`` compares the two;
pgloader copies it into another. Every second, ``pg_stat_activity`` gives
the connections open to the source and to sluice's target: sluice must never
hold more to the source than its budget (``limits.max_connections``, 10 by
default), whatever the number of tables.

Figures (each a fresh process, whole processes timed, JVM start in sluice's):

- ``tables_sluice_s``: sluice's copy, baseline pgloader's (ratio ≤ 1: faster);
- ``tables_verify_s``: sluice verify, baseline sluice's copy;
- ``tables_source_connections`` / ``tables_target_connections``: the most
  seen at once, baseline the source's budget.

Environment: ``SMALL_TABLES`` (1000), ``SMALL_ROWS`` (1000), ``LARGE_TABLES``
(200), ``LARGE_ROWS`` (50000), ``KEEP_SOURCES=1`` (keep the seeded source
for the next run), ``SLUICE_BENCH_PG`` (the server's admin URL).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from benchmarks.common import Run, Server, report, timed  # noqa: E402
from config.sources import DATABASE_CONNECTIONS  # noqa: E402

SMALL_TABLES = int(os.environ.get("SMALL_TABLES", "1000"))
SMALL_ROWS = int(os.environ.get("SMALL_ROWS", "1000"))
LARGE_TABLES = int(os.environ.get("LARGE_TABLES", "200"))
LARGE_ROWS = int(os.environ.get("LARGE_ROWS", "50000"))
KEEP_SOURCES = os.environ.get("KEEP_SOURCES") == "1"
PG_ADMIN = os.environ.get("SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
PGLOADER_HEAP = os.environ.get("PGLOADER_HEAP", "8192")

COLUMNS = "id bigint PRIMARY KEY, parent bigint, at timestamptz, amount numeric(12,2), note text"


def shape() -> str:
    """The source's name: what it holds (a kept one is reused only when it is the same)."""
    return f"sluice_tables_src_{SMALL_TABLES}x{SMALL_ROWS}_{LARGE_TABLES}x{LARGE_ROWS}"


def seed(server: Server) -> str:
    """The source database, seeded (or kept from an earlier run of the same shape)."""
    name = shape()
    url = server.url(name)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(sa.text(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar_one()
        if tables == SMALL_TABLES + LARGE_TABLES:
            return url
    except sa.exc.OperationalError:
        pass  # not there yet
    finally:
        engine.dispose()
    url = server.create(name)
    engine = sa.create_engine(url)
    started = time.perf_counter()
    fill = ("INSERT INTO {t} SELECT g, 1 + g % 97, timestamptz '2024-01-01' + g * interval '1 s', "
            "g / 7.0, md5(g::text) || md5((g * 3)::text) FROM generate_series(1, {n}) g")
    with engine.begin() as conn:
        for i in range(SMALL_TABLES):
            refers = i > 0 and i % 10 == 0
            conn.execute(sa.text(f"CREATE TABLE s{i:04} ({COLUMNS}"
                                 + (", FOREIGN KEY (parent) REFERENCES s0000 (id))" if refers
                                    else ")")))  # fmt: skip
            conn.execute(sa.text(fill.format(t=f"s{i:04}", n=SMALL_ROWS)))
        for i in range(LARGE_TABLES):
            conn.execute(sa.text(f"CREATE TABLE l{i:03} ({COLUMNS})"))
            conn.execute(sa.text(fill.format(t=f"l{i:03}", n=LARGE_ROWS)))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    engine.dispose()
    print(f"# seeded {name}: {SMALL_TABLES} tables of {SMALL_ROWS:,} rows, {LARGE_TABLES} of "
          f"{LARGE_ROWS:,}, in {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    return url


class Connections:
    """The most connections open to each of some databases, from pg_stat_activity each second."""

    def __init__(self, admin_url: str, databases: list[str]) -> None:
        self.most: dict[str, int] = defaultdict(int)
        self._admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self._databases = databases
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Connections:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._admin.dispose()

    def _sample(self) -> None:
        with self._admin.connect() as conn:
            while not self._stop.is_set():
                for db, n in conn.execute(sa.text(
                    "SELECT datname, count(*) FROM pg_stat_activity "
                    "WHERE datname = ANY(:dbs) GROUP BY datname"), {"dbs": self._databases}):
                    self.most[db] = max(self.most[db], n)  # fmt: skip
                self._stop.wait(1.0)


def sluice(folder: Path, source: str, target: str) -> tuple[Run, Run]:
    """sluice's copy and its verify, each a fresh process."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ledger.db").unlink(missing_ok=True)
    (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  shop:
    kind: sql
    url: "{source}"
    tables: ["public.*"]
    order: foreign_keys
    target: out
targets:
  out: {{kind: jdbc, url: "{target}"}}
""")
    exe = str(Path(sys.executable).with_name("sluice"))
    copy = timed([exe, "run", "sluice.yaml", "--until-drained"], cwd=folder, expect="sluice: ")
    check = timed([exe, "verify", "sluice.yaml"], cwd=folder)
    return copy, check


def pgloader(source: str, target: str) -> Run:
    def plain(url: str) -> str:
        p = sa.make_url(url)
        return f"postgresql://{p.username}@{p.host}:{p.port}/{p.database}"

    return timed(["pgloader", "--dynamic-space-size", PGLOADER_HEAP, "--on-error-stop",
                  plain(source), plain(target)])  # fmt: skip


def main() -> int:
    server = Server(PG_ADMIN)
    with server.admin.connect() as conn:
        allowed = conn.execute(sa.text("SHOW max_connections")).scalar_one()
    print(f"# PostgreSQL max_connections {allowed}; sluice's budget per database "
          f"{DATABASE_CONNECTIONS} (its default)", flush=True)  # fmt: skip
    source = seed(server)
    source_db = sa.make_url(source).database
    target = server.create("sluice_tables_dst")
    folder = Path(os.environ.get("BENCH_DIR", "/tmp/sluice-bench-tables"))
    try:
        server.checkpoint()
        with Connections(PG_ADMIN, [source_db, "sluice_tables_dst"]) as seen:
            copy, check = sluice(folder, source, target)
        print(f"# sluice: copy {copy.seconds:.1f} s, verify {check.seconds:.1f} s; "
              f"connections at most: source {seen.most[source_db]}, "
              f"target {seen.most['sluice_tables_dst']}", flush=True)  # fmt: skip
        loader_db = server.create("sluice_tables_pgloader")
        server.checkpoint()
        loaded = pgloader(source, loader_db)
        print(f"# pgloader: {loaded.seconds:.1f} s", flush=True)
    finally:
        server.drop("sluice_tables_dst")
        server.drop("sluice_tables_pgloader")
        if not KEEP_SOURCES:
            server.drop(shape())
    settings = f"{SMALL_TABLES}x{SMALL_ROWS} + {LARGE_TABLES}x{LARGE_ROWS} rows"
    report("tables_sluice_s", copy.seconds, "s", loaded.seconds, settings=settings)
    report("tables_verify_s", check.seconds, "s", copy.seconds, settings=settings)
    report("tables_source_connections", seen.most[source_db], "connections",
           DATABASE_CONNECTIONS, settings=settings)  # fmt: skip
    report("tables_target_connections", seen.most["sluice_tables_dst"], "connections",
           DATABASE_CONNECTIONS, settings=settings)  # fmt: skip
    return 0 if seen.most[source_db] <= DATABASE_CONNECTIONS else 1


if __name__ == "__main__":
    sys.exit(main())
