"""A daemon killed during a repair, in ``make test``'s short form (``make chaos`` runs the
long one over the whole chaos world: tests/test_exactly_once.py, ``-k repair``).

Rows deleted and changed in the target behind sluice's back are found by ``sluice verify
--repair``, which queues repair batches; a daemon dies (``kill -9`` of its process group)
right after a repair batch's target commit, before the ledger knows; the next run ends
the repair. The target must then equal the source, row for row, by the databases' own
texts, and verify must say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.chaos.procs import Proc, base_env
from tests.helpers import drain, write_config

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.timeout(300)]

ROWS = 2_000


def _texts(url: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql("SET TimeZone = 'UTC'")
        rows = conn.exec_driver_sql(
            "SELECT id::text, amount::text, at::text, note FROM orders ORDER BY id").all()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_a_daemon_killed_during_a_repair_leaves_the_target_equal(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    from scheduler.verify_tables import verify_config
    from tests.chaos.procs import SLUICE

    source, target = pg_factory.create("repair_src"), pg_factory.create("repair_dst")
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(12, 2), "
            "at timestamptz, note text)")  # fmt: skip
        conn.exec_driver_sql(
            "INSERT INTO orders SELECT i * 3, i / 4.0, timestamptz '2024-01-01 00:00:00+00' "
            f"+ i * interval '1.000001 second', 'n' || i FROM generate_series(1, {ROWS}) i")
    engine.dispose()
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  orders: {{kind: sql, url: '{source}', table: orders, key: id, target: wh.orders}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 250, max_wait: 100ms}}
""")  # fmt: skip
    assert drain(cfg, path, spark).exit_code == 0
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM orders WHERE id %% 7 = 0")
        conn.exec_driver_sql(
            "UPDATE orders SET amount = amount + 0.01, note = 'tampered ✗' WHERE id %% 11 = 0")
    engine.dispose()
    [found] = verify_config(spark, cfg, repair=True).tables
    assert found.missing > 0 and found.different > 0 and found.repair_batches >= 2, found

    # kill -9 of the daemon's group right after a repair batch's target commit.
    crashed = Proc([SLUICE, "run", str(path), "--until-drained"],
                   base_env(SLUICE_FAULT="after_target_commit:1"), tmp_path / "crash.log")
    assert crashed.wait(240) == -9, crashed.tail()
    crashed.wait_group_gone()
    assert "SLUICE_FAULT: crashing at after_target_commit" in crashed.output()

    assert drain(cfg, path, spark).exit_code == 0  # the next run ends the repair
    assert _texts(target) == _texts(source)
    [after] = verify_config(spark, cfg).tables
    assert after.equal and after.checked == ROWS, after
