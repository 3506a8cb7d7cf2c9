"""The target takes over: after ``sluice cutover`` says READY, the application's first writes
on the target are answered as the source answered them.

Each test runs the commands a user runs (``sluice run --until-drained``, then
``sluice cutover``) as processes, then lets the application of
``tests/takeover_shop.py`` write to the source and to the target: inserts
without a key continue after the source's sequences, a duplicate, an orphan
and a check violation are refused by the server, defaults fill, updates are
stamped, deletes cascade. The target's catalogue is read with the server's
own functions (``pg_get_indexdef``, ``pg_get_constraintdef``,
``information_schema``, ``SHOW CREATE TABLE``) and compared with the source's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests import takeover_shop as shop
from tests.helpers import run_sql

pytestmark = pytest.mark.slow  # whole runs of the CLI

SLUICE = str(Path(sys.executable).with_name("sluice"))
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def _config(tmp_path: Path, source: str, target: str, extra: str = "") -> Path:
    pattern = "public.*" if source.startswith("postgresql") else "*"
    path = tmp_path / "sluice.yaml"
    path.write_text(f"""
ledger: sqlite:///ledger.db
sources:
  shop:
    kind: sql
    url: '{source}'
    tables: ["{pattern}"]
    order: foreign_keys
    target: wh{extra}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")
    return path


