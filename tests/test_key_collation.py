"""Keyset claims follow the source database's key order, not Python's.

A text key under a non-binary collation sorts unlike Python's ``str``:
MariaDB's default ``utf8mb4_general_ci`` and PostgreSQL's ICU or libc
collations put 'a' before 'B' and 'É' among the e's. The ledger's
high-water mark and the ranges claimed after it must follow the database's
order, or a daemon drops ranges as claimed already (rows never migrated) and
two daemons overlap (rows twice) or leave gaps (rows missing).

Each test walks a real table whose VARCHAR key holds mixed-case, accented and
punctuated values, and checks the claimed ranges against the database's own
``ORDER BY``: every row falls in exactly one range, and every range's row
count in the ledger is the number of rows it holds.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import ClaimConflict
from config.loader import load_config_text
from scheduler.ledger import Ledger, fingerprint
from scheduler.loop import MainLoop
from scheduler.source_opener import range_rows
from scheduler.strategy import build_strategy
from sinks.abc import MemorySink
from sources.queueing import QueueingLimitedSource
from sources.sql import SqlSource
from spark_jobs.common.manifest import Manifest
from tests.conftest import need
from tests.helpers import FakeClock
from tests.tcp_proxy import TcpProxy

# Mixed case, accents and punctuation: Python sorts uppercase, then '_', then
# lowercase, then accented letters; the collations here sort them as letters.
PREFIXES = ["a", "B", "c", "É", "e", "Z", "_x", "ö", "M", "d", "y"]
ROWS = 330  # 30 per prefix: a few dozen claims with the batch sizes below

CONFIG = """
ledger: sqlite:///ledger.db
sources:
  words: {{kind: sql, url: "{url}", table: words, key: code, target: lake.words,
           page_size: {page}, buffer: {{capacity: {capacity}, replenish_below: {page}}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: {batch}, max_wait: 10ms}}
backpressure: {{max_pending: 1000, resume_below: 500, max_importing_batches: 4}}
"""

# PostgreSQL's databases here use C.UTF-8 (byte order, as Python): the key
# column gets a collation of its own, the first of these the server has.
PG_COLLATIONS = ["und-x-icu", "en-x-icu", "en_US.utf8", "en_US.UTF-8", "en_US"]


def _keys() -> list[str]:
    return [f"{PREFIXES[i % len(PREFIXES)]}{i:03d}" for i in range(ROWS)]


@pytest.fixture(
    params=[
        pytest.param("mariadb", marks=pytest.mark.mariadb),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def words_url(request: pytest.FixtureRequest) -> str:
    """A database with ``words(code VARCHAR PRIMARY KEY, note)`` under a non-binary collation."""
    if request.param == "mariadb":
        url: str = request.getfixturevalue("mariadb_url")
        column = "code VARCHAR(40) NOT NULL"  # the database's default: utf8mb4_general_ci
    else:
        url = request.getfixturevalue("pg_url")
        column = f'code VARCHAR(40) COLLATE "{_pg_collation(url)}" NOT NULL'
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE TABLE words ({column} PRIMARY KEY, note VARCHAR(20))"))
            conn.execute(
                sa.text("INSERT INTO words (code, note) VALUES (:code, :note)"),
                [{"code": k, "note": f"n{i}"} for i, k in enumerate(_keys())],
            )
    finally:
        engine.dispose()
    keys = ordered_keys(url)
    assert sorted(keys) != keys, "the database orders these keys as Python does: no test"
    return url


def _pg_collation(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = set(conn.scalars(sa.text("SELECT collname FROM pg_collation")))
    finally:
        engine.dispose()
    usable = [name for name in PG_COLLATIONS if name in found]
    need(bool(usable), f"PostgreSQL has none of the collations {PG_COLLATIONS}")
    return usable[0]


def ordered_keys(url: str) -> list[str]:
    """Every key of ``words`` in the database's own order."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.scalars(sa.text("SELECT code FROM words ORDER BY code")))
    finally:
        engine.dispose()


def assert_each_row_claimed_once(url: str, manifests: list[Manifest]) -> None:
    """The ranges ``(lo, hi]``, read in the database's order, hold every row exactly once.

    Each range's row count in the ledger must be the rows it holds: progress
    and backpressure count them.
    """
    keys = ordered_keys(url)
    at = {key: i for i, key in enumerate(keys)}
    claimed: Counter[str] = Counter()
    miscounted = []
    for m in manifests:
        assert m.kind == "range" and m.hi is not None
        start = 0 if m.lo is None else at[m.lo[0]] + 1
        inside = keys[start : at[m.hi[0]] + 1]  # empty when hi is at or below lo
        claimed.update(inside)
        if m.items != len(inside):
            miscounted.append(f"({m.lo}, {m.hi}]: {m.items} rows claimed, {len(inside)} inside")
    missing = [k for k in keys if claimed[k] == 0]
    twice = sorted(k for k, n in claimed.items() if n > 1)
    assert not missing and not twice, (
        f"{len(missing)} rows never claimed, e.g. {missing[:5]}; "
        f"{len(twice)} claimed twice, e.g. {twice[:5]}"
    )
    assert not miscounted, miscounted[:5]


class Inline(Executor):
    """Runs each refill at once on the caller's thread: a buffer is full whenever it is read."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@dataclass
class Daemon:
    """One daemon's feeding side: its own ledger user, source walk, buffer and sink."""

    loop: MainLoop
    ledger: Ledger
    queue: QueueingLimitedSource
    source: SqlSource
    sink: MemorySink
    lost: list[ClaimConflict]

    def close(self) -> None:
        self.queue.stop(5)
        self.source.close()
        self.ledger.close()


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Make daemons on one ledger; closed at the end of the test."""
    made: list[Daemon] = []

    def make(
        url: str, owner: str, *, page: int, batch: int, inline: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> Daemon:  # fmt: skip
        text = CONFIG.format(url=url, page=page, batch=batch, capacity=3 * batch)
        cfg = load_config_text(text, str(tmp_path / "sluice.yaml"))
        src_cfg = cfg.sources["words"]
        ledger = Ledger(cfg.ledger, owner=owner)
        checkpoint = ledger.sources.register("words", fingerprint(src_cfg))
        after = None if checkpoint.high_water is None else tuple(checkpoint.high_water)
        source = SqlSource("words", src_cfg, after=after, range_rows=range_rows(src_cfg, cfg))
        holder: list[MainLoop] = []
        queue = QueueingLimitedSource(
            source, src_cfg.buffer.capacity, src_cfg.buffer.replenish_below,
            executor=Inline() if inline else None,
            on_refill=lambda: holder[0].notify() if holder else None,
        )  # fmt: skip
        sink = MemorySink()
        loop = MainLoop(cfg, {"words": queue}, build_strategy(cfg), ledger, sink,
                        {"words": checkpoint}, clock=clock)  # fmt: skip
        holder.append(loop)
        lost: list[ClaimConflict] = []
        claim = ledger.claim_range

        def watched_claim(*args: Any, **kwargs: Any) -> Any:
            try:
                return claim(*args, **kwargs)
            except ClaimConflict as conflict:
                lost.append(conflict)
                raise

        ledger.claim_range = watched_claim  # type: ignore[method-assign]
        daemon = Daemon(loop, ledger, queue, source, sink, lost)
        made.append(daemon)
        queue.start()
        return daemon

    yield make
    for daemon in made:
        daemon.close()


@pytest.mark.timeout(60)
def test_one_daemon_claims_every_row_once(words_url: str, daemons: Callable[..., Daemon]) -> None:
    # Each claim's last key sorts below the previous one's in Python as often
    # as not; the database's order is the walk's, so none may be dropped.
    daemon = daemons(words_url, "a", page=10, batch=30)
    daemon.loop.run(until_drained=True, drain_timeout=10)
    assert not daemon.lost
    assert_each_row_claimed_once(words_url, daemon.sink.submitted)


@pytest.mark.timeout(60)
def test_two_daemons_racing_on_one_table_claim_every_row_once(
    words_url: str, daemons: Callable[..., Daemon]
) -> None:
    # Two daemons walk the same table with different batch sizes and take
    # turns: each feeds one batch while the other waits, so nearly every
    # claim finds the mark moved by the other (a lost race), most often to a
    # key inside its own batch, now and then past all of it. The turns go in
    # the ratio of the batch sizes (four of a's 30 rows to three of b's 40)
    # so that neither walk runs away from the other. Refills run inline: the
    # turns, not timing, decide who claims what.
    a = daemons(words_url, "a", page=10, batch=30, inline=True)
    b = daemons(words_url, "b", page=20, batch=40, inline=True)
    for daemon in (a, b):
        daemon.loop.feeder.burst = 1  # a turn is one batch
    turns = [a, b, a, b, a, b, a]
    fed = 0
    for _ in range(ROWS):
        round_fed = sum([daemon.loop.feeder.feed_once() for daemon in turns])
        if not round_fed:
            break
        fed += round_fed
    else:
        pytest.fail("the daemons kept feeding after every row was read")
    assert a.queue.exhausted and b.queue.exhausted
    manifests = a.sink.submitted + b.sink.submitted
    assert_each_row_claimed_once(words_url, manifests)
    assert len(a.lost) + len(b.lost) >= 10, "the claims did not race"
    assert fed > len(manifests), "no batch was wholly claimed by the other daemon"
    # The ledger's mark ends at the last row, in the database's order.
    assert a.ledger.sources.checkpoint("words").high_water == [ordered_keys(words_url)[-1]]


def test_the_source_counts_rows_between_keys_in_its_own_order(
    words_url: str, daemons: Callable[..., Daemon]
) -> None:
    keys = ordered_keys(words_url)
    source = daemons(words_url, "a", page=10, batch=30).source
    # Two keys Python orders the other way round from the database.
    i, j = next((i, j) for i in range(ROWS) for j in range(i + 1, ROWS) if keys[i] > keys[j])
    assert source.rows_between((keys[i],), (keys[j],)) == j - i
    assert source.rows_between((keys[j],), (keys[i],)) == 0
    assert source.rows_between((keys[j],), (keys[j],)) == 0
    assert source.rows_between(None, (keys[j],)) == j + 1


@pytest.mark.timeout(60)
def test_a_lost_race_the_source_cannot_count_waits_and_claims_later(
    words_url: str, daemons: Callable[..., Daemon]
) -> None:
    keys = ordered_keys(words_url)
    parsed = sa.make_url(words_url)
    clock = FakeClock()
    with TcpProxy((parsed.host or "127.0.0.1", parsed.port or 0)) as proxy:
        daemon = daemons(proxy.url_for(words_url), "a", page=10, batch=30, inline=True,
                         clock=clock)  # fmt: skip
        # Another daemon claims the first 15 rows: half of our first batch.
        other = Ledger(daemon.loop.cfg.ledger, owner="other")
        theirs, _ = other.claim_range(
            "theirs", "words", "lake.words", other.sources.checkpoint("words"), [keys[14]], 15
        )
        other.close()
        buffered = daemon.queue.buffered
        proxy.pause()  # the source's database goes away
        assert daemon.loop.feeder.feed_once() is False
        # The claim was lost and the rows left could not be counted: the batch
        # went back to the buffer, and the source rests rather than be asked
        # again at once.
        assert daemon.lost and not daemon.sink.submitted
        assert daemon.queue.buffered == buffered
        refused = proxy.refused
        assert daemon.loop.feeder.feed_once() is False
        assert proxy.refused == refused, "a resting source was asked again"
        proxy.resume()
        clock.now += 2
        for _ in range(ROWS):
            if not daemon.loop.feeder.feed_once():
                break
        assert daemon.queue.exhausted
        assert daemon.sink.submitted[0].lo == [keys[14]]
        assert_each_row_claimed_once(words_url, [theirs, *daemon.sink.submitted])
