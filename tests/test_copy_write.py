"""Batches written into PostgreSQL by binary COPY: straight in, or staged; exactly once.

A keyset range into a table holding none of its keys is COPYed straight in,
with its commit record, in one transaction. Everything else (a re-run, a key
already there, a row the table refuses) takes the staged path: COPY into a
staging table, then the fenced upsert with its rejects. A kill -9 in the
middle of a COPY leaves nothing of the batch behind, and the restart
completes it once.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.models import SluiceConfig
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_group import TABLES, group_key, run_imports
from spark_jobs.jobs.import_job import ImportResult, target_table
from spark_jobs.load.target import Commit, StaleToken
from spark_jobs.load.write import committed_batch, committed_batches, write_batch
from spark_jobs.read.computed import apply_columns
from spark_jobs.read.extract import extract
from tests.helpers import wait_until
from tests.test_import_job import (
    ORDERS_DDL,
    ORDERS_INSERT,
    execute,
    make_config,
    order_rows,
    rng,
    scalar,
    text_rows,
)

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


def write_one(spark: Any, cfg: Any, manifest: Any) -> Any:
    """Extract one batch of source ``src`` and write it, as an import does."""
    source = cfg.sources["src"]
    rows = apply_columns(extract(spark, source, manifest), source.columns)
    return write_batch(spark, rows, target_table(cfg, manifest), manifest)


def orders_config(source_url: str, target_url: str) -> Any:
    """Source ``src``: the ``orders`` table keyed by ``id``, into the JDBC ``target_url``."""
    return make_config(
        {"kind": "sql", "url": source_url, "table": "orders", "key": "id"},
        {"kind": "jdbc", "url": target_url},
    )


def test_a_range_is_copied_straight_in_and_a_rerun_leaves_the_table_unchanged(
    spark: Any, pg_url: str, pg_target: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(400))
    cfg = orders_config(pg_url, pg_target)
    first = rng("c-1", None, [200], items=200)

    written = write_one(spark, cfg, first)
    # The table sluice made has the source's very types: its binary COPY goes in as it came.
    assert (written.rows, written.rejected, written.method) == (200, 0, "copy as stored")
    expected = text_rows(pg_url, "orders", ["id"], "id <= 200")
    assert text_rows(pg_target, "orders", ["id"]) == expected
    assert scalar(pg_target, "SELECT rows FROM _sluice_commits WHERE batch_id = 'c-1'") == 200

    # A new importer of the same batch (a takeover: a newer token) finds its
    # rows there: staged and upserted, the table as it was.
    again = write_one(spark, cfg, dataclasses.replace(first, token=2))
    assert (again.rows, again.rejected, again.method) == (200, 0, "staged copy")
    assert text_rows(pg_target, "orders", ["id"]) == expected
    assert scalar(pg_target, "SELECT token FROM _sluice_commits WHERE batch_id = 'c-1'") == 2
    assert scalar(pg_target, "SELECT count(*) FROM pg_tables "
                             "WHERE tablename LIKE '\\_sluice\\_stage%'") == 0  # fmt: skip

    # A key of the next range already in the table (another writer): staged.
    execute(pg_target, "INSERT INTO orders (id, customer) VALUES (300, 'elsewhere')")
    next_range = write_one(spark, cfg, rng("c-2", [200], [400], items=200))
    assert next_range.method == "staged copy" and next_range.rows == 200
    assert text_rows(pg_target, "orders", ["id"]) == text_rows(pg_url, "orders", ["id"])


def test_rows_the_table_refuses_in_a_copy_are_set_aside_and_the_rest_commits(
    spark: Any, pg_url: str, pg_target: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(120))
    # The table keeps notes of 12 characters at most: longer ones are refused.
    execute(pg_target, ORDERS_DDL.replace("note text", "note varchar(12)"))
    cfg = orders_config(pg_url, pg_target)
    long_notes = scalar(pg_url, "SELECT count(*) FROM orders WHERE length(note) > 12")
    assert 0 < long_notes < 120

    written = write_one(spark, cfg, rng("r-1", None, [120], items=120))
    assert written.method == "staged copy"
    assert (written.rows, written.rejected) == (120 - long_notes, long_notes)
    assert scalar(pg_target, "SELECT count(*) FROM orders") == 120 - long_notes
    assert scalar(pg_target, "SELECT count(*) FROM _sluice_rejects WHERE batch_id = 'r-1'") == (
        long_notes
    )
    assert scalar(pg_target, "SELECT count(*) FROM orders WHERE length(note) > 12") == 0
    # A group of batches asks the commits at once, and reads the same as one by one.
    target = target_table(cfg, rng("r-1", None, [120], items=120))
    assert committed_batches(target, ["r-1", "r-2"]) == {"r-1": committed_batch(target, "r-1")}
    assert committed_batch(target, "r-1") == Commit(1, 120 - long_notes, long_notes)


def test_ranges_waiting_together_load_in_one_spark_job_each_batch_on_its_own(
    spark: Any, pg_url: str, pg_target: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(500))
    cfg = orders_config(pg_url, pg_target)
    committed = rng("g-1", None, [100], items=100)
    write_one(spark, cfg, committed)
    # Another writer holds a key of g-3's range: that batch cannot go straight in.
    execute(pg_target, "INSERT INTO orders (id, customer) VALUES (250, 'elsewhere')")
    stale = rng("g-5", [400], [500], items=100)
    write_one(spark, cfg, dataclasses.replace(stale, token=2))  # a newer importer was first
    batches = [
        committed,
        rng("g-2", [100], [200], items=100),
        rng("g-3", [200], [300], items=100),
        rng("g-4", [300], [400], items=100),
        stale,
    ]
    assert len({group_key(cfg, m) for m in batches} - {None}) == 1

    sc = spark.sparkContext
    sc.setJobGroup("one-job-for-ranges", "test")
    try:
        outcomes = run_imports(spark, cfg, batches)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)

    done = {o.batch_id: o for o in outcomes if isinstance(o, ImportResult)}
    assert done["g-1"].skipped and done["g-1"].rows_written == 100
    assert [(done[b].skipped, done[b].rows_written) for b in ("g-2", "g-3", "g-4")] == [
        (False, 100)
    ] * 3
    assert isinstance(outcomes[4], StaleToken)
    assert text_rows(pg_target, "orders", ["id"]) == text_rows(pg_url, "orders", ["id"])
    assert scalar(pg_target, "SELECT count(*) FROM _sluice_commits") == 5
    # One job read g-2, g-3 and g-4 (g-1 and g-5 were already committed) and
    # COPYed g-2 and g-4; g-3 then went its own way: a direct try, a staged read.
    assert len(sc.statusTracker().getJobIdsForGroup("one-job-for-ranges")) == 3


def test_batches_of_several_tables_load_in_one_spark_job_on_their_read_partitions(
    spark: Any, pg_url: str, pg_target: str
) -> None:
    execute(pg_url, ORDERS_DDL, ORDERS_INSERT, rows=order_rows(300))
    execute(pg_url, "CREATE TABLE notes (id bigint PRIMARY KEY, body text)",
            "INSERT INTO notes VALUES (:id, :body)",
            rows=[{"id": i, "body": f"n{i}"} for i in range(1, 51)])  # fmt: skip
    cfg = SluiceConfig.model_validate({
        "sources": {
            "src": {"kind": "sql", "url": pg_url, "table": "orders", "key": "id",
                    "target": "wh.orders"},
            "notes": {"kind": "sql", "url": pg_url, "table": "notes", "key": "id",
                      "target": "wh.notes"},
        },
        "targets": {"wh": {"kind": "jdbc", "url": pg_target}},
    })  # fmt: skip
    # Another writer holds a key of o-3's range: that batch cannot go straight in.
    execute(pg_target, ORDERS_DDL, "INSERT INTO orders (id, customer) VALUES (250, 'elsewhere')")
    one = {"read_parts": 1}  # the budget lets each import read on one connection
    batches = [
        rng("o-1", None, [100], items=100, **one),
        rng("o-2", [100], [200], items=100, **one),
        rng("o-3", [200], [300], items=100, **one),
        Manifest("n-1", "notes", "wh.notes", "range", 50, 1, None, [50], read_parts=1),
    ]
    assert {group_key(cfg, m) for m in batches} == {TABLES}

    sc = spark.sparkContext
    sc.setJobGroup("one-job-for-tables", "test")
    try:
        outcomes = run_imports(spark, cfg, batches)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)

    assert [(o.batch_id, o.skipped, o.rows_written) for o in outcomes] == [  # type: ignore[union-attr]
        ("o-1", False, 100), ("o-2", False, 100), ("o-3", False, 100), ("n-1", False, 50)
    ]  # fmt: skip
    assert text_rows(pg_target, "orders", ["id"]) == text_rows(pg_url, "orders", ["id"])
    assert text_rows(pg_target, "notes", ["id"]) == text_rows(pg_url, "notes", ["id"])
    assert scalar(pg_target, "SELECT count(*) FROM _sluice_commits") == 4
    # One job loaded o-1, o-2 and n-1, of two tables, by one task (the batches'
    # read partitions); o-3 then went its own way: a direct try, a staged read.
    jobs = sorted(sc.statusTracker().getJobIdsForGroup("one-job-for-tables"))
    assert len(jobs) == 3
    [stage] = sc.statusTracker().getJobInfo(jobs[0]).stageIds
    assert sc.statusTracker().getStageInfo(stage).numTasks == 1


SLUICE = str(Path(sys.executable).parent / "sluice")
ROWS = 100_000


def _copying(engine: sa.Engine, database: str) -> int:
    """Rows the COPY into ``database`` has processed so far (0 when none runs)."""
    with engine.connect() as conn:
        return int(conn.execute(
            sa.text("SELECT coalesce(max(tuples_processed), 0) FROM pg_stat_progress_copy "
                    "WHERE datname = :db AND command = 'COPY FROM'"), {"db": database},
        ).scalar_one())  # fmt: skip


@pytest.mark.timeout(300)
def test_a_kill_during_the_copy_leaves_no_row_of_the_batch_and_a_restart_copies_it_once(
    tmp_path: Path, pg_url: str, pg_target: str
) -> None:
    execute(
        pg_url,
        "CREATE TABLE orders (id bigint PRIMARY KEY, note text, amount numeric(12,2))",
        "INSERT INTO orders SELECT i * 3, repeat('ü', 100) || i, i / 100.0 "
        "FROM generate_series(1, 100000) AS i",
    )
    (tmp_path / "sluice.yaml").write_text(
        f"""
