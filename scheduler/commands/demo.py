"""``sluice demo``: a whole migration on embedded defaults, nothing to set up.

Two SQLite source databases are generated (``shop.db`` with orders,
``crm.db`` with customers), a SQLite ledger and a Parquet target live next to
them, and Spark runs locally. The config the demo runs is written out as
``demo.yaml`` so it can be read, edited and re-run with ``sluice run``.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

DEMO_YAML = """\
# Written by `sluice demo`. Re-run it with: sluice run {path} --until-drained
ledger: sqlite:///ledger.db
work_dir: ./work
spark:
  master: local[2]
  conf: {{spark.sql.shuffle.partitions: "2"}}
sources:
  orders:
    kind: sql
    url: sqlite:///shop.db
    table: orders
    key: id
    buffer: {{capacity: 40000, replenish_below: 20000}}
    read: {{num_partitions: 2, fetchsize: 10000}}
    target: lake.orders
  customers:
    kind: sql
    url: sqlite:///crm.db
    table: customers
    key: id
    buffer: {{capacity: 40000, replenish_below: 20000}}
    target: lake.customers
targets:
  lake:
    kind: parquet
    path: ./lake
strategy:
  fair: {{orders: 2, customers: 1}}
batch: {{max_items: 20000, max_wait: 1s}}
backpressure: {{max_pending: 60000, resume_below: 30000, max_importing_batches: 3}}
"""

STATUSES = ["new", "paid", "shipped", "delivered", "returned"]


@dataclass(frozen=True)
class DemoSetup:
    """Where the demo's files are and how many rows each source holds."""

    folder: Path
    config: Path
    rows: dict[str, int]


def prepare(folder: Path, rows: int, seed: int = 7) -> DemoSetup:
    """Generate the source databases and the config under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in ("shop.db", "crm.db", "ledger.db", "ledger.db-wal", "ledger.db-shm"):
        (folder / stale).unlink(missing_ok=True)
    orders = rows * 2 // 3
    customers = rows - orders
    rng = random.Random(seed)
    start = datetime(2024, 1, 1)
    with sqlite3.connect(folder / "shop.db") as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, "
            "amount REAL NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL)"
        )
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            (
                (
                    i, rng.randint(1, max(customers, 1)), round(rng.uniform(1, 500), 2),
                    rng.choice(STATUSES),
                    (start + timedelta(minutes=i)).isoformat(sep=" "),
                )
                for i in range(1, orders + 1)
            ),
        )
    with sqlite3.connect(folder / "crm.db") as db:
        db.execute(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "email TEXT NOT NULL, active INTEGER NOT NULL, signed_up TEXT NOT NULL)"
        )
        db.executemany(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
            (
                (
                    i, f"Customer {i}", f"customer{i}@example.com", int(rng.random() < 0.8),
                    (start + timedelta(hours=i)).date().isoformat(),
                )
                for i in range(1, customers + 1)
            ),
        )
    config = folder / "demo.yaml"
    config.write_text(DEMO_YAML.format(path=config))
    return DemoSetup(folder, config, {"orders": orders, "customers": customers})
