"""Parquet batches agree on each column's type: the table's established one.

An SQS field that is a number in one batch and text in the next used to
leave two files whose schemas Spark cannot merge: the table could not be
read. Now a batch is written in the types the table's files have; a value
that does not fit goes to the batch's rejects, naming the column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import ImportResult, run_import
from spark_jobs.load.parquet_types import rejects_path
from spark_jobs.load.write_parquet import file_tag
from tests.test_import_job import make_config


def _batch(name: str, *bodies: dict[str, Any]) -> Manifest:
    payloads = [json.dumps(b) for b in bodies]
    return Manifest(name, "src", "lake.ev", "payloads", len(payloads), payloads=payloads)


@pytest.mark.spark
@pytest.mark.parametrize("partition_by", [[], ["g"]])
def test_a_field_whose_json_type_changes_keeps_the_tables_type(
    spark: Any, tmp_path: Path, partition_by: list[str]
) -> None:
    cfg = make_config(
        {"kind": "sqs", "queue_url": "http://127.0.0.1:1/q", "key": "id", "target": "lake.ev"},
        {"kind": "parquet", "path": str(tmp_path), "partition_by": partition_by},
    )
    first = _batch("t-1", {"id": 1, "g": 0, "n": 5, "s": "x"}, {"id": 2, "g": 1, "n": 6, "s": "y"})
    # n arrives as text ("7" fits a bigint, "abc" does not), s as a number (fits text).
    second = _batch(
        "t-2",
        {"id": 3, "g": 0, "n": "7", "s": 8},
        {"id": 4, "g": 1, "n": "abc", "s": 9},
        {"id": 5, "g": 0, "n": None},
    )
    # n as a number with a fraction: 2.0 fits a bigint, 1.5 would be cut to 1.
    third = _batch("t-3", {"id": 6, "g": 1, "n": 1.5, "s": "z"}, {"id": 7, "g": 0, "n": 2.0})

    results = [run_import(spark, cfg, b) for b in (first, second, third)]

    assert [(r.rows_written, r.rows_rejected) for r in results] == [(2, 0), (2, 1), (1, 1)]
    read = spark.read.parquet(str(tmp_path / "ev"))
    assert dict(read.dtypes)["n"] == "bigint" and dict(read.dtypes)["s"] == "string"
    rows = sorted((r.id, r.n, r.s) for r in read.collect())
    assert rows == [(1, 5, "x"), (2, 6, "y"), (3, 7, "8"), (5, None, None), (7, 2, None)]

    rejects = Path(rejects_path(str(tmp_path / "ev"), file_tag("t-2"))).read_text().splitlines()
    assert len(rejects) == 1
    reject = json.loads(rejects[0])
    assert reject["batch_id"] == "t-2" and reject["source"] == "src"
    assert json.loads(reject["key"]) == [4]
    assert json.loads(reject["row"])["n"] == "abc"  # as the batch had it
    assert "column 'n' is bigint in the table" in reject["reason"]
    assert "(the batch has string)" in reject["reason"]
    third_reject = json.loads(
        Path(rejects_path(str(tmp_path / "ev"), file_tag("t-3"))).read_text()
    )
    assert "column 'n' is bigint" in third_reject["reason"]
    assert json.loads(third_reject["key"]) == [6]
    assert "(the batch has double)" in third_reject["reason"]

    # A re-run reconciles from the marker, its rejects still counted.
    assert run_import(spark, cfg, second) == ImportResult(
        "t-2", 0, 2, "lake.ev", skipped=True, rows_rejected=1
    )
