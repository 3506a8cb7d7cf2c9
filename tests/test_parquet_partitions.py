"""Parquet targets with ``partition_by``: Hive-style folders, still every row once.

Each batch is one file per partition it touches, published by renames from
its staging folder; its marker in ``_sluice_commits/`` lists the files and
says when they are all in place. A re-run replaces exactly the batch's files,
including those of partitions its rows left.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyspark.sql.functions as F
import pytest

from config.errors import TargetError
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult, is_committed, run_import, target_table
from spark_jobs.load.filesystems import LocalFs
from spark_jobs.load.write import write_batch
from spark_jobs.read.extract import extract
from tests.test_import_job import execute, make_config, rng

REGIONS = ("eu", "us", "apac")


def _seed(url: str, n: int = 120) -> None:
    execute(
        url,
        "CREATE TABLE events (id INTEGER PRIMARY KEY, region TEXT, kind INTEGER, score REAL)",
        "INSERT INTO events VALUES (:id, :region, :kind, :score)",
        rows=[
            # Some rows without a region: Spark's __HIVE_DEFAULT_PARTITION__ folder.
            {"id": i, "region": None if i % 29 == 0 else REGIONS[i % 3], "kind": i % 2,
             "score": i / 4}
            for i in range(1, n + 1)
        ],
    )  # fmt: skip


def _files(table: Path) -> list[str]:
    """The table's visible data files, relative to it (what a reader lists)."""
    return sorted(
        str(p.relative_to(table))
        for p in table.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(table).parts)
    )


def _rows(spark: Any, table: Path) -> list[tuple[Any, ...]]:
    read = spark.read.parquet(str(table))
    return sorted(
        (r["id"], r["region"], r["kind"], r["score"]) for r in read.collect()
    )


@pytest.mark.spark
def test_partitioned_batches_read_back_once_and_reruns_replace_their_files(
    spark: Any, sqlite_url: Callable[[str], str], tmp_path: Path
) -> None:
    source = sqlite_url("source")
    _seed(source)
    lake = tmp_path / "lake"
    cfg = make_config(
        {"kind": "sql", "url": source, "table": "events", "key": "id", "target": "lake.events"},
        {"kind": "parquet", "path": str(lake), "partition_by": ["region", "kind"]},
    )
    batches = [
        rng(f"p/{i}", lo, hi, target="lake.events")
        for i, (lo, hi) in enumerate([(None, [40]), ([40], [80]), ([80], [120])])
    ]
    table = lake / "events"

    results = [run_import(spark, cfg, b) for b in batches]

    assert [r.rows_written for r in results] == [40, 40, 40]
    expected = [
        (i, None if i % 29 == 0 else REGIONS[i % 3], i % 2, i / 4) for i in range(1, 121)
    ]
    assert _rows(spark, table) == expected  # every row once, partition columns included
    files = _files(table)
    assert "region=eu/kind=0/batch-p_2f0.parquet" in files
    assert "region=__HIVE_DEFAULT_PARTITION__/kind=1/batch-p_2f0.parquet" in files  # id 29
    assert all(f.rsplit("/", 1)[1].startswith("batch-p_2f") for f in files)
    marker = json.loads((table / "_sluice_commits" / "p_2f1.json").read_text())
    assert marker["published"] is True and marker["rows"] == 40
    assert sorted(marker["files"]) == [f for f in files if "batch-p_2f1." in f]
    assert not [p for p in table.iterdir() if p.name.startswith("_stage")]
    assert all(is_committed(cfg, b) for b in batches)

    # A committed batch is not imported again.
    assert run_import(spark, cfg, batches[0]) == ImportResult(
        "p/0", 0, 40, "lake.events", skipped=True
    )
    # A newer importer writing the same rows again replaces the same files.
    again = extract(spark, cfg.sources["src"], batches[1])
    written = write_batch(spark, again, target_table(cfg, batches[1]),
                          dataclasses.replace(batches[1], token=2))  # fmt: skip
    assert written.rows == 40
    assert _rows(spark, table) == expected
    assert _files(table) == files

    # Rows that moved to another partition (a sweep re-reads changed rows):
    # the batch's files in the partitions it left are gone, no row is twice.
    moved = again.withColumn("region", F.lit("mars"))
    write_batch(spark, moved, target_table(cfg, batches[1]),
                dataclasses.replace(batches[1], token=3))  # fmt: skip
    changed = [(i, "mars" if 40 < i <= 80 else r, k, s) for i, r, k, s in expected]
    assert _rows(spark, table) == changed
    assert [f for f in _files(table) if "batch-p_2f1." in f] == [
        "region=mars/kind=0/batch-p_2f1.parquet",
        "region=mars/kind=1/batch-p_2f1.parquet",
    ]
    assert is_committed(cfg, batches[1])


