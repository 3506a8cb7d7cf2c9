"""A column that cannot go into its target is found before any batch runs, and a batch
that meets one anyway dies at its first attempt, naming the table, the column and both
types: no retry can change a column's type (a retry with backoff took minutes to say so)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from scheduler.cli import app
from tests.helpers import drain, write_config

SLUICE = str(Path(sys.executable).parent / "sluice")


def _execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def _plan(path: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``sluice plan`` of the config at ``path``, and its lines with spaces collapsed."""
    plan = subprocess.run([SLUICE, "plan", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    return plan, [" ".join(line.split()) for line in plan.stdout.splitlines()]


@pytest.mark.spark
@pytest.mark.postgres
def test_a_type_mismatch_is_a_plan_error_and_kills_the_first_batch_at_once(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("fit_src"), pg_factory.create("fit_dst")
    _execute(source,
             "CREATE TABLE events (id uuid PRIMARY KEY, at timestamptz, note text)",
             "INSERT INTO events SELECT gen_random_uuid(), now(), 'n' || i "
             "FROM generate_series(1, 50) AS i")  # fmt: skip
    # The operator's table: "at" is an integer, which no timestamp is.
    _execute(target, "CREATE TABLE events (id uuid PRIMARY KEY, at integer, note text)")
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  events: {{kind: sql, url: '{source}', table: events, key: id, target: wh.events}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip

    plan, lines = _plan(path)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert "at timestamp with time zone: ERROR: integer in the target table, and no timestamp " \
        "with time zone value is one; change the table's column, or convert the values with " \
        "columns:" in lines, plan.stdout
    assert "id uuid -> uuid" in lines and "note text -> text" in lines

    # Retries as configured by default (5 attempts, 10 s apart): one attempt is made.
    summary = drain(cfg, path, spark, timeout=120)
    assert summary.exit_code == 1 and summary.stats.batches_dead == 1, summary
    assert summary.stats.batches_failed == 0, summary
    engine = sa.create_engine(cfg.ledger)
    with engine.connect() as conn:
        [(attempts, error)] = conn.execute(
            sa.text("SELECT attempts, error FROM sluice_batches")).all()  # fmt: skip
    engine.dispose()
    assert attempts == 1
    assert "wh.events: column 'at' is integer in the table but timestamp with time zone in " \
        "the source" in error, error


@pytest.mark.spark
@pytest.mark.postgres
def test_a_uuid_keyed_table_migrates_and_plans_its_types(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("uuid_src"), pg_factory.create("uuid_dst")
    _execute(source,
             "CREATE TABLE events (id uuid PRIMARY KEY, at timestamptz, tags text[])",
             "INSERT INTO events SELECT gen_random_uuid(), now() - i * interval '1 hour', "
             "ARRAY['a' || i, NULL] FROM generate_series(1, 2000) AS i")  # fmt: skip
    path, cfg = write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  events: {{kind: sql, url: '{source}', table: events, key: id, target: wh.events}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
batch: {{max_items: 300, max_wait: 100ms}}
""")  # fmt: skip
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0 and summary.stats.batches_done >= 6, summary
    query = "SELECT id::text, at::text, tags::text FROM events ORDER BY id"
    rows = []
    for url in (source, target):
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SET TimeZone = 'UTC'")
            rows.append(conn.exec_driver_sql(query).all())
        engine.dispose()
    assert len(rows[0]) == 2000 and rows[0] == rows[1]


@pytest.mark.spark
@pytest.mark.postgres
def test_a_cast_override_gives_a_created_column_its_type_and_a_wrong_one_is_refused(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source = pg_factory.create("cast_src")
    _execute(source,
             "CREATE TABLE items (id bigint PRIMARY KEY, amount numeric(12,2), at timestamptz)",
             "INSERT INTO items SELECT i, i / 4.0, now() FROM generate_series(1, 40) AS i")
    for bad, target in ((False, pg_factory.create("cast_ok")),
                        (True, pg_factory.create("cast_bad"))):  # fmt: skip
        cast = "{amount: 'numeric(20,4)', at: uuid}" if bad else "{amount: 'numeric(20,4)'}"
        folder = tmp_path / ("bad" if bad else "ok")
        folder.mkdir()
        path, cfg = write_config(folder, f"""
ledger: sqlite:///{folder}/ledger.db
sources:
  items: {{kind: sql, url: '{source}', table: items, key: id, target: wh.items,
          cast: {cast}}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
        plan, lines = _plan(path)
        assert "amount numeric(12,2) -> numeric(20,4) (cast: (the config's type))" in lines, \
            plan.stdout
        summary = drain(cfg, path, spark, timeout=120)
        if bad:
            assert plan.returncode == 1 and "at timestamp with time zone: ERROR: cast: uuid " \
                "cannot hold the source's timestamp with time zone values" in lines, plan.stdout
            assert summary.stats.batches_dead == 1 and summary.stats.batches_failed == 0
            continue
        assert plan.returncode == 0, plan.stdout
        assert summary.exit_code == 0, summary
        engine = sa.create_engine(target)
        with engine.connect() as conn:
            shown = conn.exec_driver_sql(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'items'::regclass AND attname = 'amount'").scalar_one()
            total = conn.exec_driver_sql("SELECT sum(amount)::text FROM items").scalar_one()
        engine.dispose()
        assert (shown, total) == ("numeric(20,4)", "205.0000")


@pytest.mark.spark
@pytest.mark.mariadb
@pytest.mark.postgres
def test_zero_dates_become_null_counted_or_rejects_naming_the_column(
    tmp_path: Path, mariadb_factory: Any, pg_factory: Any, spark: Any
) -> None:
    legacy = mariadb_factory.create("zero_src")
    engine = sa.create_engine(legacy)
    with engine.begin() as conn:
        conn.exec_driver_sql("SET sql_mode = ''")
        conn.exec_driver_sql("CREATE TABLE t (id int PRIMARY KEY, d date, at datetime)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1, '2024-02-29', '2024-01-01 10:00:00'), "
                             "(2, '0000-00-00', '2024-01-01 10:00:00'), "
                             "(3, '2024-00-15', '0000-00-00 00:00:00'), (4, NULL, NULL)")
    engine.dispose()
    for mode in ("null", "reject"):  # null: the default
        target = pg_factory.create(f"zero_{mode}")
        folder = tmp_path / mode
        folder.mkdir()
        path, cfg = write_config(folder, f"""
ledger: sqlite:///{folder}/ledger.db
sources:
  t: {{kind: sql, url: '{legacy}', table: t, key: id, target: wh.t, zero_dates: {mode}}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
        summary = drain(cfg, path, spark)
        engine = sa.create_engine(target)
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT id, d::text, at::text FROM t ORDER BY id").all()
            rejects = conn.exec_driver_sql(
                "SELECT key, reason FROM _sluice_rejects ORDER BY key").all()
        engine.dispose()
        if mode == "null":
            assert summary.exit_code == 0 and summary.stats.zero_dates == {"t.d": 2, "t.at": 1}
            shown = CliRunner().invoke(app, ["status", str(path)])  # after the run, per column
            assert "zero dates made NULL" in shown.output, shown.output
            assert "t.at: 1" in shown.output and "t.d: 2" in shown.output, shown.output
            assert [tuple(r) for r in rows] == [(1, "2024-02-29", "2024-01-01 10:00:00"),
                                                (2, None, "2024-01-01 10:00:00"),
                                                (3, None, None), (4, None, None)]  # fmt: skip
        else:
            assert summary.exit_code == 1 and summary.stats.rows_rejected == 2, summary
            assert [r[0] for r in rows] == [1, 4]
            assert [k for k, _ in rejects] == ["[2]", "[3]"]
            assert "column 'd' holds the zero date 0000-00-00" in rejects[0][1], rejects


@pytest.mark.spark
@pytest.mark.mariadb
@pytest.mark.postgres
def test_cast_enum_creates_a_postgresql_enum_type_of_a_mysql_enum_columns_labels(
    tmp_path: Path, mariadb_factory: Any, pg_factory: Any, spark: Any
) -> None:
    legacy = mariadb_factory.create("enum_src")
    engine = sa.create_engine(legacy)
    with engine.begin() as conn:
        # Labels not in alphabetical order, one with a quote: the type keeps them as declared.
        conn.exec_driver_sql("CREATE TABLE orders (id int PRIMARY KEY, "
                             "status enum('paid','new','it''s void'), note varchar(10))")
        conn.exec_driver_sql("INSERT INTO orders VALUES (1, 'paid', 'a'), (2, 'new', 'b'), "
                             "(3, 'it''s void', 'c'), (4, NULL, 'd')")
    engine.dispose()
    for bad in (False, True):
        target = pg_factory.create(f"enum_{'bad' if bad else 'ok'}")
        folder = tmp_path / ("bad" if bad else "ok")
        folder.mkdir()
        cast = "{status: enum, note: enum}" if bad else "{status: enum}"
        path, cfg = write_config(folder, f"""
ledger: sqlite:///{folder}/ledger.db
sources:
  orders: {{kind: sql, url: '{legacy}', table: orders, key: id, target: wh.orders,
           cast: {cast}}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")  # fmt: skip
        plan, lines = _plan(path)
        assert ("status enum('paid','new','it''s void') -> enum (paid, new, it's void) "
                "(cast: an enum type of the source's labels, created)") in lines, plan.stdout
        summary = drain(cfg, path, spark, timeout=120)
        if bad:
            assert plan.returncode == 1 and "note varchar(10): ERROR: cast: enum creates a " \
                "PostgreSQL enum type of an enum column's labels; varchar(10) into " \
                "postgresql is not one" in lines, plan.stdout
            assert summary.stats.batches_dead == 1 and summary.stats.batches_failed == 0
            continue
        assert plan.returncode == 0 and summary.exit_code == 0, (plan.stdout, summary)
        engine = sa.create_engine(target)
        with engine.connect() as conn:
            labels = conn.exec_driver_sql(
                "SELECT enum_range(NULL::orders_status)::text").scalar_one()
            rows = conn.exec_driver_sql(
                "SELECT id, status::text, pg_typeof(status)::text FROM orders ORDER BY id").all()
        engine.dispose()
        assert labels == "{paid,new,\"it's void\"}"
        assert [tuple(r) for r in rows] == [(1, "paid", "orders_status"),
                                            (2, "new", "orders_status"),
                                            (3, "it's void", "orders_status"),
                                            (4, None, "orders_status")]  # fmt: skip
