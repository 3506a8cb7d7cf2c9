"""``sluice verify CONFIG [--source S] [--repair] [--apply-deletes] [--json]``: prove the target.

Each SQL source's table is compared with its target table, first by the
servers' own row sums where both are PostgreSQL (:mod:`spark_jobs.verify_sums`:
equal, and the table is proven without Spark), else by a Spark job
(:mod:`spark_jobs.verify`: per-bucket counts and hashes, then key by key in
the buckets that differ), over what the ledger says is done, while daemons
may go on running: a keyset source up to its oldest unfinished range, and
keys that unfinished batches hold are left out (``in flight``). A sweep or
incremental source's missing key that no batch ever held is ``pending``
(not migrated yet), not missing. Rows the target refused
(``_sluice_rejects``) are ``rejected``, apart from ``missing``. Exit 0 only
when every table is equal.

``--repair`` queues the missing and different keys as key-list batches in
the ledger, each claim under a version of its own (a key repaired twice is
claimed twice), for a daemon (running, or the next ``sluice run``) to import
through the upsert path. Rows only the target has (deleted in the source)
are reported; ``--apply-deletes`` deletes them from a JDBC target. SQS
sources cannot be read again, so they are not verified.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import ExitStack, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from config.errors import ConfigError, SluiceError

if TYPE_CHECKING:
    import sqlalchemy as sa
    from pyspark.sql import SparkSession

    from config.models import SluiceConfig, SqlSourceConfig
    from scheduler.commands.verify_limits import ReadShare

ConfigPath = Annotated[Path, typer.Argument(help="The YAML config file.", show_default=False)]
Sources = Annotated[
    list[str] | None,
    typer.Option("--source", "-s", show_default=False,
                 help="A source to verify (repeat for more); default: every SQL source."),
]  # fmt: skip
Repair = Annotated[
    bool, typer.Option("--repair", help="Queue the missing and different keys as repair batches.")
]
Deletes = Annotated[
    bool, typer.Option("--apply-deletes", help="Delete rows only a JDBC target has (extras).")
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON document.")]

_UNCHECKED_MISSING = 1_000_000
"""Above this many missing keys, a sweep source's are not looked up one by one in the ledger."""


@dataclass
class TableReport:
    """One source's table compared with its target table."""

    source: str
    target: str
    checked: int = 0
    target_rows: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    rejected: int = 0
    duplicate: int = 0
    in_flight: int = 0
    pending: int = 0
    first: dict[str, list[list[Any]]] = field(default_factory=dict)
    scope: str = "every row"
    read_rate: float | None = None
    """Rows per second the source was read at, at most: its share of ``max_rows_per_s``."""
    repair_batches: int = 0
    repaired_keys: int = 0
    deleted: int = 0
    note: str | None = None
    error: str | None = None

    @property
    def equal(self) -> bool:
        """Compared, and nothing missing, extra, different, rejected or twice (a note
        alone is no difference)."""
        differences = self.missing + self.extra + self.different + self.rejected + self.duplicate
        return self.error is None and not differences


@dataclass
class VerifyReport:
    """Every table's :class:`TableReport`; ``equal`` when each is."""

    tables: list[TableReport]

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document."""
        return {"equal": self.equal,
                "tables": [{**asdict(t), "equal": t.equal} for t in self.tables]}  # fmt: skip


def verify_command(fail: Callable[[SluiceError], NoReturn]) -> Callable[..., None]:
    """The ``verify`` command, reporting errors through the CLI's ``fail``."""

    def verify(config: ConfigPath, source: Sources = None, repair: Repair = False,
               apply_deletes: Deletes = False, as_json: AsJson = False) -> None:  # fmt: skip
        """Compare each source table with its target table, over what the ledger says is done.

        Reports per table the rows checked, missing, extra, different and
        rejected, with the first keys of each. Exit 0 when every table is
        equal, 1 when one differs, 2 for a bad config.
        """
        from config.loader import load_config
        from spark_jobs.tasks.local_tasks import SessionOnDemand
        from spark_jobs.tasks.session import build_session

        try:
            cfg = load_config(config)
            names = _chosen(cfg, source, config)
            # Started only for a table the servers' own sums cannot prove equal.
            spark = cast("SparkSession", SessionOnDemand.once(  # it stands in for one
                lambda: build_session(cfg.spark, app_name="sluice-verify")))  # fmt: skip
            report = verify_config(spark, cfg, names, repair=repair, apply_deletes=apply_deletes)
        except SluiceError as error:
            fail(error)
        typer.echo(json.dumps(report.to_json(), indent=2, default=str) if as_json
                   else render(report))  # fmt: skip
        raise typer.Exit(0 if report.equal else 1)

    return verify


def _chosen(cfg: SluiceConfig, names: list[str] | None, config: Path) -> list[str]:
    unknown = [n for n in names or [] if n not in cfg.sources]
    if unknown:
        raise ConfigError(f"{config}: no source {', '.join(map(repr, unknown))} "
                          f"(sources: {', '.join(cfg.sources)})")  # fmt: skip
    return list(names or cfg.sources)


