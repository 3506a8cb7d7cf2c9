"""The three SQL modes through the real daemon, on PostgreSQL, MariaDB and SQLite.

Each test runs :class:`scheduler.daemon.Daemon` with the real ledger (a SQLite
file in the test's folder) and the in-memory :class:`~sinks.abc.MemorySink`, so
what is checked is what the scheduler claims: every key in exactly one batch
(``lo < key <= hi`` for keyset ranges, ``manifest.keys`` otherwise), across
several batches and buffer refills, across restarts from the ledger's
checkpoint and after a crash that left batches claimed or importing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import SluiceConfig
from scheduler.daemon import Daemon
from scheduler.ledger import Ledger, encode_key, fingerprint
from sinks.abc import MemorySink
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult
from tests.helpers import write_config

pytestmark = pytest.mark.timeout(60)

ROWS = 900  # keys 3, 6, …, 2700: gaps between keys, as in real tables
CAPACITY = 250  # a few buffer refills per run…
MAX_ITEMS = 100  # …and several batches per refill


def ready(i: int) -> bool:
    """Rows the sweep's ``where:`` selects: two thirds of them."""
    return i % 3 != 0


def key_of(i: int) -> int:
    return 3 * i


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ]
)
def db(request: pytest.FixtureRequest, sqlite_url: Callable[[str], str]) -> str:
    """A database of each kind holding ``items(id, status, updated_at)``."""
    if request.param == "sqlite":
        url = sqlite_url("shop")
    else:
        url = request.getfixturevalue("pg_url" if request.param == "postgres" else "mariadb_url")
    engine = sa.create_engine(url)
    md = sa.MetaData()
    sa.Table(
        "items",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("updated_at", sa.Integer, nullable=False),
    )
    md.create_all(engine)
    engine.dispose()
    insert(url, range(1, ROWS + 1))
    return url


def insert(url: str, numbers: Iterable[int], *, status: str | None = None, at: int = 0) -> None:
    """Add rows ``key_of(i)`` (status by :func:`ready` unless given; cursor ``at + i % 50``)."""
    rows = [
        {
            "id": key_of(i),
            "status": status or ("ready" if ready(i) else "new"),
            "updated_at": at + i % 50,  # many rows share a cursor value: the key breaks ties
        }
        for i in numbers
    ]
    execute(url, "INSERT INTO items (id, status, updated_at) VALUES (:id, :status, :updated_at)",
            rows)


def execute(url: str, sql: str, params: Any = None) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql), params)
    engine.dispose()


