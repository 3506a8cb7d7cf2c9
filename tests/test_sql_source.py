"""SqlSource against SQLite, PostgreSQL and MariaDB: keyset, sweep, incremental, errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import sqlalchemy as sa

import sources.sql
from config.errors import ConfigError, SourceError
from config.models import SqlSourceConfig
from sources.queueing import QueueingLimitedSource
from sources.sql import ESTIMATE_ABOVE, SqlSource, check_together
from tests.helpers import wait_until

N = 3000
REGIONS = ("apac", "eu", "us")
PER_REGION = 700
WHERE = "status = 'ready' AND note LIKE 'n:%'"  # a ':' and a '%' must reach the database as written


def status(i: int) -> str:
    return "ready" if i % 3 == 0 else "new"


def load(url: str) -> None:
    """``items`` (id) and ``Order Items`` (region, id), with status and note columns."""
    engine = sa.create_engine(url)
    md = sa.MetaData()
    items = sa.Table(
        "items",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(10)),
        sa.Column("note", sa.String(20)),
        sa.Column("updated_at", sa.Integer),
    )
    order_items = sa.Table(
        "Order Items",
        md,
        sa.Column("region", sa.String(8), primary_key=True),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(10)),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            items.insert(),
            [
                {"id": i, "status": status(i), "note": f"n:{i}%", "updated_at": i % 10}
                for i in range(1, N + 1)
            ],
        )
        conn.execute(
            order_items.insert(),
            [
                {"region": r, "id": i, "status": status(i)}
                for r in REGIONS
                for i in range(1, PER_REGION + 1)
            ],
        )
    engine.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ]
)
def db(request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]) -> str:
    """A database of each kind holding the test tables."""
    if request.param == "sqlite":
        url = sqlite_url("source")
    else:
        url = request.getfixturevalue("pg_url" if request.param == "postgres" else "mariadb_url")
    load(url)
    return url


def config(url: str, **kw: Any) -> SqlSourceConfig:
    fields: dict[str, Any] = {"table": "items", "key": "id", "target": "wh.items", **kw}
    return SqlSourceConfig(kind="sql", url=url, **fields)


@pytest.fixture
def opened() -> Iterator[Callable[..., SqlSource]]:
    """Build SqlSources that are closed at the end of the test."""
    made: list[SqlSource] = []

    def make(*args: Any, **kw: Any) -> SqlSource:
        made.append(SqlSource(*args, **kw))
        return made[-1]

    yield make
    for source in made:
        source.close()


def read_all(source: SqlSource, limit: int) -> list[Any]:
    """Every item a source hands out, ``limit`` at a time (rows, for ranges)."""
    found: list[Any] = []
    while True:
        batch = source.next_batch(limit)
        taken = sum(item.rows for item in batch)
        assert taken <= limit
        found.extend((item.key, item.rows) if source.weighs_rows else item.key for item in batch)
        if source.exhausted:
            return found
        assert taken == limit


def ranges(keys: Sequence[Any], size: int) -> list[tuple[Any, int]]:
    """The ranges a keyset walk plans over ``keys``: each one's last key and row count."""
    chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
    return [(chunk[-1], len(chunk)) for chunk in chunks]


