"""Whole databases: ``tables:`` patterns expand into a source per table, parents first.

The expansion itself is checked on SQLite files (no Spark); the whole path
on real PostgreSQL and MariaDB: the 14-table schema of
:mod:`tests.shop_schema` migrates from one ``tables:`` source into a target
with its foreign keys enforced, with no rejected row.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from config.catalog import TableCatalog
from config.errors import ConfigError
from config.loader import load_config, load_config_text
from config.models import FairEntry, FairNode
from config.sources import DATABASE_CONNECTIONS
from scheduler.commands.init import starter_config
from scheduler.verify_tables import verify_config
from tests.helpers import drain, write_config
from tests.shop_schema import TABLES, create_schema, rows_of, seed, shop_config

SMALL = """
CREATE TABLE customers (id integer PRIMARY KEY, name text);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers (id));
CREATE TABLE lines (order_id integer, n integer, qty integer, PRIMARY KEY (order_id, n),
                    FOREIGN KEY (order_id) REFERENCES orders (id));
CREATE TABLE audit_log (x integer);
CREATE TABLE nokey (y integer);
"""


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    """A SQLite file with five tables: two with foreign keys, one composite key, two keyless."""
    path = tmp_path / "src.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(SMALL)
    return path


def config(tables: str, extra: str = "", overrides: str = "{nokey: {key: y}}") -> str:
    """A config with one ``tables:`` source ``shop`` over ``src.db``."""
    return f"""
ledger: sqlite:///ledger.db
sources:
  shop:
    kind: sql
    url: sqlite:///src.db
    tables: {tables}
    order: foreign_keys
    target: lake
    page_size: 500
    overrides: {overrides}