@pytest.mark.spark
def test_a_crash_while_publishing_leaves_the_batch_uncommitted_and_the_retry_fixes_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": str(tmp_path), "partition_by": ["day"]},
    )
    bodies = [json.dumps({"id": i, "day": f"2024-03-0{i % 4 + 1}", "v": i}) for i in range(40)]
    batch = Manifest("c-1", "src", "lake.ev", "payloads", 40, payloads=bodies)
    renames = 0
    replace = LocalFs.replace

    def dies_after_one(fs: LocalFs, src: str, dst: str) -> None:
        nonlocal renames
        renames += 1
        if renames == 2:
            raise OSError("the process died here")
        replace(fs, src, dst)

    monkeypatch.setattr(LocalFs, "replace", dies_after_one)
    with pytest.raises(OSError, match="died"):
        run_import(spark, cfg, batch)
    monkeypatch.undo()

    # One partition's file is in place, but the marker does not say published.
    assert len(_files(tmp_path / "ev")) == 1
    assert not is_committed(cfg, batch)
    result = run_import(spark, cfg, dataclasses.replace(batch, token=2))
    assert (result.rows_written, result.skipped) == (40, False)
    read = spark.read.parquet(str(tmp_path / "ev"))
    assert sorted(r.id for r in read.collect()) == list(range(40))
    assert len(_files(tmp_path / "ev")) == 4 and is_committed(cfg, batch)


@pytest.mark.spark
def test_partitioned_through_hadoop_filesystem(spark: Any, tmp_path: Path) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": f"file://{tmp_path}/lake", "partition_by": ["g"]},
    )
    for n in range(2):
        bodies = [json.dumps({"id": n * 10 + i, "g": i % 3}) for i in range(10)]
        run_import(spark, cfg, Manifest(f"h{n}", "src", "lake.ev", "payloads", 10, payloads=bodies))

    read = spark.read.parquet(f"file://{tmp_path}/lake/ev")
    assert sorted((r.id, r.g) for r in read.collect()) == [(i, i % 10 % 3) for i in range(20)]
    assert _files(tmp_path / "lake" / "ev") == [
        f"g={g}/batch-h{n}.parquet" for g in range(3) for n in range(2)
    ]
    assert is_committed(cfg, Manifest("h1", "src", "lake.ev", "payloads", 0))


@pytest.mark.spark
def test_partition_by_that_does_not_fit_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    def config(partition_by: list[str]) -> Any:
        return make_config(
            {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id",
             "target": "lake.ev"},
            {"kind": "parquet", "path": str(tmp_path), "partition_by": partition_by},
        )  # fmt: skip

    def batch(name: str) -> Manifest:
        bodies = [json.dumps({"id": i, "g": i % 2, "v": "x"}) for i in range(4)]
        return Manifest(name, "src", "lake.ev", "payloads", 4, payloads=bodies)

    with pytest.raises(TargetError, match=r"lake\.ev: targets\.lake\.partition_by names "
                                          r"column 'region', which the batch does not have"):
        run_import(spark, config(["region"]), batch("e-1"))
    with pytest.raises(TargetError, match="names every column of the batch"):
        run_import(spark, config(["id", "g", "v"]), batch("e-2"))
    assert not (tmp_path / "ev").exists() or _files(tmp_path / "ev") == []

    run_import(spark, config(["g"]), batch("e-3"))
    with pytest.raises(TargetError, match=r"partitioned by \['g'\], but .* is \['id'\]"):
        run_import(spark, config(["id"]), batch("e-4"))
    with pytest.raises(TargetError, match=r"partitioned by \['g'\], but .* is \['g', 'id'\]"):
        run_import(spark, config(["g", "id"]), batch("e-5"))
    with pytest.raises(TargetError, match="the table is partitioned .* is empty"):
        run_import(spark, config([]), batch("e-6"))

    other = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.flat"},
        {"kind": "parquet", "path": str(tmp_path)},
    )
    run_import(spark, other, dataclasses.replace(batch("f-1"), target="lake.flat"))
    partitioned = other.model_copy(
        update={"targets": {"lake": config(["g"]).targets["lake"]}}
    )
    with pytest.raises(TargetError, match="holds unpartitioned batches"):
        run_import(spark, partitioned, dataclasses.replace(batch("f-2"), target="lake.flat"))
