"""``sluice verify CONFIG [--source S] [--repair] [--apply-deletes] [--json]``: prove the target.

Each SQL source's table is compared with its target table over what the
ledger says is done, while daemons may go on running
(:func:`scheduler.verify_tables.verify_config`; the comparison itself is the
verify wing's, ``spark_jobs/verify/``). Exit 0 only when every table is equal.

``--repair`` queues the missing and different keys as key-list batches in the
ledger for a daemon (running, or the next ``sluice run``) to import through
the upsert path. Rows only the target has (deleted in the source) are
reported; ``--apply-deletes`` deletes them from a JDBC target. SQS sources
cannot be read again, so they are not verified. This module reads the
arguments and prints the report (:func:`render`), nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from config.errors import ConfigError, SluiceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from config.models import SluiceConfig
    from spark_jobs.verify.report import VerifyReport

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
        from scheduler.verify_tables import verify_config
        from sinks.spark import start_session
        from spark_jobs.tasks.local_tasks import SessionOnDemand

        try:
            cfg = load_config(config)
            names = _chosen(cfg, source, config)
            # Started only for a table the servers' own sums cannot prove equal.
            spark = cast("SparkSession", SessionOnDemand.once(  # it stands in for one
                lambda: start_session(cfg, app_name="sluice-verify")))  # fmt: skip
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
