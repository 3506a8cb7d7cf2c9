"""``/record``: how long "where is this record?" takes with 10 M keys migrated.

A ledger (a SQLite file, and PostgreSQL when it is reachable) is filled with
the batches that cover ``--keys`` keys of two sources, written straight into
the ledger's tables as the daemon writes them (one transaction per chunk,
SQLite's ``executemany`` or PostgreSQL's ``COPY``):

- ``ranges``, a keyset source: ranges of ``--batch`` rows, each with its
  place in claim order (``range_seq``), found by a binary search;
- ``keys``, a sweep source: the same keys in ``sluice_keys``, in batches of
  ``--batch`` keys, each found by one probe of that table's primary key.

Then ``/record`` is served as the daemon serves it (:class:`RecordRoute` on the
endpoint of :mod:`scheduler.observe.http`) while another thread keeps
claiming ranges and keys of two other sources in the same ledger
(``--claims-per-s``), and ``--lookups`` random keys of each source are
asked over HTTP. Every answer is checked (the batch that holds the key).

Figures, in ms, against the 100 ms the issue sets: ``record_{ranges,keys}_
{median,p99}_ms_{sqlite,pg}``.

    python benchmarks/bench_record.py [--keys 10000000] [--batch 1000] [--lookups 200]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import pg_database, report  # noqa: E402
from config.loader import load_config_text  # noqa: E402
from scheduler.ledger import Ledger, fingerprint  # noqa: E402
from scheduler.ledger.schema import batches_table, keys_table, sources_table  # noqa: E402
from scheduler.observe.http import serve  # noqa: E402
from scheduler.observe.record import RecordRoute  # noqa: E402

PG_ADMIN = os.environ.get(
    "SLUICE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BASELINE_MS = 100.0
CHUNK = 100_000
CONFIG = """
ledger: "{ledger}"
sources:
  ranges: {{kind: sql, url: "sqlite:///source.db", table: t, key: id, target: lake.ranges}}
  keys: {{kind: sql, url: "sqlite:///source.db", table: t, key: id, mode: sweep,
          target: lake.keys}}
  feed: {{kind: sql, url: "sqlite:///source.db", table: t, key: id, target: lake.feed}}
  feedkeys: {{kind: sql, url: "sqlite:///source.db", table: t, key: id, mode: sweep,
              target: lake.feedkeys}}
targets:
  lake: {{kind: parquet, path: ./lake}}
"""
BATCH_COLUMNS = [c.name for c in batches_table.columns]


def batch_row(source: str, kind: str, number: int, lo: int, hi: int, **manifest: Any) -> tuple:
    """A done batch of keys ``(lo, hi]``, as the daemon's claim and finish leave it."""
    batch_id = uuid.uuid4().hex
    body = {"batch_id": batch_id, "source": source, "target": f"lake.{source}", "kind": kind,
            "items": hi - lo, "token": 1, "lo": [lo] if lo else None, "hi": [hi], "keys": [],
            "payloads": [], **manifest}  # fmt: skip
    if kind == "keys":
        body["lo"] = body["hi"] = None
    now = 1.7e9 + number
    values = {
        "id": batch_id, "source": source, "target": f"lake.{source}", "kind": kind,
        "state": "done", "version": 2, "token": 1, "attempts": 1, "items": hi - lo,
        "rows": hi - lo, "rejected": 0, "manifest": json.dumps(body, separators=(",", ":")),
        "error": None, "not_before": None, "owner": "bench:1:00000000", "lease_until": None,
        "created_at": now, "updated_at": now + 1,
        "range_seq": number if kind == "range" else None,
    }  # fmt: skip
    return tuple(values[c] for c in BATCH_COLUMNS)