def test_a_long_keyset_plan_hands_over_its_ranges_as_it_goes(
    db: str, opened: Callable[..., SqlSource], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A buffer's first refill asks for millions of rows: the loop must not wait
    # for all of them. Past the time slice a plan returns what it has (here:
    # one range a call), not at its end, and the buffer asks again at once
    # until it is full, every range exactly once, adjacent, in key order.
    monkeypatch.setattr(sources.sql, "PLAN_SECONDS", 0.0)
    source = opened("items", config(db), range_rows=300)
    assert [(i.key, i.rows) for i in source.next_batch(1500)] == [((300,), 300)]
    assert not source.exhausted and source.position == (300,)
    source.reset(None)
    buffer = QueueingLimitedSource(source, capacity=N + 1000, replenish_below=N)
    buffer.start()
    try:
        wait_until(lambda: buffer.buffered >= N and not buffer.refilling, "the buffer full")
        assert buffer.buffered == N
        taken = buffer.next_batch(N, "all")
    finally:
        buffer.stop(5)
    everything = [(i,) for i in range(1, N + 1)]
    assert [(i.key, i.rows) for i in taken] == ranges(everything, 300)


def test_keyset_plans_ranges_of_the_table_in_key_order_and_resumes(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    source = opened("items", config(db))
    source.check()
    everything = [(i,) for i in range(1, N + 1)]
    assert read_all(source, 700) == ranges(everything, 700)
    assert source.position == (N,)
    assert source.next_batch(10) == [] and source.exhausted

    resumed = opened("items", config(db), after=(1234,))
    assert read_all(resumed, 1000) == ranges(everything[1234:], 1000)
    resumed.reset(None)
    assert [(i.key, i.rows) for i in resumed.next_batch(2)] == [((2,), 2)]
    # Whole ranges of range_rows rows, adjacent, up to the limit in all; the
    # room a whole range does not fit is left for the next call.
    small = opened("items", config(db), range_rows=300)
    assert [(i.key, i.rows) for i in small.next_batch(700)] == ranges(everything[:600], 300)
    assert [(i.key, i.rows) for i in small.next_batch(200)] == [((800,), 200)]


def test_ranges_of_sluices_size_hold_no_more_bytes_than_a_batch_of_the_rows_width(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    """``range_bytes`` caps a range at that many bytes of the table's rows (the width asked
    at the first plan), never below a page: ranges planned before the loop sizes batches by
    the width are no bigger than those batches."""
    everything = [(i,) for i in range(1, N + 1)]
    probe = opened("items", config(db))
    width = probe.row_bytes()
    assert width
    source = opened("items", config(db, page_size=50), range_rows=N, range_bytes=int(width * 400))
    size = int(int(width * 400) / width)
    assert 390 <= size <= 400
    assert read_all(source, size * 3) == ranges(everything, size)
    floor = opened("items", config(db, page_size=900), range_rows=N, range_bytes=int(width * 10))
    assert read_all(floor, 900 * 3) == ranges(everything, 900)
    unbounded = opened("items", config(db), range_rows=N)
    assert read_all(unbounded, N) == [((N,), N)]


def test_a_source_counted_small_plans_the_same_ranges_whatever_the_table_holds(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    """``few_rows`` (the statistics' guess) changes how a range's end is asked, never the
    ranges: a wrong guess (a table far bigger than a range) gives the same walk."""
    everything = [(i,) for i in range(1, N + 1)]
    for range_rows in (700, N, N + 5):
        source = opened("items", config(db), range_rows=range_rows)
        source.few_rows = True
        assert read_all(source, range_rows) == ranges(everything, range_rows)
        assert source.next_batch(10) == [] and source.exhausted
    composite = opened("oi", config(db, table="Order Items", key=["region", "id"]),
                       range_rows=500)  # fmt: skip
    composite.few_rows = True
    keys = [(r, i) for r in REGIONS for i in range(1, PER_REGION + 1)]
    assert read_all(composite, 500) == ranges(keys, 500)


def test_keyset_composite_key_quoted_table_and_where(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    cfg = config(db, table="Order Items", key=["region", "id"], where="status = 'ready'")
    source = opened("order_items", cfg)
    source.check()
    expected = [(r, i) for r in REGIONS for i in range(1, PER_REGION + 1) if status(i) == "ready"]
    assert read_all(source, 97) == ranges(expected, 97)
    items = opened("order_items", cfg, after=("eu", 600)).next_batch(10_000)
    assert [(i.key, i.rows) for i in items] == ranges([k for k in expected if k > ("eu", 600)],
                                                      10_000)  # fmt: skip
    assert {i.source for i in items} == {"order_items"}


def test_where_with_colon_and_percent_is_pushed_down_as_written(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    source = opened("items", config(db, where=WHERE))
    source.check()
    ready = [(i,) for i in range(1, N + 1) if status(i) == "ready"]
    assert read_all(source, 333) == ranges(ready, 333)


@pytest.mark.postgres
def test_schema_qualified_table_and_dialect_casts(
    pg_url: str, opened: Callable[..., SqlSource]
) -> None:
    load(pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text('CREATE SCHEMA "Sales"'))
        conn.execute(sa.text('CREATE TABLE "Sales"."Orders" AS SELECT id, status FROM items'))
    engine.dispose()
    cfg = config(pg_url, table="Sales.Orders", where="id::text LIKE '12%'")
    source = opened("orders", cfg)
    source.check()
    matching = sorted((i,) for i in range(1, N + 1) if str(i).startswith("12"))
    assert read_all(source, 5) == ranges(matching, 5)


@pytest.mark.parametrize(
    ("changes", "cause"),
    [
        ({"table": "no_such_table"}, "no_such_table"),
        ({"key": "no_such_column"}, "no_such_column"),
        ({"where": "status = = 'x'"}, "check query failed"),
    ],
)
def test_check_names_source_table_and_cause(
    db: str, opened: Callable[..., SqlSource], changes: dict[str, str], cause: str
) -> None:
    source = opened("broken", config(db, **changes))
    with pytest.raises(ConfigError) as info:
        source.check()
    message = str(info.value)
    assert "source broken" in message and cause in message
    assert repr(changes.get("table", "items")) in message


def test_sources_of_one_database_are_checked_by_one_query_and_each_names_its_fault(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    good = [opened("ok0", config(db)), opened("ok1", config(db, where="status <> 'x'")),
            opened("ok2", config(db, table="Order Items", key=["region", "id"]))]
    queries: list[str] = []

    def count(*args: Any) -> None:
        queries.append(str(args[2]))

    engine = good[0].engine
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        check_together(good)
        # One round trip asks them all: one script where the driver takes several
        # statements (PostgreSQL), else a union after the script it refused.
        asked = queries[-1].upper()
        assert len(queries) <= 2 and all(t.upper() in asked for t in ("ITEMS", "ORDER ITEMS"))
        assert asked.count("LIMIT 0") == 3 or asked.count("UNION ALL") == 2
        assert len(queries) == 1 or db.startswith(("sqlite", "mysql"))
        queries.clear()
        broken = opened("broken", config(db, key="nope"))
        with pytest.raises(ConfigError, match="source broken") as info:
            check_together([*good, broken])
        assert "'items'" in str(info.value)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def test_unreachable_database_is_transient_and_hides_the_password(
    opened: Callable[..., SqlSource],
) -> None:
    source = opened("down", config("postgresql+psycopg://app:s3cret@127.0.0.1:1/shop"))
    for call in (source.check, lambda: source.next_batch(10)):
        with pytest.raises(SourceError) as info:
            call()
        assert info.value.transient
        assert "s3cret" not in str(info.value) and "source down" in str(info.value)
        assert "app:***@127.0.0.1:1/shop" in str(info.value)


class Ledger:
    """A stand-in for the ledger: keys claimed so far are done for the sweep."""

    def __init__(self) -> None:
        self.claimed: set[Any] = set()
        self.lookups = 0

    def is_done(self, keys: Sequence[Any]) -> set[Any]:
        self.lookups += 1
        return {k for k in keys if k in self.claimed}


def test_sweep_hands_every_visible_key_out_once_across_passes(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    ledger = Ledger()
    cfg = config(db, mode="sweep", where=WHERE, page_size=128)
    # A tiny done cache: evictions must cost look-ups, never correctness.
    source = opened("sweep", cfg, is_done=ledger.is_done, done_cache_size=50)
    expected = {(i,) for i in range(1, N + 1) if status(i) == "ready"}
    seen: list[Any] = []
    for call in range(1000):
        items = source.next_batch(150)
        seen.extend(item.key for item in items)
        ledger.claimed.update(item.key for item in items)
        if call % 2:
            source.ack(items)  # some batches finish, others stay handed out
        if source.exhausted:
            break
    assert len(seen) == len(set(seen)) and set(seen) == expected
    assert source.exhausted and source.next_batch(10) == []

    # After a restart only the ledger knows: still nothing comes twice.
    again = opened("sweep", cfg, is_done=ledger.is_done)
    assert again.next_batch(100) == [] and again.exhausted


def test_sweep_gives_released_keys_out_again_and_sees_new_rows(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    source = opened("sweep", config(db, mode="sweep", where="id <= 10", page_size=4))
    first = source.next_batch(3)
    assert [i.key for i in first] == [(1,), (2,), (3,)]
    rest = source.next_batch(100)
    assert [i.key for i in rest] == [(i,) for i in range(4, 11)]
    source.release(first[:2])
    source.ack(first[2:])
    # The pass ended with the last read; the next pass finds only the released keys.
    assert [i.key for i in source.next_batch(100)] == [(1,), (2,)]
    assert source.next_batch(100) == [] and source.exhausted


def test_incremental_reads_rows_again_when_their_cursor_moves(
    sqlite_url: Callable[[str], str], opened: Callable[..., SqlSource]
) -> None:
    url = sqlite_url("inc")
    load(url)
    cfg = config(url, mode="incremental", cursor="updated_at")
    source = opened("inc", cfg)
    source.check()
    items = [item for _ in range(10) for item in source.next_batch(500)]
    assert len(items) == N and source.exhausted
    assert [(i.key, i.version) for i in items[:2]] == [((10,), "0"), ((20,), "0")]
    assert source.position == (9, (N // 10) * 10 - 1)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE items SET updated_at = 42 WHERE id IN (5, 7)"))
    engine.dispose()
    assert [(i.key, i.version) for i in source.next_batch(500)] == [((5,), "42"), ((7,), "42")]


def test_incremental_leaves_out_rows_without_a_cursor(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    # SQLite and MariaDB sort NULLs first: a NULL position must never end the walk.
    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE items SET updated_at = NULL WHERE id <= 100 OR id % 7 = 0"))
    engine.dispose()
    source = opened("inc", config(db, mode="incremental", cursor="updated_at"))
    expected = {(i,) for i in range(101, N + 1) if i % 7}
    assert source.backlog() == len(expected)
    keys = read_all(source, 64)
    assert len(keys) == len(set(keys)) and set(keys) == expected
    assert source.backlog() == 0


def test_backlog_counts_what_is_left_without_moving(
    db: str, opened: Callable[..., SqlSource]
) -> None:
    keyset = opened("items", config(db))
    assert keyset.backlog() == N
    keyset.next_batch(1000)
    assert keyset.backlog() == N - 1000 and keyset.position == (1000,)
    assert opened("items", config(db, where=WHERE), after=(1500,)).backlog() == len(
        [i for i in range(1501, N + 1) if status(i) == "ready"]
    )
    ready = len([i for i in range(1, N + 1) if status(i) == "ready"])
    sweep = opened("sweep", config(db, mode="sweep", where=WHERE, page_size=100))
    sweep.next_batch(150)
    assert sweep.backlog() == ready  # a sweep reads every matching row again
    inc = opened("inc", config(db, mode="incremental", cursor="updated_at"))
    inc.next_batch(N - 10)
    assert inc.backlog() == 10


@pytest.mark.postgres
def test_a_big_postgresql_backlog_is_the_planners_estimate_and_reads_no_row(pg_url: str) -> None:
    rows = ESTIMATE_ABOVE + 50_000

    def backlog(after: tuple[int] | None = None, **kw: Any) -> int:
        source = SqlSource("big", config(pg_url, table="big", **kw), after=after)
        try:
            return source.backlog()
        finally:
            source.close()

    engine = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("CREATE TABLE big (id bigint PRIMARY KEY, body text)"))
        conn.execute(sa.text("INSERT INTO big SELECT i, 'row ' || i "
                             "FROM generate_series(1, :n) AS i"), {"n": rows})  # fmt: skip
        # Never analyzed: the planner would guess from the table's size, so it is counted.
        assert backlog() == rows
        conn.execute(sa.text("ANALYZE big"))

        def read() -> int:
            """Tuples every reader of ``big`` fetched, once every other session has ended
            (a session's counts reach the statistics before it leaves pg_stat_activity)."""
            others = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            wait_until(lambda: conn.scalar(sa.text(others + "AND pid <> pg_backend_pid()")) == 0,
                       "the sources' sessions to end")  # fmt: skip
            return int(conn.scalar(sa.text(
                "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables "
                "WHERE relname = 'big'")))  # fmt: skip

        # The planner may look at the key index's ends: a tuple or two, no more.
        probe = 2
        before = read()
        # The check sees a count: with a where:, the rows are counted, and read.
        assert backlog(where="id > 0") == rows
        counted = read()
        assert rows <= counted - before <= rows + probe
        # Without one: the planner's rows, within 1 %, and no row read.
        assert abs(backlog() - rows) <= rows / 100
        assert read() - counted <= probe
        # Near the end, the rows left are counted exactly again.
        assert backlog(after=(rows - 10,)) == 10
    engine.dispose()


def test_backlog_of_an_unreachable_database_is_a_transient_error(
    opened: Callable[..., SqlSource],
) -> None:
    source = opened("down", config("postgresql+psycopg://app:s3cret@127.0.0.1:1/shop"))
    with pytest.raises(SourceError) as info:
        source.backlog()
    assert info.value.transient and "s3cret" not in str(info.value)


def test_a_refused_read_is_not_transient(db: str, opened: Callable[..., SqlSource]) -> None:
    # The column the where: needs goes away mid-run: every retry gets the same answer.
    source = opened("items", config(db, where=WHERE))
    assert sum(item.rows for item in source.next_batch(10)) == 10
    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE items DROP COLUMN note")
    engine.dispose()
    with pytest.raises(SourceError) as info:
        source.next_batch(10)
    assert not info.value.transient
    assert "source items" in str(info.value) and "read failed" in str(info.value)
    assert "note" in str(info.value)


@pytest.mark.postgres
def test_a_where_failing_on_some_row_is_not_transient(
    pg_url: str, opened: Callable[..., SqlSource]
) -> None:
    load(pg_url)
    source = opened("items", config(pg_url, where="100 / (id - 30) > -1000"))
    source.check()  # LIMIT 0 evaluates no row
    with pytest.raises(SourceError) as info:
        source.next_batch(100)
    assert not info.value.transient and "division by zero" in str(info.value)


@pytest.mark.mariadb
def test_a_big_mariadb_backlog_is_its_statistics_times_the_key_s_share(mariadb_url: str) -> None:
    rows = ESTIMATE_ABOVE + 50_000

    def backlog(after: tuple[int] | None = None, **kw: Any) -> int:
        source = SqlSource("big", config(mariadb_url, table="big", **kw), after=after)
        try:
            return source.backlog()
        finally:
            source.close()

    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE big (id bigint PRIMARY KEY, body varchar(20))"))
        conn.execute(sa.text("INSERT INTO big SELECT seq, CONCAT('row ', seq) "
                             f"FROM seq_1_to_{rows}"))  # fmt: skip
        conn.execute(sa.text("ANALYZE TABLE big"))
        known = int(conn.scalar(sa.text(
            "SELECT table_rows FROM information_schema.TABLES "
            "WHERE table_schema = database() AND table_name = 'big'")))
    engine.dispose()
    assert abs(known - rows) < rows // 2  # InnoDB's estimate, from sampled pages
    assert backlog() == known
    assert backlog(after=(rows // 4,)) == int(known * (rows - rows // 4) / rows)
    assert backlog(after=(rows,)) == 0
    # A where: (or a cursor) is counted, row by row.
    assert backlog(after=(rows // 2,), where="id % 2 = 0") == rows // 4
