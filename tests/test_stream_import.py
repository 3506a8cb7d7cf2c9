"""The table a stream source's batches go into: created from the source's columns, its
generated columns generated again (a change stream does not carry them), or refused where
they would never be filled.

Real databases; the values are read back as PostgreSQL prints them.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import TargetError
from config.models import JdbcTargetConfig
from spark_jobs.changes.apply_changes import apply_changes
from spark_jobs.changes.change_batches import StreamEvent
from spark_jobs.changes.stream_import import ensure_table
from spark_jobs.common.manifest import Manifest
from spark_jobs.load.target import TargetTable
from tests.helpers import run_sql


def _target(url: str) -> TargetTable:
    return TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=url), None, "items", ("id",))


@pytest.mark.postgres
def test_a_generated_column_from_postgresql_is_generated_again_and_computed(
    pg_factory: Any,
) -> None:
    source, target = pg_factory.create("gen_src"), pg_factory.create("gen_dst")
    run_sql(source, "CREATE TABLE items (id int PRIMARY KEY, price numeric(8,2), qty int, "
                 "total numeric GENERATED ALWAYS AS (price * qty) STORED)")  # fmt: skip
    into = sa.create_engine(target)
    ensure_table(sa.create_engine(source), "items", into, _target(target))
    # The stream's change carries the stored columns only, as pgoutput sends them.
    event = StreamEvent("insert", ("1",), None, {"id": "1", "price": "2.50", "qty": "4"})
    apply_changes(into, _target(target), Manifest("b1", "shop", "wh.items", "changes", 1, 1,
                                                  None, [10, 1], payloads=[event.to_json()]))
    with into.connect() as conn:
        row = conn.execute(sa.text("SELECT id, price::text, qty, total::text FROM items")).one()
        generated = conn.scalar(sa.text(
            "SELECT attgenerated FROM pg_attribute WHERE attrelid = 'items'::regclass "
            "AND attname = 'total'"))  # fmt: skip
    assert tuple(row) == (1, "2.50", 4, "10.00") and generated == "s"
    into.dispose()


@pytest.mark.postgres
@pytest.mark.mariadb
def test_a_generated_column_postgresql_cannot_compute_is_refused_by_name(
    mariadb_factory: Any, pg_factory: Any,
) -> None:
    source, target = mariadb_factory.create("gen_msrc"), pg_factory.create("gen_mdst")
    run_sql(source, "CREATE TABLE items (id int PRIMARY KEY, qty int, "
                 "twice int AS (qty * 2) PERSISTENT)")  # fmt: skip
    into = sa.create_engine(target)
    with pytest.raises(TargetError, match=r"'twice' of items are generated in the source"):
        ensure_table(sa.create_engine(source), "items", into, _target(target))
    assert not sa.inspect(into).has_table("items")
    # Created by the operator without it: the stream fills the rest.
    run_sql(target, "CREATE TABLE items (id int PRIMARY KEY, qty int)")
    ensure_table(sa.create_engine(source), "items", into, _target(target))
    into.dispose()


@pytest.mark.postgres
def test_a_target_that_holds_a_generated_column_as_a_plain_one_is_refused(
    pg_factory: Any,
) -> None:
    source, target = pg_factory.create("gen_psrc"), pg_factory.create("gen_pdst")
    run_sql(source, "CREATE TABLE items (id int PRIMARY KEY, qty int, "
                 "twice int GENERATED ALWAYS AS (qty * 2) STORED)")  # fmt: skip
    run_sql(target, "CREATE TABLE items (id int PRIMARY KEY, qty int, twice int)")
    into = sa.create_engine(target)
    with pytest.raises(TargetError, match=r"'twice' are generated in the source.*never be filled"):
        ensure_table(sa.create_engine(source), "items", into, _target(target))
    into.dispose()


@pytest.mark.postgres
def test_a_generated_column_of_a_type_the_source_defines_gets_its_type_made_too(
    pg_factory: Any,
) -> None:
    source, target = pg_factory.create("gen_dsrc"), pg_factory.create("gen_ddst")
    run_sql(source, "CREATE DOMAIN pos AS integer CHECK (VALUE > 0)",
         "CREATE TABLE items (id int PRIMARY KEY, x int, "
         "d pos GENERATED ALWAYS AS (x * 2) STORED)")  # fmt: skip
    into = sa.create_engine(target)
    ensure_table(sa.create_engine(source), "items", into, _target(target))
    with into.connect() as conn:
        shown = conn.scalar(sa.text("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                                    "WHERE attrelid = 'items'::regclass AND attname = 'd'"))
    assert shown == "pos"
    into.dispose()