def table_keys(url: str, where: str | None = None) -> list[int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        sql = "SELECT id FROM items" + (f" WHERE {where}" if where else "") + " ORDER BY id"
        keys = list(conn.scalars(sa.text(sql)))
    engine.dispose()
    return keys


def configure(tmp_path: Path, url: str, mode: str, **extra: str) -> SluiceConfig:
    """One source ``items`` in ``mode``; small buffers and batches; ledger in tmp_path."""
    options = "".join(f"\n    {k}: {v}" for k, v in extra.items())
    _, cfg = write_config(
        tmp_path,
        f"""
ledger: sqlite:///ledger.db
sources:
  items:
    kind: sql
    url: "{url}"
    table: items
    key: id
    mode: {mode}
    page_size: 120
    sweep_pause: 0s
    buffer: {{capacity: {CAPACITY}, replenish_below: 80}}
    target: lake.items{options}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {MAX_ITEMS}, max_wait: 50ms}}
""",
    )
    return cfg


def run(cfg: SluiceConfig, sink: MemorySink | None = None) -> list[Manifest]:
    """Run a fresh daemon until drained (exit 0); return the manifests it submitted."""
    sink = sink or MemorySink()
    daemon = Daemon(cfg, sink=sink)
    try:
        summary = daemon.run(until_drained=True)
    finally:
        daemon.close()
    assert summary.exit_code == 0, summary
    return sink.submitted


def claimed(manifests: list[Manifest], keys: list[int]) -> Counter[int]:
    """How many batches each key of ``keys`` belongs to (ranges and key lists alike)."""
    count: Counter[int] = Counter()
    for m in manifests:
        if m.kind == "range":
            assert m.hi is not None
            lo = m.lo[0] if m.lo else None
            count.update(k for k in keys if (lo is None or lo < k) and k <= m.hi[0])
        else:
            assert m.kind == "keys"
            count.update(k for [k] in m.keys)
    return count


def exactly_once(manifests: list[Manifest], keys: list[int]) -> None:
    count = claimed(manifests, keys)
    twice = sorted(k for k, n in count.items() if n > 1)
    missing = sorted(set(keys) - set(count))
    extra = sorted(set(count) - set(keys))
    assert not twice, f"{len(twice)} keys in two batches, e.g. {twice[:5]}"
    assert not missing, f"{len(missing)} keys in no batch, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} keys that should not be migrated, e.g. {extra[:5]}"


def states(cfg: SluiceConfig) -> dict[str, int]:
    ledger = Ledger(cfg.ledger)
    try:
        [progress] = ledger.reads.progress()
    finally:
        ledger.close()
    return progress.states


def crash(cfg: SluiceConfig, claim: Callable[[Ledger], list[str]], importing: int) -> list[str]:
    """What a killed daemon leaves behind: batches claimed, the first ``importing`` begun."""
    ledger = Ledger(cfg.ledger)
    try:
        ledger.sources.register("items", fingerprint(cfg.sources["items"]))
        ids = claim(ledger)
        for batch_id in ids[:importing]:
            ledger.begin(batch_id)
        left = {"importing": importing, "claimed": len(ids) - importing}
        [progress] = ledger.reads.progress()
        assert progress.states == {state: n for state, n in left.items() if n}
    finally:
        ledger.close()
    return ids


# -- keyset --------------------------------------------------------------------------


def test_keyset_claims_each_key_once_and_resumes_from_the_checkpoint(
    tmp_path: Path, db: str
) -> None:
    cfg = configure(tmp_path, db, "keyset")
    first = run(cfg)
    exactly_once(first, table_keys(db))
    assert len(first) >= ROWS // MAX_ITEMS and all(m.kind == "range" for m in first)

    # Rows added after the run: a new daemon on the same ledger claims only them.
    insert(db, range(ROWS + 1, ROWS + 151))
    second = run(cfg)
    exactly_once(second, [key_of(i) for i in range(ROWS + 1, ROWS + 151)])
    assert second[0].lo == [key_of(ROWS)]
    assert states(cfg) == {"done": len(first) + len(second)}
    assert run(cfg) == []  # and nothing at all when nothing is new


def test_keyset_resumes_batches_a_crashed_run_left_claimed(tmp_path: Path, db: str) -> None:
    cfg = configure(tmp_path, db, "keyset")

    def claim(ledger: Ledger) -> list[str]:
        checkpoint = ledger.sources.checkpoint("items")
        ids = []
        for n, hi in enumerate((key_of(100), key_of(250), key_of(300))):
            _, checkpoint = ledger.claim_range(
                f"crashed-{n}", "items", "lake.items", checkpoint, [hi], 100
            )
            ids.append(f"crashed-{n}")
        return ids

    crashed = crash(cfg, claim, importing=2)
    submitted = run(cfg)
    assert [m.batch_id for m in submitted[:3]] == crashed  # re-run first, then new ranges
    assert submitted[3].lo == [key_of(300)]
    exactly_once(submitted, table_keys(db))
    assert states(cfg) == {"done": len(submitted)}


def test_keyset_with_where_claims_only_matching_rows(tmp_path: Path, db: str) -> None:
    cfg = configure(tmp_path, db, "keyset", where="status = 'ready'")
    submitted = run(cfg)
    matching = table_keys(db, "status = 'ready'")
    exactly_once(submitted, matching)
    # The ranges are disjoint over the whole table (the import job re-applies where:
    # to the rows between), and their item counts are the matching rows only.
    assert set(claimed(submitted, table_keys(db)).values()) == {1}
    assert sum(m.items for m in submitted) == len(matching)


# -- sweep ---------------------------------------------------------------------------


class InsertOnFirstNewBatch(MemorySink):
    """A sink that runs ``action`` when the first batch not in ``skip`` arrives."""

    def __init__(self, action: Callable[[], None], skip: Iterable[str] = ()) -> None:
        super().__init__()
        self.action: Callable[[], None] | None = action
        self.skip = set(skip)

    def submit(self, manifest: Manifest) -> Future[ImportResult]:
        if self.action is not None and manifest.batch_id not in self.skip:
            action, self.action = self.action, None
            action()
        return super().submit(manifest)


def test_sweep_migrates_rows_that_stay_visible_once_across_passes(
    tmp_path: Path, db: str
) -> None:
    where = "status = 'ready'"
    cfg = configure(tmp_path, db, "sweep", where=where)

    # A crashed run left one batch importing: it is re-run, its keys not claimed again.
    def claim(ledger: Ledger) -> list[str]:
        keys = [[key_of(i)] for i in (1, 2, 4, 5)]
        assert ledger.claim_keys("crashed", "items", "lake.items", keys) is not None
        return ["crashed"]

    crash(cfg, claim, importing=1)

    # Rows that appear behind the sweep's position once it is under way: only a
    # later pass can find them. Keys 1, 2 (ready) and 4 (not ready) are below
    # every key of the table.
    def late_rows() -> None:
        execute(db, "INSERT INTO items (id, status, updated_at) VALUES "
                    "(1, 'ready', 0), (2, 'ready', 0), (4, 'new', 0)")

    sink = InsertOnFirstNewBatch(late_rows, skip=["crashed"])
    first = run(cfg, sink)
    assert sink.action is None and first[0].batch_id == "crashed"
    visible = table_keys(db, where)
    assert {1, 2} <= set(visible) and 4 not in visible
    exactly_once(first, visible)  # every row stayed visible all along: each claimed once
    assert len(first) > len(visible) // MAX_ITEMS and all(m.kind == "keys" for m in first)

    # A new daemon on the same ledger sweeps again and finds only rows new to it.
    assert run(cfg) == []
    insert(db, range(ROWS + 1, ROWS + 31))
    execute(db, "UPDATE items SET status = 'ready' WHERE id IN (9, 18)")  # became visible
    second = run(cfg)
    new = [key_of(i) for i in range(ROWS + 1, ROWS + 31) if ready(i)] + [9, 18]
    exactly_once(second, sorted(new))
    assert states(cfg) == {"done": len(first) + len(second)}


# -- incremental ---------------------------------------------------------------------


def test_incremental_claims_a_row_again_only_when_its_cursor_moves(
    tmp_path: Path, db: str
) -> None:
    cfg = configure(tmp_path, db, "incremental", cursor="updated_at")

    def claim(ledger: Ledger) -> list[str]:
        # Keys 3 and 6 at their current cursor values (1 and 2), left claimed.
        manifest = ledger.claim_keys(
            "crashed", "items", "lake.items", [[key_of(1)], [key_of(2)]], versions=["1", "2"]
        )
        assert manifest is not None
        return ["crashed"]

    crash(cfg, claim, importing=0)
    first = run(cfg)
    assert first[0].batch_id == "crashed"
    exactly_once(first, table_keys(db))
    assert len(first) > ROWS // MAX_ITEMS

    moved = [key_of(i) for i in (7, 400, 899)]
    touched = [key_of(i) for i in (8, 401)]
    execute(db, f"UPDATE items SET updated_at = 1000 WHERE id IN ({', '.join(map(str, moved))})")
    # Changed without moving its cursor: an incremental source cannot see it.
    execute(db, f"UPDATE items SET status = 'x' WHERE id IN ({', '.join(map(str, touched))})")
    insert(db, [ROWS + 1], at=500)
    second = run(cfg)
    exactly_once(second, sorted([*moved, key_of(ROWS + 1)]))

    ledger = Ledger(cfg.ledger)
    try:
        def versions(keys: list[int], version: str) -> set[str]:
            return ledger.reads.claimed_keys("items", [encode_key([k]) for k in keys], version)

        assert versions(moved, "1000") == {encode_key([k]) for k in moved}
        assert versions(touched, "1000") == set()
        # The earlier versions stay recorded: each (key, version) belongs to one batch.
        assert versions([key_of(7)], str(7 % 50)) == {encode_key([key_of(7)])}
        [progress] = ledger.reads.progress()
        assert progress.states == {"done": len(first) + len(second)}
    finally:
        ledger.close()
