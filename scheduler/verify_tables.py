"""``sluice verify``'s run over a config's tables: each table's scope from the ledger, its
comparison, its repair.

Each SQL source's table is compared with its target table, first by the
servers' own row sums where both can count and hash their rows
(:mod:`spark_jobs.verify.sums`: equal, and the table is proven without Spark),
else by a Spark job (:mod:`spark_jobs.verify.compare`: per-bucket counts and
hashes, then key by key in the buckets that differ), over what the ledger says
is done, while daemons may go on running: a keyset source up to its oldest
unfinished range, and keys that unfinished batches hold are left out (``in
flight``). A sweep or incremental source's missing key that no batch ever held
is ``pending`` (not migrated yet), not missing. Rows the target refused
(``_sluice_rejects``) are ``rejected``, apart from ``missing``.

Repairs queue the missing and different keys as key-list batches in the
ledger, each claim under a version of its own (a key repaired twice is
claimed twice), for a daemon (running, or the next ``sluice run``) to import
through the upsert path; rows only the target has may be deleted from a JDBC
target (:mod:`spark_jobs.verify.deletes`). The part of a verify that reads or
writes the ledger lives here, the rest in the verify wing of the data plane
(``spark_jobs/verify/``); the command (``scheduler/commands/verify.py``) only
reads its arguments and prints.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, nullcontext
from typing import TYPE_CHECKING, Any

from config.models import ParquetTargetConfig, SqlSourceConfig
from scheduler.ledger import Ledger
from scheduler.ledger.lookup import reader_engine
from scheduler.ledger.scope import DoneScope, done_scope, never_claimed
from scheduler.readonly import readonly_engine
from scheduler.verify_limits import ReadShare, read_paced
from scheduler.verify_marks import Marked, StreamMarks
from spark_jobs.common.keyorder import key_typer
from spark_jobs.common.manifest import Manifest
from spark_jobs.jobs.import_job import target_table
from spark_jobs.load.target import TargetTable
from spark_jobs.tasks.local_tasks import started
from spark_jobs.verify.compare import KINDS, compare, encoded
from spark_jobs.verify.deletes import chunks, delete_extras
from spark_jobs.verify.read import Scope, parts_for, read_sides, rejected_keys
from spark_jobs.verify.report import TableReport, VerifyReport
from spark_jobs.verify.sums import proven_equal

if TYPE_CHECKING:
    import sqlalchemy as sa
    from pyspark.sql import SparkSession

    from config.models import SluiceConfig

log = logging.getLogger("sluice.verify")

FOLLOW_UPS = 3
"""Passes over the rows changed while a verify of a stream read (see :func:`_verify_one`)."""
FEW_CHANGED = 20_000
"""Changed rows few enough for a verify to stop comparing them again."""

_UNCHECKED_MISSING = 1_000_000
"""Above this many missing keys, a sweep source's are not looked up one by one in the ledger."""