def verify_config(
    spark: SparkSession,
    cfg: SluiceConfig,
    names: Iterable[str] | None = None,
    *,
    repair: bool = False,
    apply_deletes: bool = False,
    share: ReadShare | None = None,
) -> VerifyReport:
    """Verify the named sources (default: all) on ``spark``; repair and delete if asked.

    Up to ``spark.max_concurrent_imports`` tables are compared at once, each
    reading with its share of its database's ``limits.max_connections``, and
    never more tables of one database at once than its connections allow.
    With daemons running, the limits are shared with them, and
    ``max_rows_per_s`` paces the source's reads (:mod:`.verify_limits`;
    ``share``: one made for the test's clock).
    """
    from concurrent.futures import ThreadPoolExecutor

    from config.models import SqlSourceConfig
    from scheduler.commands.readonly import readonly_engine
    from scheduler.commands.verify_limits import ReadShare
    from scheduler.ledger.lookup import reader_engine
    from spark_jobs.verify_read import parts_for

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
                                   apply_deletes)  # fmt: skip
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
) -> TableReport:  # fmt: skip
    from scheduler.commands.verify_deletes import delete_extras
    from scheduler.commands.verify_limits import read_paced
    from scheduler.ledger.scope import DoneScope, done_scope, never_claimed
    from spark_jobs.common.keyorder import key_typer
    from spark_jobs.common.manifest import Manifest
    from spark_jobs.import_job import target_table
    from spark_jobs.tasks.local_tasks import started
    from spark_jobs.verify import KINDS, compare, encoded
    from spark_jobs.verify_read import read_sides, rejected_keys
    from spark_jobs.verify_sums import proven_equal

    target = target_table(cfg, Manifest("verify", name, source.target, "keys", 0))
    done = done_scope(ledger, name) if ledger is not None else DoneScope(known=False)
    scope, said = _scope(source, done)
    if not share.paces(name):  # a paced read is kept by Spark and compared there
        with share.reading(name, parts) as held:
            proof = proven_equal(source, target, scope, held)
        if proof is not None:
            return TableReport(name, target.label, proof.rows, proof.rows, scope=said,
                               first={kind: [] for kind in KINDS})  # fmt: skip
    spark = started(spark)  # compared in Spark: the session itself from here on
    with ExitStack() as releases:  # Spark's kept frames, dropped once the report is made
        kept = None if scope.nothing else read_paced(spark, share, name, source, scope.upto,
                                                     parts)  # fmt: skip
        if kept is not None:
            releases.callback(kept.release)
        # Read at its rate already: the comparison reads the kept rows, not the database.
        with nullcontext(parts) if kept is not None else share.reading(name, parts) as held:
            mine, theirs = read_sides(spark, source, target, scope, held,
                                      None if kept is None else kept.rows,
                                      spare=not share.bounds_connections(name))  # fmt: skip
            diff = compare(spark, mine, theirs, source.key_columns, label=target.label,
                           held=done.held, rejected=rejected_keys(spark, target, name),
                           typed=key_typer(source.url, source.table, source.key_columns))
        releases.callback(diff.release)
        if (
            source.mode != "keyset"
            and ledger is not None
            and (0 < diff.counts["missing"] <= _UNCHECKED_MISSING)
        ):
            missing = [encoded(k) for k in diff.keys(["missing"])]
            diff.set_pending([json.loads(t) for t in never_claimed(ledger, name, missing)])
        counts = diff.counts
        report = TableReport(
            name, target.label, diff.checked, diff.target_rows, missing=counts["missing"],
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
    from spark_jobs.verify_read import Scope

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
    from config.models import ParquetTargetConfig
    from scheduler.commands.verify_deletes import chunks
    from scheduler.ledger import Ledger

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


def render(report: VerifyReport) -> str:
    """The report as text: a line per table, then the first keys of each difference."""
    lines = []
    for t in report.tables:
        if t.error is not None:
            lines.append(f"{t.source} -> {t.target}: ERROR: {t.error}")
            continue
        if t.note and not t.checked and not t.target_rows:
            lines.append(f"{t.source} -> {t.target}: {t.note}")
            continue
        verdict = "equal" if t.equal else "DIFFERENT"
        scope = t.scope + (f", read at {t.read_rate:,.0f} rows/s at most" if t.read_rate else "")
        lines.append(
            f"{t.source} -> {t.target}: {verdict}: {t.checked} rows checked ({scope}), "
            f"{t.missing} missing, {t.extra} extra, {t.different} different, "
            f"{t.rejected} rejected" + (f", {t.duplicate} keys twice" if t.duplicate else "")
            + (f", {t.in_flight} in flight" if t.in_flight else "")
            + (f", {t.pending} not migrated yet" if t.pending else "")
        )
        lines.extend(
            f"  first {kind}: {', '.join(_key(k) for k in t.first[kind])}"
            for kind in ("missing", "extra", "different", "rejected", "duplicate")
            if t.first.get(kind)
        )
        if t.repair_batches:
            lines.append(f"  queued {t.repaired_keys} keys in {t.repair_batches} repair batches: "
                         "a running daemon imports them; else run `sluice run CONFIG`")  # fmt: skip
        if t.deleted:
            lines.append(f"  deleted {t.deleted} rows only the target had")
        if t.note:
            lines.append(f"  note: {t.note}")
    verdict = "every table is equal" if report.equal else "the target differs from the source"
    lines.append(f"{len(report.tables)} tables: {verdict}")
    return "\n".join(lines)


def _key(values: list[Any]) -> str:
    return str(values[0]) if len(values) == 1 else "(" + ", ".join(map(str, values)) + ")"
