"""Make the kept ledgers of one half-finished migration (``tests/test_ledger_upgrade.py``).

Run once, at the commit named in this folder's README, with the sluice of that
commit: ``.venv/bin/python tests/data/ledger_v0/make_fixture.py``. It migrates
two sources (``orders`` by keyset ranges, ``customers`` by sweep, so that both
range and key-list batches are in the ledger) and makes the daemon die as
``kill -9`` would right after its sixth target commit (``SLUICE_FAULT``): some
batches are done, one is committed in the target but not in the ledger, others
are claimed. Then it keeps the result:

- ``sqlite/``: the SQLite ledger, source and target files (checkpointed, no
  WAL beside them). Their paths are in the ledger (a source's fingerprint
  holds its URL), so they are replayed at ``/tmp/sluice-ledger-v0/``.
- ``postgres/``: ``pg_dump --inserts`` of the ledger, source and target
  databases ``sluice_v0_ledger``, ``sluice_v0_shop``, ``sluice_v0_warehouse``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parents[2]))

from tests.helpers import seed_orders  # noqa: E402

SQLITE_HOME = Path("/tmp/sluice-ledger-v0")
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1/postgres"
PG_DATABASES = ("ledger", "shop", "warehouse")
ORDERS, CUSTOMERS = 300, 200

CONFIG = """\
ledger: {ledger}
sources:
  orders:
    kind: sql
    url: {shop}
    table: orders
    key: id
    mode: keyset
    buffer: {{capacity: 120, replenish_below: 40}}
    target: warehouse.orders
  customers:
    kind: sql
    url: {shop}
    table: customers
    key: id
    mode: sweep
    buffer: {{capacity: 120, replenish_below: 40}}
    target: warehouse.customers
targets:
  warehouse:
    kind: jdbc
    url: {warehouse}
strategy:
  fair: {{orders: 1, customers: 1}}
batch: {{max_items: 30, max_wait: 200ms}}
backpressure: {{max_pending: 90, resume_below: 30, max_importing_batches: 1}}
spark:
  master: "local[1]"
  max_concurrent_imports: 1
  conf: {{spark.driver.host: 127.0.0.1, spark.driver.bindAddress: 127.0.0.1}}
"""


def config_text(kind: str) -> str:
    """The config of the kept migration of ``kind`` (``sqlite`` or ``postgres``)."""
    if kind == "sqlite":
        urls = {name: f"sqlite:///{SQLITE_HOME / name}.db" for name in PG_DATABASES}
    else:
        urls = {name: f"postgresql+psycopg://postgres@127.0.0.1/sluice_v0_{name}"
                for name in PG_DATABASES}  # fmt: skip
    return CONFIG.format(**urls)


def seed(shop: str) -> None:
    """The two source tables."""
    seed_orders(shop, ORDERS)
    seed_orders(shop, CUSTOMERS, table="customers")


def run_until_crash(folder: Path, kind: str) -> None:
    """``sluice run`` that dies after its sixth target commit."""
    config = folder / "sluice.yaml"
    config.write_text(config_text(kind))
    env = dict(os.environ, SLUICE_FAULT="after_target_commit:6", SPARK_LOCAL_IP="127.0.0.1")
    sluice = Path(sys.executable).with_name("sluice")
    done = subprocess.run([str(sluice), "run", str(config), "--until-drained"], env=env,
                          start_new_session=True, capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, (done.returncode, done.stderr[-3000:])


def make_sqlite() -> None:
    shutil.rmtree(SQLITE_HOME, ignore_errors=True)
    SQLITE_HOME.mkdir(parents=True)
    seed(f"sqlite:///{SQLITE_HOME / 'shop'}.db")
    run_until_crash(SQLITE_HOME, "sqlite")
    out = ROOT / "sqlite"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name in PG_DATABASES:
        path = SQLITE_HOME / f"{name}.db"
        with sqlite3.connect(path) as conn:  # fold the WAL in: one file per database
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        shutil.copy(path, out / path.name)


def make_postgres() -> None:
    admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for name in PG_DATABASES:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS sluice_v0_{name} WITH (FORCE)"))
            conn.execute(sa.text(f"CREATE DATABASE sluice_v0_{name}"))
    seed("postgresql+psycopg://postgres@127.0.0.1/sluice_v0_shop")
    work = Path("/tmp/sluice-ledger-v0-pg")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    run_until_crash(work, "postgres")
    out = ROOT / "postgres"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name in PG_DATABASES:
        dump = subprocess.run(
            ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--inserts", "--no-owner",
             "--no-privileges", f"sluice_v0_{name}"],
            check=True, capture_output=True, text=True,
        )
        (out / f"{name}.sql").write_text(dump.stdout)
    with admin.connect() as conn:
        for name in PG_DATABASES:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS sluice_v0_{name} WITH (FORCE)"))
    admin.dispose()


if __name__ == "__main__":
    started = time.monotonic()
    make_sqlite()
    make_postgres()
    print(f"kept under {ROOT} in {time.monotonic() - started:.0f} s")