sources:
  orders: {{kind: sql, url: "{pg_url}", table: orders, key: id, target: wh.orders}}
targets:
  wh: {{kind: jdbc, url: "{pg_target}"}}
batch: {{max_items: {ROWS}}}
"""
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    admin = sa.create_engine(pg_target)
    database = sa.make_url(pg_target).database or ""
    log = (tmp_path / "first.log").open("wb")
    proc = subprocess.Popen(
        [SLUICE, "run", "sluice.yaml"], cwd=tmp_path, env=env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        # Another process's COPY has no hook: polled, finely, for it is short.
        wait_until(lambda: proc.poll() is not None or _copying(admin, database) > 0,
                   "a COPY into the target", timeout=180, poll=0.01)
        assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    with admin.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM orders")).scalar_one()
        committed = conn.execute(sa.text(
            "SELECT coalesce(sum(rows), 0) FROM _sluice_commits WHERE rows >= 0")).scalar_one()
    # The COPY's transaction died with it: no row of it is there. (A batch whose commit came
    # before the kill is there whole: the two workers start together and one may be done.)
    assert rows == committed < 100_000

    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digest(pg_target) == _digest(pg_url)
    with admin.connect() as conn:
        assert conn.execute(sa.text("SELECT sum(rows) FROM _sluice_commits")).scalar_one() == ROWS
    admin.dispose()


def _digest(url: str) -> tuple[int, str]:
    """Row count and a digest of every row of ``orders``, computed by the server."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            count, digest = conn.execute(sa.text(
                "SELECT count(*), md5(string_agg(concat_ws(',', id, note, amount), '|' "
                "ORDER BY id)) FROM orders"
            )).one()  # fmt: skip
    finally:
        engine.dispose()
    return int(count), str(digest)