def fill(engine: sa.Engine, keys: int, batch: int) -> None:
    """Batches covering ``keys`` keys of ``ranges`` and of ``keys``, and their marks."""

    def batches() -> Iterator[tuple]:
        for number, lo in enumerate(range(0, keys, batch), start=1):
            hi = min(lo + batch, keys)
            yield batch_row("ranges", "range", number, lo, hi)
            yield batch_row(
                "keys", "keys", number, lo, hi, keys=[[k] for k in range(lo + 1, hi + 1)]
            )

    def key_rows() -> Iterator[tuple]:
        for number, lo in enumerate(range(0, keys, batch), start=1):
            batch_id = f"k{number:09d}"  # replaced below by the batch's id
            for k in range(lo + 1, min(lo + batch, keys) + 1):
                yield ("keys", f"[{k}]", "", batch_id)

    ids: list[str] = []
    rows = (row for row in batches())

    def remember() -> Iterator[tuple]:
        for row in rows:
            if row[BATCH_COLUMNS.index("source")] == "keys":
                ids.append(row[0])
            yield row

    bulk(engine, batches_table.name, BATCH_COLUMNS, remember())
    bulk(
        engine,
        keys_table.name,
        ["source", "key", "version", "batch_id"],
        ((s, k, v, ids[int(b[1:]) - 1]) for s, k, v, b in key_rows()),
    )
    with engine.begin() as conn:
        conn.execute(
            sources_table.update()
            .where(sources_table.c.name == "ranges")
            .values(high_water=f"[{keys}]", version=-(-keys // batch))
        )


def bulk(engine: sa.Engine, table: str, columns: list[str], rows: Iterator[tuple]) -> None:
    """Insert ``rows`` fast: SQLite's executemany, PostgreSQL's COPY; a chunk per transaction."""
    if engine.dialect.name == "sqlite":
        database = engine.url.database or ""
        conn = sqlite3.connect(database)
        marks = ", ".join("?" * len(columns))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        while chunk := [row for _, row in zip(range(CHUNK), rows, strict=False)]:
            with conn:
                conn.executemany(sql, chunk)
        conn.close()
        return
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        raw.commit()
    finally:
        raw.close()


def keep_claiming(url: str, cfg: Any, stop: threading.Event, per_s: float) -> list[int]:
    """Claim ranges and keys of two other sources until ``stop``; the claims made."""
    ledger = Ledger(url)
    made = [0]
    after = ledger.sources.register("feed", fingerprint(cfg.sources["feed"]))
    ledger.sources.register("feedkeys", fingerprint(cfg.sources["feedkeys"]))

    def run() -> None:
        nonlocal after
        hi = 0
        while not stop.wait(1 / per_s):
            hi += 1000
            _, after = ledger.claim_range(uuid.uuid4().hex, "feed", "lake.feed", after, [hi],
                                          1000, begin=True)  # fmt: skip
            ledger.claim_keys(
                uuid.uuid4().hex,
                "feedkeys",
                "lake.feedkeys",
                [[k] for k in range(hi - 999, hi + 1)],
                begin=True,
            )
            made[0] += 2
        ledger.close()

    threading.Thread(target=run, name="claimer", daemon=True).start()
    return made


def measure(url: str, folder: Path, label: str, args: argparse.Namespace) -> None:
    cfg = load_config_text(CONFIG.format(ledger=url), str(folder / "bench.yaml"))
    source = sqlite3.connect(folder / "source.db")
    source.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY)")  # its key's type
    source.close()
    ledger = Ledger(url)  # the tables, at the current schema
    for name in ("ranges", "keys"):
        ledger.sources.register(name, fingerprint(cfg.sources[name]))
    ledger.close()
    started = time.perf_counter()
    engine = sa.create_engine(url)
    fill(engine, args.keys, args.batch)
    engine.dispose()
    print(
        f"{label}: {args.keys:,} keys filled in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    stop = threading.Event()
    claims = keep_claiming(url, cfg, stop, args.claims_per_s)
    route = RecordRoute(lambda: cfg)
    endpoint = serve(0, {"/record": route})
    pick = random.Random(7)
    try:
        for name in ("ranges", "keys"):
            ask(endpoint.port, name, 1, args.batch)  # the key's types and engines, read once
            took = [ask(endpoint.port, name, pick.randint(1, args.keys), args.batch)
                    for _ in range(args.lookups)]  # fmt: skip
            took.sort()
            p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
            settings = {"keys": args.keys, "batch": args.batch, "lookups": args.lookups,
                        "claims_meanwhile": claims[0]}  # fmt: skip
            report(
                f"record_{name}_median_ms_{label}",
                statistics.median(took),
                "ms",
                baseline=BASELINE_MS,
                settings=settings,
            )
            report(
                f"record_{name}_p99_ms_{label}", p99, "ms", baseline=BASELINE_MS, settings=settings
            )
    finally:
        stop.set()
        endpoint.stop()


def ask(port: int, source: str, key: int, batch: int) -> float:
    """One ``/record`` over HTTP, checked; its time in ms."""
    started = time.perf_counter()
    url = f"http://127.0.0.1:{port}/record?source={source}&key={key}"
    with urllib.request.urlopen(url, timeout=60) as response:
        answer = json.load(io.TextIOWrapper(response))
    took = (time.perf_counter() - started) * 1000
    held = answer["batch"]
    assert answer["seen"] and answer["key"] == [key] and held["state"] == "done", answer
    if held["kind"] == "range":  # the range that holds it; a key batch holds it by its key
        assert (held["lo"] or [0])[0] < key <= held["hi"][0] and held["items"] == batch, answer
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=1_000, help="keys per batch")
    parser.add_argument("--lookups", type=int, default=200)
    parser.add_argument("--claims-per-s", type=float, default=20.0)
    parser.add_argument("--only", choices=["sqlite", "pg"], default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.only != "pg":
            measure(f"sqlite:///{folder / 'ledger.db'}", folder, "sqlite", args)
        if args.only == "sqlite":
            return
        with pg_database(PG_ADMIN) as url:
            if url is not None:
                measure(url, folder, "pg", args)


if __name__ == "__main__":
    main()