targets:
  lake: {{kind: parquet, path: ./out}}
{extra}"""


def test_patterns_expand_into_a_source_per_table_keyed_by_its_primary_key(
    small_db: Path,
) -> None:
    cfg = load_config_text(config('["*", "!audit_*"]'), str(small_db.parent / "sluice.yaml"))
    assert cfg.groups == {"shop": ["shop.customers", "shop.lines", "shop.nokey", "shop.orders"]}
    lines, nokey, orders = (cfg.sources[f"shop.{t}"] for t in ("lines", "nokey", "orders"))
    assert lines.kind == nokey.kind == orders.kind == "sql"
    assert (lines.table, lines.key_columns, lines.target) == (
        "lines",
        ("order_id", "n"),
        "lake.lines",
    )
    assert nokey.key_columns == ("y",)  # the override's key
    assert orders.page_size == 500  # the group's keys go to every table
    # order: foreign_keys: each table waits for the tables it refers to.
    assert (orders.depends_on, lines.depends_on, nokey.depends_on) == (
        ["shop.customers"],
        ["shop.orders"],
        [],
    )


def test_sluices_own_tables_are_never_a_groups_tables(small_db: Path) -> None:
    from config.catalog import OWN_TABLES
    from scheduler.ledger.migrate import VERSION_TABLE
    from scheduler.ledger.schema import metadata
    from sources.binlog_changes import WATERMARKS
    from spark_jobs.load.jdbc_tables import STREAMS_TABLE
    from spark_jobs.load.target import COMMITS_TABLE, REJECTS_TABLE

    made = {*metadata.tables, VERSION_TABLE, COMMITS_TABLE, REJECTS_TABLE, STREAMS_TABLE,
            WATERMARKS}  # fmt: skip
    assert made == OWN_TABLES
    # A ledger in the source's database, a watermark table, a former target's bookkeeping.
    with sqlite3.connect(small_db) as conn:
        for table in ("sluice_batches", "sluice_watermarks", "_sluice_commits"):
            conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY)")
    cfg = load_config_text(config('["*", "!audit_*"]'), str(small_db.parent / "sluice.yaml"))
    assert cfg.groups == {"shop": ["shop.customers", "shop.lines", "shop.nokey", "shop.orders"]}


def test_a_strategy_naming_the_group_shares_its_weight_between_its_tables(
    small_db: Path,
) -> None:
    text = config('["*", "!audit_*"]', extra="strategy: {fair: {shop: 2, shop.nokey: 1}}")
    cfg = load_config_text(text, str(small_db.parent / "sluice.yaml"))
    assert cfg.strategy is not None and isinstance(cfg.strategy.fair, list)
    group, alone = cfg.strategy.fair
    # The table the strategy names on its own is not in the group's node.
    assert group == FairEntry(weight=2.0, node=FairNode(fair={
        "shop.customers": 1.0, "shop.lines": 1.0, "shop.orders": 1.0}))  # fmt: skip
    assert alone == FairEntry(weight=1.0, node="shop.nokey")


def test_a_table_without_a_key_is_an_error_that_names_both_fixes(small_db: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_config_text(config('["*"]', overrides="{}"), str(small_db.parent / "sluice.yaml"))
    text = str(error.value)
    for table in ("audit_log", "nokey"):
        assert f"table {table!r} has no primary key" in text
        assert f"overrides: {{{table}: {{key: [COLUMN, …]}}}}" in text and f'"!{table}"' in text
    assert "sluice.yaml line 7" in text  # the tables: line


@pytest.mark.parametrize(
    ("tables", "overrides", "expected"),
    [
        ('["*", "!audit_*"]', "{nokey: {key: y}, nokee: {key: y}}",
         "overrides.nokee: names table 'nokee', which tables: does not select"),
        ('["nothing_*"]', "{}", "no table matches ['nothing_*']"),
        ('["*", "!audit_*"]', "{nokey: {key: y, url: 'sqlite:///x.db'}}",
         "overrides.nokey.url: cannot be set per table"),
        ("orders", "{orders: {page_size: -1}}", "sources.shop.overrides.orders.page_size"),
        ('["*", "!audit_*"]', "{nokey: {key: y}}\n    page_sise: 5",
         "sources.shop.page_sise: unknown key; did you mean 'page_size'?"),
    ],
)  # fmt: skip
def test_bad_patterns_and_overrides_are_named(
    small_db: Path, tables: str, overrides: str, expected: str
) -> None:
    with pytest.raises(ConfigError, match="sluice.yaml") as error:
        load_config_text(config(tables, overrides=overrides), str(small_db.parent / "sluice.yaml"))
    assert str(error.value).count(expected) == 1  # once, not once per table


def test_a_foreign_key_cycle_is_an_error_naming_its_tables(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "src.db") as conn:
        conn.executescript("""
            CREATE TABLE a (id integer PRIMARY KEY, b_id integer REFERENCES b (id));
            CREATE TABLE b (id integer PRIMARY KEY, a_id integer REFERENCES a (id));
            CREATE TABLE c (id integer PRIMARY KEY, c_id integer REFERENCES c (id));
        """)  # fmt: skip
    with pytest.raises(ConfigError) as error:
        load_config_text(config('["*"]', overrides="{}"), str(tmp_path / "sluice.yaml"))
    assert "in a cycle: shop.a -> shop.b -> shop.a" in str(error.value)
    # Breaking it by hand: a self-reference (c) is the table's own order, not a cycle.
    cfg = load_config_text(config('["*"]', overrides="{a: {depends_on: []}}"),
                           str(tmp_path / "sluice.yaml"))  # fmt: skip
    assert [cfg.sources[f"shop.{t}"].depends_on for t in "abc"] == [[], ["shop.a"], []]


def test_a_database_that_cannot_be_reached_is_named(tmp_path: Path) -> None:
    text = config('["*"]', overrides="{}").replace("sqlite:///src.db", "sqlite:///missing.db")
    reason = r"sources.shop.url: cannot list the tables of sqlite:///missing.db: .*no SQLite"
    with pytest.raises(ConfigError, match=reason):
        load_config_text(text, str(tmp_path / "sluice.yaml"))
    assert not (tmp_path / "missing.db").exists()  # not created by looking


def test_what_was_found_expands_again_without_the_database(small_db: Path) -> None:
    path = small_db.parent / "sluice.yaml"
    path.write_text(config('["*", "!audit_*"]'))
    first = load_config(path)
    catalog = TableCatalog.from_json(first.table_catalog.to_json())
    small_db.unlink()  # a reload or an import job does not look again
    again = load_config(path, tables=catalog)
    assert again.sources == first.sources and again.groups == first.groups


# -- the whole path: PostgreSQL and MariaDB, foreign keys enforced in the target ----------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("dialect", "written_by"), [("mariadb", "hand"), ("postgresql", "init")]
)
def test_a_whole_schema_migrates_parents_first_into_enforced_foreign_keys(  # type: ignore[no-untyped-def]
    tmp_path: Path, request: pytest.FixtureRequest, spark, dialect: str, written_by: str
) -> None:
    factory = request.getfixturevalue(
        "pg_factory" if dialect == "postgresql" else "mariadb_factory"
    )
    source, target = factory.create("whole_src"), factory.create("whole_dst")
    counts = seed(source)
    create_schema(target, target=True)  # the operator's target: every foreign key enforced
    migrated = TABLES
    if written_by == "init":
        # sluice init's output as it is: every table but notes (no primary key).
        text = starter_config(source, target)
        assert '"!notes"' in text and "#   notes: {key: [customer_id, seq, body]}" in text
        path, cfg = write_config(tmp_path, text + "\nbatch: {max_items: 100, max_wait: 50ms}\n")
        migrated = [*(t for t in TABLES if t != "notes"), "audit_log"]
    else:
        path, cfg = write_config(tmp_path, shop_config(source, target, dialect))
    [(group, members)] = cfg.groups.items()
    assert sorted(members) == sorted(f"{group}.{t}" for t in migrated)
    assert cfg.sources[f"{group}.shipment_items"].depends_on == [
        f"{group}.order_lines", f"{group}.shipments"]  # fmt: skip
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0, summary  # no dead batch, no rejected row
    for table in migrated:
        assert rows_of(target, table) == rows_of(source, table), table
        assert len(rows_of(target, table)) == counts[table]
    if written_by == "hand":
        assert rows_of(target, "audit_log") == []  # left out by the pattern



# -- a database of many tables: one connection budget ---------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("spark_jobs", [False, True], ids=["local_tasks", "spark_jobs"])
def test_many_tables_share_one_connection_budget_and_drain(  # type: ignore[no-untyped-def]
    tmp_path: Path, pg_url: str, pg_target: str, spark, spark_jobs: bool
) -> None:
    """Each table is a source, but the database is asked for its budget only.

    Every table's key queries, row samples and reads draw on the one
    budget, its default left unset (sampled from ``pg_stat_activity`` all
    along: a pool per table held more than it at once), and a run of many
    drained tables ends: their key queries, taking turns on few
    connections, do not keep it from seeing them all drained at once. The
    verify after it, comparing tables side by side, stays within it too.
    The tables' batches are loaded by local tasks, as ``sluice run`` on a
    local master loads them, and by the tasks of one Spark job, as a
    cluster's executors do.
    """
    import threading

    import sqlalchemy as sa

    tables, rows = 13, 40
    source = sa.create_engine(pg_url)
    with source.begin() as conn:
        for i in range(tables):
            conn.execute(sa.text(f"CREATE TABLE t{i:02} (id bigint PRIMARY KEY, v text)"))
            conn.execute(sa.text(f"INSERT INTO t{i:02} SELECT g, md5(g::text) "
                                 f"FROM generate_series(1, {rows}) g"))  # fmt: skip
    source.dispose()
    database = (sa.make_url(pg_url).database or "")[:63]  # as the server truncated it
    # Autocommit: pg_stat_activity is read once per transaction.
    admin = sa.create_engine(pg_url.rsplit("/", 1)[0] + "/postgres", poolclass=sa.pool.NullPool,
                             isolation_level="AUTOCOMMIT")
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        with admin.connect() as conn:
            while not stop.is_set():
                seen.append(conn.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                    {"d": database}).scalar_one())  # fmt: skip
                stop.wait(0.02)

    path, cfg = write_config(tmp_path, f"""
sources:
  shop:
    kind: sql
    url: {pg_url}
    tables: ["*"]
    target: wh
targets:
  wh: {{kind: jdbc, url: {pg_target}}}
ledger: sqlite:///{tmp_path / 'ledger.db'}
""")
    assert len(cfg.sources) == tables
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        summary = drain(cfg, path, spark, spark_jobs=spark_jobs)
        drained = len(seen)
        # Verify, comparing tables side by side, stays within the same budget.
        report = verify_config(spark, cfg)
    finally:
        stop.set()
        sampler.join(10)
        admin.dispose()
    assert summary.exit_code == 0, summary
    target = sa.create_engine(pg_target)
    with target.connect() as conn:
        counts = {conn.execute(sa.text(f"SELECT count(*) FROM t{i:02}")).scalar_one()
                  for i in range(tables)}  # fmt: skip
    target.dispose()
    assert counts == {rows}
    assert report.equal and [t.checked for t in report.tables] == [rows] * tables, report
    assert seen[:drained] and max(seen[:drained]) <= DATABASE_CONNECTIONS, seen[:drained]
    assert max(seen[drained:] or [0]) <= DATABASE_CONNECTIONS, ("verify", seen[drained:])
