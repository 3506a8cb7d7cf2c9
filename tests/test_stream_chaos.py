"""A live table followed by ``mode: stream`` through kill -9s and hot-hot daemons (make chaos).

On PostgreSQL and on MariaDB, a writer inserts, updates (a version that only
grows), deletes and re-inserts rows, hot keys many times, from before the
first daemon starts until the cutover. Meanwhile: a daemon is killed with
``kill -9`` twice (during the full load and after it), then two daemons run
hot-hot on a PostgreSQL ledger and one of them is killed. Then the writes stop
and ``sluice cutover`` runs beside the surviving daemon. At the end the target
equals the source row by row (deleted rows gone), no row's version ever went
back in the target (a trigger logs each version it takes), and nothing sluice
made is left on the source. ``CHAOS_SEED`` replays the kill moments.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.chaos.procs import SLUICE, Proc, base_env, sluice
from tests.conftest import need, spark_missing_reason
from tests.helpers import stream_leftovers
from tests.test_stream_source import (
    Writer,
    _rows,
    _watch_versions,
    make_source,
    versions_only_grow,
)

LONG = os.environ.get("CHAOS") == "long"
SEED = int(os.environ.get("CHAOS_SEED", "6"))
ROWS, PAGE = (20_000, 500) if LONG else (2_000, 100)

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.chaos_only,
              pytest.mark.timeout(1800 if LONG else 600)]  # fmt: skip


def _config(source: str, target: str, ledger: str) -> str:
    return f"""
ledger: '{ledger}'
sources:
  items:
    kind: sql
    url: '{source}'
    table: items
    key: id
    mode: stream
    page_size: {PAGE}
    target: wh.items
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 300, max_wait: 100ms}}
lease: {{ttl: 20s}}
"""


def _held_position(target: str) -> Any:
    engine = sa.create_engine(target)
    try:
        with engine.connect() as conn:
            return conn.scalar(sa.text("SELECT position FROM _sluice_streams"))
    except sa.exc.ProgrammingError:
        return None
    finally:
        engine.dispose()


@pytest.mark.parametrize("engine_name", ["postgresql", "mysql"])
def test_a_live_table_streamed_through_kills_and_hot_hot_daemons_ends_equal(
    tmp_path: Path, engine_name: str, pg_factory: Any, request: pytest.FixtureRequest
) -> None:
    need(spark_missing_reason() is None, spark_missing_reason() or "")
    rng = random.Random(f"{SEED}:stream:{engine_name}")
    servers = request.getfixturevalue("logical_pg" if engine_name == "postgresql"
                                      else "binlog_mariadb")  # fmt: skip
    source, target = servers.create("chaos_src"), pg_factory.create("chaos_dst")
    ledger = pg_factory.create("chaos_ledger")
    make_source(source, ROWS)
    _watch_versions(target, engine_name)
    config = tmp_path / "sluice.yaml"
    config.write_text(_config(source, target, ledger))
    env = base_env()
    procs: list[Proc] = []

    def start(label: str) -> Proc:
        proc = Proc([SLUICE, "run", str(config)], env, tmp_path / f"{label}.log")
        procs.append(proc)
        return proc

    writer = Writer(source)
    writer.thread.start()
    try:
        for kill in (1, 2):  # one during the full load, one after it (long), or both early
            proc = start(f"kill-{kill}")
            moment = rng.uniform(3.0, 10.0) if kill == 1 else rng.uniform(8.0, 20.0)
            assert proc.wait(moment) is None, proc.tail()
            proc.kill()
        first, second = start("hot-1"), start("hot-2")
        assert second.wait(rng.uniform(8.0, 15.0)) is None, second.tail()
        second.kill()
        assert first.wait(rng.uniform(3.0, 8.0)) is None, first.tail()
    finally:
        writer.stop.set()
        writer.thread.join()
    for _ in range(50):  # the last writes, after the application stopped
        writer.once()
    try:
        done = sluice("cutover", str(config), "--wait", "5m", env=env, timeout=600)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{first.tail()}"
        assert "READY in " in done.stdout
        assert first.wait(60) == 0, first.tail()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    got, want = _rows(target), _rows(source)
    assert {k: got.get(k) for k in want if got.get(k) != want[k]} == {}
    assert set(got) == set(want)
    versions_only_grow(target)
    if engine_name == "postgresql":
        assert stream_leftovers(source) == []
    else:
        engine = sa.create_engine(source)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW TABLES LIKE 'sluice_watermarks'")).all() == []
        engine.dispose()
    print(f"stream chaos: {len(want)} rows, writer at version {writer.version}, "
          f"target at {_held_position(target)}, {time.monotonic():.0f}")