def _arrow_stream(ids: list[int], end: bool) -> bytes:
    """An Arrow IPC stream of two record batches, with or without its end-of-stream marker."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    batch = pa.record_batch({"id": pa.array(ids, pa.int64())})
    writer = pa.ipc.new_stream(sink, batch.schema)
    writer.write_batch(batch)
    writer.write_batch(batch)
    if end:
        writer.close()
    return sink.getvalue().to_pybytes()


def test_a_copy_whose_input_ends_before_sparks_end_of_stream_commits_nothing() -> None:
    """What a worker sees when the JVM feeding it dies, or Spark's read fails,
    between two Arrow batches: a stream that just stops. The COPY must fail
    (and roll back) instead of committing the rows it got; after a whole
    input, Spark's end of stream is still there for PySpark's worker to read."""
    import socket
    import struct
    import threading

    import pyarrow as pa

    from spark_jobs.tasks import task_input

    end_of_stream = struct.pack("!i", -4)

    def rows_read(sent: bytes, then: bytes = b"") -> tuple[list[int], bytes]:
        ours, spark = socket.socketpair()
        with ours, spark:
            spark.sendall(sent)
            if not then:
                spark.shutdown(socket.SHUT_WR)
            infile = ours.makefile("rb", buffering=len(sent) - 2 if then else 65536)
            if then:  # the rest of the end of stream arrives while the task looks for it
                threading.Timer(0.2, lambda: (spark.sendall(then), spark.shutdown(1))).start()
            reader = pa.ipc.open_stream(infile)
            batches = task_input.whole(iter(reader), infile)
            ids = [i for batch in batches for i in batch.column("id").to_pylist()]
            return ids, infile.read()

    whole = _arrow_stream([1, 2, None], end=True)
    assert rows_read(whole + end_of_stream) == ([1, 2, None] * 2, end_of_stream)
    # The worker's buffer ends two bytes into the end of stream; the rest is late.
    assert rows_read(whole + end_of_stream[:2], then=end_of_stream[2:]) == (
        [1, 2, None] * 2,
        end_of_stream,
    )
    for cut in (whole, _arrow_stream([1, 2, None], end=False)):
        with pytest.raises(task_input.InputCutShort, match="before Spark's end of stream"):
            rows_read(cut)


@pytest.mark.spark
def test_a_spark_task_finds_its_input_ended_by_spark_after_every_row(spark: Any) -> None:
    import pyarrow as pa

    from spark_jobs.tasks.task_input import input_complete, task_input

    frame = spark.range(0, 30_000, numPartitions=3).withColumnRenamed("id", "key").coalesce(1)

    def task(batches: Any) -> Any:
        infile = task_input()
        assert infile is not None
        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pylist([{"rows": rows, "complete": input_complete(infile)}])

    assert [tuple(r) for r in frame.mapInArrow(task, "rows long, complete boolean").collect()] == [
        (30_000, True)
    ]
    # Outside a Spark task there is no input of Spark's to look at.
    assert task_input() is None
