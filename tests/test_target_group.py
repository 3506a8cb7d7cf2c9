"""Many small tables' targets made ready together (:mod:`spark_jobs.load.targets`), on a real
PostgreSQL target: created in one transaction, recorded as sluice's, their fit remembered so
that each table's own path asks nothing more; anything unusual left to that path."""

from __future__ import annotations

import sqlalchemy as sa
from pyspark.sql import types as T

from config.models import JdbcTargetConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.load.staging import sweep_committed_stages
from spark_jobs.load.target import TargetTable
from spark_jobs.load.write_jdbc import prepare_target_for, targets_ready

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("note", T.StringType(), True),
    T.StructField("amount", T.DecimalType(12, 2), True),
])  # fmt: skip


def _target(url: str, table: str, schema: str | None = None) -> TargetTable:
    return TargetTable("wh", JdbcTargetConfig(kind="jdbc", url=url), schema, table, ("id",))


def _statements(engine: sa.Engine) -> list[str]:
    seen: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_new_tables_are_made_together_and_their_batches_ask_nothing_more(pg_target: str) -> None:
    targets = [_target(pg_target, f"child_{i}") for i in range(3)]
    assert targets_ready([(SCHEMA, t) for t in targets]) == [True, True, True]
    engine = sql_engine(pg_target)
    with engine.connect() as conn:
        made = conn.execute(sa.text("SELECT table_name FROM _sluice_tables ORDER BY 1")).scalars()
        assert list(made) == ["child_0", "child_1", "child_2"]
        keys = conn.execute(sa.text(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE contype = 'p' ORDER BY 1")).all()  # fmt: skip
    assert [tuple(k) for k in keys if k[0].startswith("child_")] == [
        (f"child_{i}", "PRIMARY KEY (id)") for i in range(3)
    ]
    sweep_committed_stages(engine)  # every few minutes, whatever the tables
    seen = _statements(engine)
    prepared = prepare_target_for(SCHEMA, targets[1], exists=True)
    assert prepared.names == ["id", "note", "amount"]
    assert seen == []  # the table's own path asked the database nothing
    # Asked again (the next group): there, and its fit known.
    assert targets_ready([(SCHEMA, targets[0])]) == [True]


def test_a_table_someone_else_made_is_left_to_its_own_path(pg_target: str) -> None:
    engine = sql_engine(pg_target)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE theirs (id bigint PRIMARY KEY, note text, "
                             "amount numeric(12,2))"))  # fmt: skip
    targets = [_target(pg_target, "theirs"), _target(pg_target, "mine")]
    assert targets_ready([(SCHEMA, t) for t in targets]) == [False, True]
    with engine.connect() as conn:
        made = conn.execute(sa.text("SELECT table_name FROM _sluice_tables")).scalars()
        assert list(made) == ["mine"]  # the operator's table is not recorded as sluice's
    # Its own path checks it (the key among others) and then knows its fit.
    assert prepare_target_for(SCHEMA, targets[0]).names == ["id", "note", "amount"]
    assert targets_ready([(SCHEMA, targets[0])]) == [True]


def test_a_failed_creation_makes_none_of_the_group(pg_target: str) -> None:
    """A table that cannot be made (its schema is missing) leaves the whole group to the
    tables' own paths, with nothing half made."""
    targets = [_target(pg_target, "fine"), _target(pg_target, "lost", schema="nowhere")]
    assert targets_ready([(SCHEMA, t) for t in targets]) == [False, False]
    with sql_engine(pg_target).connect() as conn:
        assert conn.execute(sa.text("SELECT to_regclass('fine')")).scalar() is None


def test_a_fit_names_the_columns_a_binary_copy_may_go_into_as_it_comes(pg_target: str) -> None:
    """Built-in types only, each as the catalogue spells it: an enum, an array of it and a
    domain are the database's own (their binary form may carry their OIDs)."""
    with sql_engine(pg_target).begin() as conn:
        conn.execute(sa.text("CREATE TYPE mood AS ENUM ('ok', 'sad')"))
        conn.execute(sa.text("CREATE DOMAIN money2 AS numeric(12,2) CHECK (VALUE > -1)"))
        conn.execute(sa.text("CREATE TABLE typed (id bigint PRIMARY KEY, tags text[], "
                             "at timestamp(3), m mood, ms mood[], amount money2)"))  # fmt: skip
    schema = T.StructType([T.StructField(n, T.StringType()) for n in ("tags", "at", "m", "ms")])
    schema = T.StructType([T.StructField("id", T.LongType(), False), *schema.fields,
                           T.StructField("amount", T.DecimalType(12, 2))])  # fmt: skip
    fit = prepare_target_for(schema, _target(pg_target, "typed")).fit
    assert fit.built_in == {"id": "bigint", "tags": "text[]",
                            "at": "timestamp(3) without time zone"}  # fmt: skip


def test_tables_described_together_are_described_as_one_by_one(pg_target: str) -> None:
    from spark_jobs.engines import engine_of

    with sql_engine(pg_target).begin() as conn:
        conn.execute(sa.text("CREATE SCHEMA odd"))
        conn.execute(sa.text("CREATE TYPE mood AS ENUM ('ok', 'sad')"))
        conn.execute(sa.text('CREATE TABLE odd."We.ird" (id int PRIMARY KEY, m mood[], '
                             "n numeric(9,3) GENERATED ALWAYS AS (id * 2) STORED)"))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE plain (id bigint GENERATED ALWAYS AS IDENTITY, "
                             "at timestamptz NOT NULL, note text)"))  # fmt: skip
    catalogue = engine_of(pg_target)
    names = [("odd", "We.ird"), (None, "plain"), (None, "missing")]
    with sql_engine(pg_target).connect() as conn:
        together = catalogue.describe_many(conn, names)
        alone = {name: catalogue.describe(conn, *name) for name in names}
    assert set(together) == {("odd", "We.ird"), (None, "plain")}
    assert alone[(None, "missing")] == []
    assert all(together[name] == alone[name] for name in together)
    assert [c.name for c in together[(None, "plain")]] == ["id", "at", "note"]
    assert together[("odd", "We.ird")][1].user_types  # the enum of its array
