"""``sluice cutover CONFIG [--apply-deletes] [--json] [--wait D] [--cancel]``: the last step.

It sets the cutover flag in the ledger (:mod:`scheduler.ledger.cutover`).
Every daemon on the ledger then runs a final pass (each source read again
by a read that begins after the flag; keyset: claims to the end as it is
then; sweep and incremental: passes until one finds nothing new), finishes
its batches and stops feeding and exits. With daemons running,
the command waits for them (``--wait``, default 30 minutes); with none, it
runs that final pass itself, in-process (and after the daemons too: its
pass surely begins after the flag). Then it runs ``sluice verify`` over
every source and prints a report that says whether the target may take
over: ready when every table is equal, with no row left to migrate or in
flight, and no batch is dead. Stop the
application's writes to the sources first: rows written after the final
pass are not migrated (a sweep pass that keeps finding new rows keeps the
daemons going). ``--apply-deletes`` deletes rows the source no longer has
from JDBC targets. ``--cancel`` clears the flag.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from config.errors import SluiceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from config.models import SluiceConfig
    from scheduler.ledger import Ledger
    from spark_jobs.schema.takeover import Readiness
    from spark_jobs.verify.report import VerifyReport

ConfigPath = Annotated[Path, typer.Argument(help="The YAML config file.", show_default=False)]
Deletes = Annotated[
    bool, typer.Option("--apply-deletes", help="Delete rows only a JDBC target has (extras).")
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON document.")]
Wait = Annotated[
    str, typer.Option("--wait", help="How long to wait for running daemons' final pass.")
]
Cancel = Annotated[bool, typer.Option("--cancel", help="Clear the cutover flag and exit.")]


@dataclass
class CutoverReport:
    """How the cutover went: the final pass, the dead batches, the verify."""

    requested_at: float
    final_pass: str
    verify: VerifyReport | None = None
    dead_batches: int = 0
    problems: list[str] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)  # the slots dropped once READY
    schema: Readiness | None = None  # the target's schema objects: built, set, lacking
    seconds: float = 0.0  # from the command to its verdict

    @property
    def ready(self) -> bool:
        """The target may take over: the final pass ended, no batch is dead, every table equal."""
        equal = self.verify is not None and self.verify.equal
        return equal and not self.problems and not self.dead_batches

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document."""
        return {
            "ready": self.ready, "requested_at": self.requested_at,
            "final_pass": self.final_pass, "dead_batches": self.dead_batches,
            "problems": self.problems, "streams": self.streams, "seconds": self.seconds,
            "verify": None if self.verify is None else self.verify.to_json(),
            "schema": None if self.schema is None else self.schema.to_json(),
        }  # fmt: skip


def cutover_command(fail: Callable[[SluiceError], NoReturn]) -> Callable[..., None]:
    """The ``cutover`` command, reporting errors through the CLI's ``fail``."""

    def cutover(config: ConfigPath, apply_deletes: Deletes = False, as_json: AsJson = False,
                wait: Wait = "30m", cancel: Cancel = False) -> None:  # fmt: skip
        """Final pass, then verify: says whether the target may take over.

        Exit 0 when it may (every table equal, no dead batch), 1 when not,
        2 for a bad config.
        """
        from config.base import parse_duration
        from config.loader import load_config
        from scheduler.commands.verify import render
        from scheduler.ledger import Ledger
        from scheduler.ledger.cutover import cancel_cutover
        from sinks.spark import start_session
        from spark_jobs.tasks.local_tasks import SessionOnDemand

        try:
            cfg = load_config(config)
            if cancel:
                ledger = Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl)
                try:
                    cleared = cancel_cutover(ledger)
                finally:
                    ledger.close()
                typer.echo("cutover cancelled" if cleared else "no cutover was requested")
                return
            # Started when first needed: a stream's final pass and a verify the servers'
            # own sums prove need no Spark, and the flag is set before the JVM starts.
            spark = cast("SparkSession", SessionOnDemand.once(  # it stands in for one
                lambda: start_session(cfg, app_name="sluice-cutover")))  # fmt: skip
            if needs_spark_to_verify(cfg):
                # Its JVM starts while the final pass runs, not after it.
                threading.Thread(target=lambda: spark.version, daemon=True).start()
            report = run_cutover(spark, cfg, config, apply_deletes=apply_deletes,
                                 wait=parse_duration(wait))  # fmt: skip
        except SluiceError as error:
            fail(error)
        if as_json:
            typer.echo(json.dumps(report.to_json(), indent=2, default=str))
        else:
            if report.verify is not None:
                typer.echo(render(report.verify))
            if report.schema is not None:
                for line in [*report.schema.built, *report.schema.sequences,
                             *report.schema.skipped]:  # fmt: skip
                    typer.echo(f"schema: {line}")
            typer.echo(f"final pass: {report.final_pass}; {report.dead_batches} dead batches")
            for problem in report.problems:
                typer.echo(f"problem: {problem}")
            for line in report.streams:
                typer.echo(line)
            verdict = (f"READY in {report.seconds:.1f} s: the target may take over"
                       if report.ready else "NOT READY: the target may not take over yet")
            typer.echo(verdict)
        raise typer.Exit(0 if report.ready else 1)

    return cutover


