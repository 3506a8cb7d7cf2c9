"""Hot rows: an incremental source whose rows keep changing while sluice migrates it.

:class:`HotRows` is the :class:`~tests.chaos.harness.Migration` of one
PostgreSQL table, ``items`` (``mode: incremental``, cursor ``updated_at``
with the key as tie-break), into a table of the same shape in another
database. A :class:`Writer` thread keeps updating a set of hot rows (each
update bumps ``bumps`` and moves the cursor) and inserting new rows, which
it updates again soon after. :func:`churn` runs ``sluice run`` as a daemon
while the writer writes (killed and restarted meanwhile, if asked), lets it
catch up once the writer stopped, stops it, and runs ``--until-drained``
once more; :meth:`HotRows.verify` compares the target with the source row
by row, both ways.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.chaos.checks import Check, check_batches
from tests.chaos.harness import Migration, short_jvm
from tests.chaos.procs import Proc
from tests.chaos.scenarios import Injected

# 50 rows share each seeded cursor value: the key breaks the ties.
SEED = """
CREATE TABLE items (
    id bigint PRIMARY KEY,
    label text NOT NULL,
    amount numeric(12, 2),
    bumps integer NOT NULL,
    note text,
    updated_at timestamptz NOT NULL
);
CREATE INDEX items_cursor ON items (updated_at, id);
INSERT INTO items
SELECT i, 'item ' || i || ' «ü»', (i % 1000) / 4.0, 0,
       CASE WHEN i % 7 = 0 THEN NULL ELSE 'note ''' || i || '''' END,
       timestamptz '2024-01-01 00:00:00+00' + (i / 50) * interval '1 second'
FROM generate_series(1, {rows}) AS i;
"""

# One writer, one transaction at a time: cursor values commit in their order,
# the condition under which a cursor column can be read incrementally at all.
BUMP = sa.text("""
UPDATE items SET bumps = bumps + 1, label = 'item ' || id || ' v' || (bumps + 1),
       amount = coalesce(amount, 0) + 0.25,
       note = CASE WHEN bumps % 3 = 2 THEN NULL ELSE 'bumped ' || (bumps + 1) END,
       updated_at = clock_timestamp()
WHERE id = ANY(:ids)
""")
INSERT = sa.text("""
INSERT INTO items
SELECT g, 'new ' || g, g % 500, 0, NULL, clock_timestamp()
FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS g
""")

CONFIG = """\
ledger: {ledger}
work_dir: ./work
spark:
  master: local[2]
  max_concurrent_imports: 2
  conf: {{spark.sql.shuffle.partitions: "2"{spark_conf}}}
sources:
  items:
    kind: sql
    url: {source}
    table: items
    key: id
    mode: incremental
    cursor: updated_at
    sweep_pause: 1s
    page_size: 2000
    buffer: {{capacity: 4000, replenish_below: 1000}}
    target: warehouse.items
targets:
  warehouse:
    kind: jdbc
    url: {target}
batch: {{max_items: 1000, max_wait: 500ms}}
lease: {{ttl: 20s}}
"""


class HotRows(Migration):
    """``items`` (``rows`` rows, ``hot`` of them picked to change) migrated incrementally.

    ``make_db(name)`` creates a throwaway PostgreSQL database and returns its
    URL: one for the source, the ledger and the target each.
    """

    def __init__(self, name: str, folder: Path, make_db: Callable[[str], str], *, rows: int,
                 hot: int, rng: random.Random, size_label: str) -> None:
        super().__init__(name, folder, make_db("ledger"), make_db("target"))
        self.source_url = make_db("hot")
        self.rows = rows
        self.hot = sorted(rng.sample(range(1, rows + 1), hot))
        engine = sa.create_engine(self.source_url)
        try:
            with engine.begin() as conn:
                conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                    SEED.format(rows=int(rows)))
        finally:
            engine.dispose()
        self.config.write_text(CONFIG.format(
            ledger=self.ledger_url, source=self.source_url, target=self.target_url,
            spark_conf=short_jvm(size_label),
        ))

    def caught_up(self) -> bool:
        """No batch unfinished, and every row in the target at its source version."""
        if set(self.states()) - {"done"}:
            return False
        try:
            with self.target() as conn:
                target = {key: bumps for key, bumps in conn.execute(
                    sa.text("SELECT id, bumps FROM items"))}
        except sa.exc.ProgrammingError:  # sluice has not created the table yet
            return False
        return _bumps(self.source_url) == target

    def verify(self) -> Check:
        """The target against the source, row by row, both ways (see :func:`compare`)."""
        check = Check()
        with self.target() as conn:
            check_batches(self, conn, check)
            compare(conn, _rows(self.source_url), check)
        with self.ledger() as conn:
            versions, keys = conn.execute(sa.text(
                "SELECT count(*), count(DISTINCT key) FROM sluice_keys WHERE source = 'items'"
            )).one()
        check.notes.append(f"versions migrated: {versions:,} of {keys:,} keys")
        return check


def compare(conn: sa.Connection, source: dict[Any, dict[str, Any]], check: Check) -> None:
    """The target's ``items`` against the source's rows: missing, extra, stale, duplicate rows.

    The source rows go into a copy of the target table (``LIKE``), so that
    the target database converts them as it converted the migrated ones;
    then ``EXCEPT`` both ways over whole rows, in the target database.
    """
    check.rows_checked += len(source)
    if not conn.scalar(sa.text("SELECT to_regclass('items') IS NOT NULL")):
        check.missing += len(source)
        check.problems.append("items: no such table in the target")
        return
    columns = sorted(c["name"] for c in sa.inspect(conn).get_columns("items"))
    wanted = sorted(next(iter(source.values())))
    if columns != wanted:
        check.problems.append(f"items: columns {columns}, expected {wanted}")
        return
    conn.exec_driver_sql("CREATE SCHEMA IF NOT EXISTS chaos_expected")
    conn.exec_driver_sql("DROP TABLE IF EXISTS chaos_expected.items")
    conn.exec_driver_sql("CREATE TABLE chaos_expected.items (LIKE public.items)")
    holder = sa.Table("items", sa.MetaData(), autoload_with=conn, schema="chaos_expected")
    rows = list(source.values())
    for start in range(0, len(rows), 5_000):
        conn.execute(holder.insert(), rows[start : start + 5_000])
    conn.commit()
    total, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT id) FROM items")).one()
    check.duplicates += total - distinct
    missing, extra, stale = conn.execute(sa.text("""
        WITH only_source AS (SELECT * FROM chaos_expected.items EXCEPT SELECT * FROM public.items),
             only_target AS (SELECT * FROM public.items EXCEPT SELECT * FROM chaos_expected.items)
        SELECT (SELECT count(*) FROM only_source s
                WHERE NOT EXISTS (SELECT 1 FROM public.items t WHERE t.id = s.id)),
               (SELECT count(*) FROM only_target t
                WHERE NOT EXISTS (SELECT 1 FROM chaos_expected.items s WHERE s.id = t.id)),
               (SELECT count(*) FROM only_source s
                WHERE EXISTS (SELECT 1 FROM public.items t WHERE t.id = s.id))
    """)).one()
    check.missing += missing
    if missing:
        check.problems.append(f"items: {missing} rows of the source missing in the target")
    if extra:
        check.problems.append(f"items: {extra} rows in the target not in the source")
    if stale:
        e, t = conn.execute(sa.text(
            "SELECT ROW(e.*)::text, ROW(t.*)::text FROM chaos_expected.items e "
            "JOIN public.items t USING (id) WHERE ROW(e.*)::text IS DISTINCT FROM ROW(t.*)::text "
            "ORDER BY id LIMIT 1"
        )).one()
        check.problems.append(f"items: {stale} rows stale in the target, e.g. source {e} "
                              f"target {t}")
    check.notes.append(f"{missing} missing, {extra} extra, {stale} stale rows "
                       "(EXCEPT both ways, every column)")


class Writer:
    """A thread that changes ``items`` until stopped.

    Every ``every`` s, one transaction bumps ``per_tx`` rows (all but one
    from ``hot``, one among the last 20 rows it inserted) and inserts
    ``new_per_tx`` rows with keys from ``next_id`` on. An error ends the
    thread and is raised by :meth:`stop`.
    """

    def __init__(self, url: str, hot: list[int], next_id: int, rng: random.Random, *,
                 per_tx: int = 5, new_per_tx: int = 2, every: float = 0.05) -> None:
        self.url = url
        self.hot = hot
        self.first_new = self.next_id = next_id
        self.rng = rng
        self.per_tx, self.new_per_tx, self.every = per_tx, new_per_tx, every
        self.updates = self.inserts = self.transactions = 0
        self.bumped: set[int] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hot-writer", daemon=True)

    def start(self) -> None:
        """Start writing."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the transaction under way; raise what ended the thread, if anything."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the hot-row writer did not stop"
        if self.error is not None:
            raise AssertionError(f"the hot-row writer failed: {self.error!r}") from self.error

    def summary(self) -> str:
        """What it wrote, for the scenario's notes."""
        return (f"writer: {self.transactions} transactions, {self.updates} updates of "
                f"{len(self.bumped)} rows ({len(self.hot)} hot), {self.inserts} rows inserted")

    def _run(self) -> None:
        engine = sa.create_engine(self.url)
        try:
            with engine.connect() as conn:
                while not self._stop.wait(self.every):
                    fresh = range(max(self.first_new, self.next_id - 20), self.next_id)
                    ids = self.rng.sample(self.hot, self.per_tx - 1)
                    if fresh:
                        ids.append(self.rng.choice(fresh))
                    hi = self.next_id + self.new_per_tx - 1
                    with conn.begin():
                        conn.execute(BUMP, {"ids": ids})
                        conn.execute(INSERT, {"lo": self.next_id, "hi": hi})
                    self.next_id = hi + 1
                    self.transactions += 1
                    self.updates += len(ids)
                    self.inserts += self.new_per_tx
                    self.bumped.update(ids)
        except BaseException as error:  # stop() raises it in the test's thread
            self.error = error
        finally:
            engine.dispose()


def churn(sc: HotRows, rng: random.Random, injected: Injected, *, seconds: float,
          kills: int, timeout: float = 900) -> None:
    """The daemon migrates while the writer writes for ``seconds`` s, then catches up.

    The writer starts once the first batch is done; ``kills`` times, at
    seeded moments of its run, the daemon's whole process group is killed
    (``kill -9``) and a new daemon started. Once the writer stopped, the
    daemon must bring every row to its last version (the harness's "drained":
    no batch unfinished, every row at its source ``bumps``); then it is
    stopped with SIGTERM (exit 143), and a ``--until-drained`` run must end
    with exit 0.
    """
    proc = sc.start("daemon-1", until_drained=False)
    sc.wait_for("the first batch is done", lambda: sc.states()["done"] >= 1, proc, timeout)
    writer = Writer(sc.source_url, sc.hot, sc.rows + 1, rng)
    writer.start()
    began = time.monotonic()
    try:
        for n, at in enumerate(sorted(rng.uniform(0.2, 0.8) * seconds for _ in range(kills)), 1):
            _runs_until(sc, proc, began + at)
            proc.kill()
            injected.kills += 1
            injected.notes.append(f"kill {n}: {at:.0f} s into the writes, "
                                  f"{sc.states()['done']} batches done")
            proc = sc.start(f"daemon-{n + 1}", until_drained=False)
        _runs_until(sc, proc, began + seconds)
    finally:
        writer.stop()
    stopped = time.monotonic()
    injected.notes.append(writer.summary())
    sc.wait_for("the daemon caught up with the writes", sc.caught_up, proc, timeout)
    resumed = sum(p.output().count("resuming batch") for p in sc.procs)
    injected.notes.append(f"caught up {time.monotonic() - stopped:.1f} s after the writer "
                          f"stopped; batches a killed daemon left unfinished, resumed: {resumed}")
    proc.stop()
    code = proc.wait(120)
    assert code == 143, f"{sc.name}: SIGTERM: exit {code}, not 143\n{proc.tail()}"
    proc.wait_group_gone()
    final = sc.run_to_end("until-drained")
    imported = re.search(r"sluice: ([\d,]+) rows in", final.output())
    injected.notes.append("then --until-drained: exit 0, "
                          f"{imported.group(1) if imported else '?'} rows imported")


def _runs_until(sc: HotRows, proc: Proc, moment: float) -> None:
    """Let the daemon run until ``moment`` (monotonic); fail if it ends first."""
    left = moment - time.monotonic()
    if left > 0:
        code = proc.wait(left)
        assert code is None, f"{sc.name}: the daemon exited {code}\n{proc.tail()}"


def _rows(url: str) -> dict[Any, dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {r["id"]: dict(r) for r in conn.execute(sa.text("SELECT * FROM items"))
                    .mappings()}
    finally:
        engine.dispose()


def _bumps(url: str) -> dict[int, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {key: bumps for key, bumps in conn.execute(
                sa.text("SELECT id, bumps FROM items"))}
    finally:
        engine.dispose()