def verify_config(
    spark: SparkSession,
    cfg: SluiceConfig,
    names: Iterable[str] | None = None,
    *,
    repair: bool = False,
    apply_deletes: bool = False,
    share: ReadShare | None = None,
    final: bool = False,
) -> VerifyReport:
    """Verify the named sources (default: all) on ``spark``; repair and delete if asked.

    ``final`` (the cutover's: the writes are stopped, every stream applied to its end): a
    stream that a verify proved equal up to some position has only its rows changed since
    compared, and none of its differences is in flight (:mod:`scheduler.verify_marks`).

    Up to ``spark.max_concurrent_imports`` tables are compared at once, each
    reading with its share of its database's ``limits.max_connections``, and
    never more tables of one database at once than its connections allow.
    With daemons running, the limits are shared with them, and
    ``max_rows_per_s`` paces the source's reads (:mod:`.verify_limits`;
    ``share``: one made for the test's clock).
    """
    chosen = list(names or cfg.sources)
    sql = {n: s for n in chosen if isinstance(s := cfg.sources[n], SqlSourceConfig)}
    workers = max(1, min(cfg.spark.max_concurrent_imports, len(sql)))
    parts = {name: max(1, parts_for(source) // workers) for name, source in sql.items()}
    rooms: dict[str, int] = {}
    for name, source in sql.items():
        room = max(1, source.limits.max_connections // parts[name])
        rooms[source.url] = min(room, rooms.get(source.url, room))
    gates = {url: threading.BoundedSemaphore(room) for url, room in rooms.items()}
    # Read-only, and never created here; a pool of its own, one connection per worker.
    found = readonly_engine(cfg.ledger)
    ledger = None if found is None else reader_engine(cfg.ledger, workers + 1)
    if found is not None:
        found.dispose()
    reads = share or ReadShare(cfg, sql)

    def one(name: str) -> TableReport:
        source = sql.get(name)
        if source is None:
            note = "an SQS source cannot be read again: not verified"
            return TableReport(name, cfg.sources[name].target, note=note)
        try:
            with gates[source.url]:
                return _verify_one(spark, cfg, name, source, ledger, reads, parts[name], repair,
                                   apply_deletes, final)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - this table's outcome; the others go on
            return TableReport(name, source.target, error=_why(error))

    try:
        with reads, ThreadPoolExecutor(workers, thread_name_prefix="verify") as pool:
            return VerifyReport(list(pool.map(one, chosen)))
    finally:
        if ledger is not None:
            ledger.dispose()


def _verify_one(
    spark: SparkSession, cfg: SluiceConfig, name: str, source: SqlSourceConfig,
    ledger: sa.Engine | None, share: ReadShare, parts: int, repair: bool, apply_deletes: bool,
    final: bool = False,
) -> TableReport:  # fmt: skip
    target = target_table(cfg, Manifest("verify", name, source.target, "keys", 0))
    marks = StreamMarks.of(name, source, target)
    if marks is None:
        return _compared(spark, cfg, name, source, target, ledger, share, parts, repair,
                         apply_deletes)  # fmt: skip
    typed = key_typer(source.url, source.table, source.key_columns)
    with closing(marks):
        began = time.monotonic()
        first = Marked(marks, delta=final, final=final)
        report = _compared(spark, cfg, name, source, target, ledger, share, parts, repair,
                           apply_deletes, first, typed)  # fmt: skip
        log.info("source %s: %s in %.1f s", name, report.scope, time.monotonic() - began)
        if final:
            return report
        # The rows the application changed while this verify read are compared again, as
        # the cutover would, until few are left: the mark kept is then a recent one.
        for _ in range(FOLLOW_UPS):
            began = time.monotonic()
            marked = Marked(marks, delta=True, final=False)
            if not marked.ready(target, typed):
                break
            report = _compared(spark, cfg, name, source, target, ledger, share, parts, repair,
                               apply_deletes, marked, typed)  # fmt: skip
            log.info("source %s: the %s rows changed while it read compared again in %.1f s",
                     name, len(marked.listed or ()), time.monotonic() - began)  # fmt: skip
            if len(marked.listed or ()) <= FEW_CHANGED:
                break
        return report


def _compared(
    spark: SparkSession, cfg: SluiceConfig, name: str, source: SqlSourceConfig, target: TargetTable,
    ledger: sa.Engine | None, share: ReadShare, parts: int, repair: bool, apply_deletes: bool,
    marked: Marked | None = None, typed: Callable[[Sequence[Any]], list[Any]] | None = None,
) -> TableReport:  # fmt: skip
    done = done_scope(ledger, name) if ledger is not None else DoneScope(known=False)
    scope, said = _scope(source, done)
    typed = typed or key_typer(source.url, source.table, source.key_columns)
    if marked is not None:
        scope, said = marked.scope(target, typed, scope, said)
    # A paced read is compared in Spark; a stream's may be in flight (see verify_marks).
    sums = not share.paces(name) or scope.keys is not None
    if sums and (marked is None or marked.sums_worth()):
        with share.reading(name, parts) as held:
            proof = proven_equal(source, target, scope, held)
        if proof is not None:
            rows = (proof.rows, proof.rows)
            if marked is not None:
                marked.proven()
                if scope.keys is not None:
                    rows = marked.rows  # every row: the rest proven before
            return TableReport(name, target.label, *rows, scope=said,
                               first={kind: [] for kind in KINDS})  # fmt: skip
    spark = started(spark)  # compared in Spark: the session itself from here on
    with ExitStack() as releases:  # Spark's kept frames, dropped once the report is made
        kept = None if scope.nothing or scope.keys is not None else read_paced(
            spark, share, name, source, scope.upto, parts)  # fmt: skip
        if kept is not None:
            releases.callback(kept.release)
        # Read at its rate already: the comparison reads the kept rows, not the database.
        with nullcontext(parts) if kept is not None else share.reading(name, parts) as held:
            mine, theirs = read_sides(spark, source, target, scope, held,
                                      None if kept is None else kept.rows,
                                      spare=not share.bounds_connections(name))  # fmt: skip
            diff = compare(spark, mine, theirs, source.key_columns, label=target.label,
                           held=done.held, rejected=rejected_keys(spark, target, name),
                           typed=typed)  # fmt: skip
        releases.callback(diff.release)
        if marked is not None:
            marked.settle(diff, typed)
        if (
            source.mode != "keyset"
            and ledger is not None
            and (0 < diff.counts["missing"] <= _UNCHECKED_MISSING)
        ):
            missing = [encoded(k) for k in diff.keys(["missing"])]
            diff.set_pending([json.loads(t) for t in never_claimed(ledger, name, missing)])
        counts = diff.counts
        checked, target_rows = diff.checked, diff.target_rows
        if scope.keys is not None and marked is not None:
            checked, target_rows = marked.rows  # every row: the rest proven before
        report = TableReport(
            name, target.label, checked, target_rows, missing=counts["missing"],
            extra=counts["extra"], different=counts["different"], rejected=counts["rejected"],
            duplicate=counts["duplicate"],
            in_flight=diff.in_flight, pending=diff.pending, first=diff.first, scope=said,
            read_rate=None if kept is None else kept.rate,
        )  # fmt: skip
        if repair and (report.missing or report.different):
            _repair(cfg, name, source, target, diff, report)
        if apply_deletes and report.extra:
            delete_extras(source, target, diff.keys(["extra"]), done.held, report)
        return report


def _scope(source: SqlSourceConfig, done: Any) -> tuple[Any, str]:
    """The rows compared, and how the report says so."""
    if source.mode != "keyset" or not done.known:
        return Scope(), "every row" if done.known else "every row (the ledger has no record)"
    if not done.ranged:
        return Scope(nothing=True), "no row: no range of it is done yet"
    if done.upto is None:
        return Scope(nothing=True), "no row: its first range is not done yet"
    if done.open_range:
        return Scope(upto=done.upto), f"keys up to {done.upto}: later ranges are not done yet"
    return Scope(upto=done.upto, target_open=True), f"keys up to {done.upto}, all done"


def _repair(cfg: SluiceConfig, name: str, source: SqlSourceConfig, target: Any, diff: Any,
            report: TableReport) -> None:  # fmt: skip
    """Queue the missing and different keys as key-list batches under a repair version."""
    kinds = ["missing", "different"]
    if isinstance(target.config, ParquetTargetConfig) and report.different:
        # A Parquet table is appended to: a changed row written again would be there twice.
        kinds = ["missing"]
        report.note = (f"{report.different} different rows not repaired: a Parquet target "
                       "cannot replace a row; rewrite the table or migrate it again")  # fmt: skip
    version = f"repair:{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}:{uuid.uuid4().hex[:8]}"
    # Never registered as an owner: a daemon takes the repair batches over at once.
    ledger = Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl,
                    owner=f"verify:{socket.gethostname()}:{os.getpid()}")  # fmt: skip
    try:
        for chunk in chunks(diff.keys(kinds), cfg.batch.key_items):
            claimed = ledger.claim_keys(uuid.uuid4().hex, name, source.target, chunk,
                                        versions=[version] * len(chunk))  # fmt: skip
            if claimed is not None:
                report.repair_batches += 1
                report.repaired_keys += claimed.items
    finally:
        ledger.close()


def _why(error: BaseException) -> str:
    """An error's first line, the database's or the JVM's own words where there are some."""
    cause = getattr(error, "java_exception", None) or getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines() or [type(error).__name__]
    return f"{type(error).__name__}: {lines[0][:400]}"