def run_cutover(
    spark: SparkSession, cfg: SluiceConfig, config_path: Path, *, apply_deletes: bool = False,
    wait: float = 1800.0, poll: float = 0.25,
) -> CutoverReport:  # fmt: skip
    """Set the flag, see the final pass through (the daemons', or our own), then verify."""
    from scheduler.commands.streams import drop_streams
    from scheduler.ledger import Ledger
    from scheduler.ledger.cutover import request_cutover
    from scheduler.verify_tables import verify_config
    from spark_jobs.schema.takeover import make_ready

    started = time.monotonic()
    by = f"cutover:{socket.gethostname()}:{os.getpid()}"
    ledger = Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl, owner=by)
    try:
        requested = request_cutover(ledger, by)
        daemons = _others(ledger)
        if daemons:
            report = CutoverReport(requested, f"by {len(daemons)} running daemons, then here")
            if not _daemons_done(ledger, cfg, wait, poll):
                report.problems.append(
                    f"daemons still running after {wait:.0f} s: {', '.join(_others(ledger))} "
                    "(a sweep that keeps finding new rows: stop the writes to the sources)"
                )
        else:
            report = CutoverReport(requested, "run here (no daemon was running)")
        if not report.problems:
            # Here too after the daemons: a pass of our own begins after the flag
            # for certain, where a daemon's refill may have begun just before it.
            summary = run_until_drained(spark, cfg, config_path)
            report.problems.extend(summary.failures)
        report.dead_batches = sum(
            n for (_, state), (n, _) in ledger.reads.state_counts(cfg.sources).items()
            if state == "dead"
        )  # fmt: skip
    finally:
        ledger.close()
    if not report.problems:
        # The data is final: what waited for it (foreign keys of streams, triggers, the
        # sequences) goes in, and every table is compared with its source, object by object.
        report.schema = make_ready(cfg)
        # A stream a verify proved equal while the application wrote has only its rows
        # changed since compared: the writes are stopped for this long.
        report.verify = verify_config(spark, cfg, apply_deletes=apply_deletes,
                                      final=True)  # fmt: skip
        report.problems.extend(
            f"{t.source}: {t.pending} rows not migrated, {t.in_flight} in flight"
            for t in report.verify.tables if t.pending or t.in_flight
        )  # fmt: skip
        report.problems.extend(report.schema.problems)
    if report.ready:
        # The target takes over: the source's slots would keep its WAL from now on.
        report.streams = drop_streams(cfg)
    report.seconds = time.monotonic() - started
    return report


def needs_spark_to_verify(cfg: SluiceConfig) -> bool:
    """Whether verify will compare a table in Spark: one the servers' own row sums cannot
    prove equal (:func:`spark_jobs.verify.sums.provable`), or one that cannot be asked."""
    from config.models import JdbcTargetConfig, SqlSourceConfig, split_target
    from spark_jobs.verify.sums import provable

    for source in cfg.sources.values():
        if not isinstance(source, SqlSourceConfig):
            continue
        target = cfg.targets.get(split_target(source.target)[0])
        if not isinstance(target, JdbcTargetConfig):
            return True
        try:
            if not provable(source, target.url):
                return True
        except Exception:  # noqa: BLE001 - a server that does not answer: verify will tell
            return True
    return False


def _others(ledger: Ledger) -> list[str]:
    """The live daemons on the ledger (not this process's own owner)."""
    return [o for o in ledger.owners.live() if o != ledger.owner]


def _daemons_done(ledger: Ledger, cfg: SluiceConfig, wait: float, poll: float) -> bool:
    """Wait until no daemon is live and no batch unfinished; False when ``wait`` ran out."""
    deadline = time.monotonic() + wait
    while _others(ledger) or ledger.reads.batches(("claimed", "importing"), cfg.sources):
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def run_until_drained(spark: SparkSession, cfg: SluiceConfig, config_path: Path) -> Any:
    """``sluice run --until-drained`` in this process, on ``spark``; its summary."""
    from scheduler.daemon import Daemon
    from sinks.spark import SparkSink

    daemon = Daemon(cfg, config_path=str(config_path), sink=SparkSink(cfg, spark=spark))
    try:
        return daemon.run(until_drained=True)
    finally:
        daemon.close()