def _sluice(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SLUICE, *args, path.name], cwd=path.parent, env=ENV,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def _take_over(path: Path) -> str:
    """``sluice run --until-drained``, then ``sluice cutover``: the cutover's output."""
    ran = subprocess.run([SLUICE, "run", path.name, "--until-drained"], cwd=path.parent,
                         env=ENV, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
    cut = _sluice(path, "cutover")
    assert cut.returncode == 0, cut.stdout[-4000:] + cut.stderr[-3000:]
    assert "READY in" in cut.stdout
    return cut.stdout


def _pg_catalog(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every object of the shop's tables as PostgreSQL prints it (table names taken out)."""
    engine = sa.create_engine(url)
    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in ("customers", "orders"):
            rel = {"t": table}
            found[f"{table} indexes"] = sorted(
                (name, re.sub(r" ON \S+ ", " ON T ", d)) for name, d in conn.execute(sa.text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t"), rel))
            found[f"{table} constraints"] = sorted(conn.execute(sa.text(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = to_regclass(:t)"), rel).all())
            found[f"{table} columns"] = sorted(conn.execute(sa.text(
                "SELECT column_name, column_default, is_nullable, is_identity, "
                "identity_generation FROM information_schema.columns WHERE table_name = :t"),
                rel).all())
            found[f"{table} triggers"] = sorted(conn.execute(sa.text(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(:t) "
                "AND NOT tgisinternal"), rel).all())
            found[f"{table} comment"] = conn.execute(sa.text(
                "SELECT obj_description(to_regclass(:t), 'pg_class')"), rel).all()
    engine.dispose()
    return found


@pytest.mark.postgres
@pytest.mark.parametrize("made_by", ["sluice", "schema-only dump"])
def test_a_postgresql_target_answers_the_application_as_its_source(
    made_by: str, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = pg_factory.create("to_src"), pg_factory.create("to_dst")
    shop.create(source)
    if made_by == "schema-only dump":
        dump = subprocess.run(["pg_dump", "--schema-only", sa.make_url(source).set(
            drivername="postgresql").render_as_string(hide_password=False)],
            capture_output=True, text=True, check=True).stdout  # fmt: skip
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", sa.make_url(target).set(
            drivername="postgresql").render_as_string(hide_password=False)],
            input=dump, capture_output=True, text=True, check=True)  # fmt: skip
    said = _take_over(_config(tmp_path, source, target))
    assert "customers_id_seq: next value" in said  # the cutover set it, and says so
    assert _pg_catalog(target) == _pg_catalog(source)
    assert shop.application(target) == shop.application(source)


def _mariadb_tables(url: str) -> dict[str, str]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        shown = {t: conn.execute(sa.text(f"SHOW CREATE TABLE {t}")).one()[1]
                 for t in ("customers", "orders")}  # fmt: skip
    engine.dispose()
    # The counter is the source's where the cutover set it: compared by the application.
    return {t: re.sub(r" AUTO_INCREMENT=\d+", "", text) for t, text in shown.items()}


@pytest.mark.mariadb
def test_a_mariadb_target_is_its_source_as_show_create_table_prints_it(
    mariadb_factory: Any, tmp_path: Path
) -> None:
    source, target = mariadb_factory.create("to_src"), mariadb_factory.create("to_dst")
    shop.create(source)
    _take_over(_config(tmp_path, source, target))
    assert _mariadb_tables(target) == _mariadb_tables(source)
    assert shop.application(target) == shop.application(source)


@pytest.mark.mariadb
@pytest.mark.postgres
def test_a_postgresql_target_of_a_mariadb_source_answers_the_application_as_it(
    mariadb_factory: Any, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = mariadb_factory.create("tomp_src"), pg_factory.create("tomp_dst")
    shop.create(source)
    said = _take_over(_config(tmp_path, source, target))
    assert "customers_id_seq: next value" in said
    found = _pg_catalog(target)
    indexes = dict(found["orders indexes"])
    assert indexes["orders_orders_customer_placed_idx"].endswith(
        "USING btree (customer_id, placed_at DESC)")
    assert dict(found["customers indexes"])["customers_customers_email_key"].startswith(
        "CREATE UNIQUE INDEX")
    constraints = dict(found["orders constraints"])
    # InnoDB checks at once (its NO ACTION is RESTRICT): so does PostgreSQL's RESTRICT.
    assert constraints["orders_customer_fk"] == (
        "FOREIGN KEY (customer_id) REFERENCES customers(id) ON UPDATE RESTRICT ON DELETE CASCADE")
    assert constraints["orders_amount_check"] == "CHECK ((amount >= (0)::numeric))"
    assert dict(found["customers constraints"])["customers_email_check"] == (
        "CHECK ((char_length((email)::text) >= 5))")
    columns = {c[0]: c[1:] for c in found["customers columns"]}
    assert columns["id"][2:] == ("YES", "BY DEFAULT")  # AUTO_INCREMENT: an identity
    assert columns["status"][0] == "'new'::character varying"
    assert found["orders triggers"] == [("orders_changed_at_on_update",)]
    assert found["orders comment"] == [("what customers bought",)]
    assert shop.application(target) == shop.application(source)


@pytest.mark.mariadb
@pytest.mark.postgres
def test_an_object_without_a_translation_stops_the_run_until_the_config_says(
    mariadb_factory: Any, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = mariadb_factory.create("tonot_src"), pg_factory.create("tonot_dst")
    shop.create(source)
    run_sql(source, "ALTER TABLE customers ADD FULLTEXT INDEX customers_name_text (name)")
    path = _config(tmp_path, source, target)
    planned = _sluice(path, "plan")
    assert planned.returncode == 1
    assert re.search(r"index customers_name_text +FULLTEXT KEY `customers_name_text` \(`name`\): "
                     r"ERROR: a FULLTEXT index has no PostgreSQL index", planned.stdout)
    assert re.search(r"foreign key orders_customer_fk +CONSTRAINT .* once both tables' first "
                     "passes are done", planned.stdout)
    refused = _sluice(path, "run")
    assert refused.returncode == 2
    assert "shop.customers: index customers_name_text: a FULLTEXT index" in refused.stderr
    assert "schema: {skip: [NAME]}" in refused.stderr
    with sa.create_engine(target).connect() as conn:
        assert not sa.inspect(conn).get_table_names()  # nothing made, nothing moved
    path = _config(tmp_path, source, target, "\n    schema: {skip: [customers_name_text]}")
    said = _take_over(path)
    assert "shop.customers: index customers_name_text skipped (schema: skip: " in said


@pytest.mark.postgres
def test_the_cutover_names_what_an_operators_table_lacks(pg_factory: Any, tmp_path: Path) -> None:
    source, target = pg_factory.create("tolack_src"), pg_factory.create("tolack_dst")
    shop.create(source)
    shop.create(target, rows=False)
    run_sql(target, "DROP INDEX orders_open_idx", "ALTER TABLE customers DROP CONSTRAINT "
            "customers_email_check")  # fmt: skip
    path = _config(tmp_path, source, target)
    ran = _sluice(path, "run", "--until-drained")
    assert ran.returncode == 0, ran.stderr[-3000:]
    cut = _sluice(path, "cutover")
    assert cut.returncode == 1
    assert "NOT READY" in cut.stdout
    assert re.search(r"problem: shop.customers: the target table \(the operator's\) lacks "
                     r"check customers_email_check \(CHECK \(\(char_length\(email\) >= 5\)\)\)",
                     cut.stdout)  # fmt: skip
    assert "lacks index orders_open_idx (CREATE INDEX orders_open_idx ON public.orders " in (
        cut.stdout)
    with sa.create_engine(target).connect() as conn:  # sluice made nothing in it
        assert conn.execute(sa.text("SELECT count(*) FROM pg_indexes "
                                    "WHERE indexname = 'orders_open_idx'")).scalar() == 0


@pytest.mark.postgres
def test_a_child_whose_parent_comes_later_is_retried_not_rejected(
    pg_factory: Any, tmp_path: Path
) -> None:
    """A table's later passes are not ordered by its foreign keys: a child row may reach an
    enforced key before its parent does; its batch waits and tries again."""
    source, target = pg_factory.create("tofk_src"), pg_factory.create("tofk_dst")
    shop.create(source)
    shop.create(target, rows=False)
    path = tmp_path / "sluice.yaml"
    # The orders before the customers they refer to: no order: foreign_keys, and each of
    # the customers' key queries takes a second.
    path.write_text(f"""
ledger: sqlite:///ledger.db
sources:
  customers:
    kind: sql
    url: '{source}'
    table: customers
    key: id
    where: (SELECT pg_sleep(1)) IS NOT NULL
    target: wh.customers
  orders: {{kind: sql, url: '{source}', table: orders, key: id, target: wh.orders}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
retry: {{max_attempts: 30, backoff: 200ms, max_backoff: 1s}}
""")
    ran = _sluice(path, "run", "--until-drained")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    failed = int(re.search(r"failed attempts (\d+)", ran.stdout).group(1))  # type: ignore[union-attr]
    assert failed >= 1, ran.stdout  # the orders came first, and waited
    assert "rejected rows 0" in ran.stdout
    with sa.create_engine(target).connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM orders")).scalar() == shop.ORDERS - 4


@pytest.mark.postgres
def test_a_row_refused_for_another_rows_sake_is_retried_and_its_own_fault_rejected(
    pg_factory: Any,
) -> None:
    """A missing parent or a unique value another row holds: the other row's batch may still
    be importing, so the batch is retried. A value the row itself gets wrong is rejected."""
    from config.errors import is_transient, write_is_transient
    from spark_jobs.load.rejects_jdbc import is_row_error

    url = pg_factory.create("toerr")
    run_sql(url, "CREATE TABLE p (id int PRIMARY KEY)",
            "CREATE TABLE c (id int PRIMARY KEY, p int REFERENCES p, u int UNIQUE CHECK (u > 0))",
            "INSERT INTO p VALUES (1)", "INSERT INTO c VALUES (1, 1, 1)")  # fmt: skip
    engine = sa.create_engine(url)
    found = {}
    for name, sql in (("orphan", "INSERT INTO c VALUES (2, 9, 2)"),
                      ("unique", "INSERT INTO c VALUES (3, 1, 1)"),
                      ("check", "INSERT INTO c VALUES (4, 1, -1)")):  # fmt: skip
        with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as conn:
            conn.execute(sa.text(sql))
        found[name] = (write_is_transient(raised.value), is_row_error(raised.value),
                       is_transient(raised.value))
    engine.dispose()
    # A write waits for the other row; the ledger (is_transient) never waits out its own
    # unique keys: they are how two daemons learn that they raced.
    assert found == {"orphan": (True, False, False), "unique": (True, False, False),
                     "check": (False, True, False)}
