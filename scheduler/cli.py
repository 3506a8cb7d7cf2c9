"""The ``sluice`` command line.

Exit codes (docs/reference/cli.md): 0 done, 1 run failed (dead batches, rejected rows),
2 bad config or usage, 130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from config.errors import ConfigError, SluiceError
from scheduler.commands.cutover import cutover_command
from scheduler.commands.init import init_command
from scheduler.commands.verify import verify_command
from scheduler.commands.version import show_version
from scheduler.commands.where import where_command

if TYPE_CHECKING:
    from config.models import SluiceConfig
    from scheduler.ledger import Ledger

app = typer.Typer(
    name="sluice",
    help="Move records from SQL databases and SQS queues into targets, fairly and exactly once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigPath = Annotated[Path, typer.Argument(help="The YAML config file.", show_default=False)]


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=show_version, is_eager=True,
                                          help="Print sluice's version and exit.")] = False,
) -> None:  # fmt: skip
    """Move records from SQL databases and SQS queues into targets, fairly and exactly once."""


def _fail(error: SluiceError) -> NoReturn:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(error.exit_code)


@app.command()
def validate(config: ConfigPath) -> None:
    """Check a config file and report every problem with its file, line and key."""
    from config.loader import load_config

    try:
        cfg = load_config(config)
    except ConfigError as error:
        _fail(error)
    typer.echo(
        f"{config}: ok ({len(cfg.sources)} sources, {len(cfg.targets)} targets)"
    )
    if cfg.metrics_port is not None:
        typer.echo(f"{config}: metrics_port is deprecated: write http: {{port: "
                   f"{cfg.metrics_port}}} (the same; host, token and tls go there)")  # fmt: skip


@app.command()
def schema() -> None:
    """Print the JSON Schema of config files (for editors)."""
    from config.models import editor_schema

    typer.echo(json.dumps(editor_schema(), indent=2))


LogFormat = Annotated[
    str | None, typer.Option("--log-format", help="text or json (default: the config's).")
]


@app.command()
def run(
    config: ConfigPath,
    until_drained: Annotated[
        bool, typer.Option("--until-drained", help="Exit once every source is drained.")
    ] = False,
    log_format: LogFormat = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logs.")] = False,
) -> None:
    """Migrate: as a daemon until SIGTERM, or with --until-drained until nothing is left."""
    from config.loader import load_config
    from config.secrets import config_secrets
    from scheduler.daemon import Daemon, format_summary
    from scheduler.observe.logs import setup_logging
    from scheduler.observe.progress import LogProgress

    try:
        cfg = load_config(config)
    except ConfigError as error:
        _fail(error)
    setup_logging(log_format or cfg.log_format, logging.DEBUG if verbose else logging.INFO,
                  config_secrets(cfg))
    try:
        daemon = Daemon(cfg, config_path=str(config), reporter=LogProgress())
        daemon.install_signal_handlers()
        try:
            summary = daemon.run(until_drained=until_drained)
        finally:
            daemon.close()
    except SluiceError as error:
        _fail(error)
    typer.echo(format_summary(summary))
    raise typer.Exit(summary.exit_code)


@app.command()
def demo(
    rows: Annotated[int, typer.Option(help="Rows to generate and migrate.", min=1)] = 100_000,
    out: Annotated[
        Path | None, typer.Option(help="Folder for the demo (default: a new temp folder).")
    ] = None,
) -> None:
    """Migrate generated SQLite databases to Parquet on embedded defaults."""
    import tempfile

    from config.loader import load_config
    from scheduler.commands.demo import prepare
    from scheduler.daemon import Daemon, format_summary
    from scheduler.observe.logs import setup_logging
    from scheduler.observe.progress import BarProgress, LogProgress, is_tty

    setup_logging("text")
    folder = out or Path(tempfile.mkdtemp(prefix="sluice-demo-"))
    setup = prepare(folder.resolve(), rows)
    typer.echo(f"demo: {rows:,} rows in {setup.folder} (config: {setup.config})", err=True)
    cfg = load_config(setup.config)
    tty = is_tty()
    if tty:
        from spark_jobs.tasks.children import send_spark_output_to

        # Spark's JVM would write its start-up lines across the bars.
        send_spark_output_to(setup.folder / "spark.log")
        typer.echo(f"demo: Spark's own output goes to {setup.folder / 'spark.log'}", err=True)
    bars = BarProgress(setup.rows) if tty else None
    daemon = Daemon(
        cfg, config_path=str(setup.config), reporter=bars or LogProgress(),
        report_every=0.5 if tty else 5.0,
    )
    daemon.install_signal_handlers()
    try:
        summary = daemon.run(until_drained=True)
        if bars is not None:
            bars.close()
        typer.echo(format_summary(summary))
        from sinks.spark import SparkSink

        sink = daemon.sink
        assert isinstance(sink, SparkSink)
        lake = Path(cfg.targets["lake"].path)  # type: ignore[union-attr]
        for table, expected in setup.rows.items():
            count = sink.session().read.parquet(str(lake / table)).count()
            typer.echo(f"  {lake / table}: {count:,} rows (source: {expected:,})")
    finally:
        daemon.close()
    raise typer.Exit(summary.exit_code)


# -- operator commands on the ledger: status, retry, reset -----------------------------

Sources = Annotated[
    list[str] | None,
    typer.Option("--source", "-s", help="Only this source (repeat for more; default: all)."),
]


def _load_for_ledger(config: Path, sources: list[str] | None) -> tuple[SluiceConfig, list[str]]:
    """The config and the chosen sources; exit 2 on a bad config or an unknown source."""
    from config.loader import load_config

    try:
        cfg = load_config(config)
    except ConfigError as error:
        _fail(error)
    unknown = [name for name in sources or [] if name not in cfg.sources]
    if unknown:
        _fail(ConfigError(f"{config}: no source {', '.join(map(repr, unknown))} "
                          f"(sources: {', '.join(cfg.sources)})"))
    return cfg, list(sources or cfg.sources)


def _open_ledger(cfg: SluiceConfig) -> Ledger | None:
    """The ledger, or None when a SQLite ledger was never created (nothing ran yet)."""
    from scheduler.commands.status import ledger_exists
    from scheduler.ledger import Ledger

    if not ledger_exists(cfg.ledger):
        return None
    try:
        return Ledger(cfg.ledger)
    except SluiceError as error:
        _fail(error)


@app.command()
def status(
    config: ConfigPath,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
    backlog: Annotated[
        bool, typer.Option(help="Count what is left in each source (read-only), for the ETA.")
    ] = True,
) -> None:
    """Where each source stands, from the ledger: batches per state, rows, rate, ETA, errors."""
    import sqlalchemy as sa
    from rich.console import Console

    from config.errors import LedgerError
    from config.secrets import config_secrets, redact_text, redact_url
    from scheduler.commands.status import collect_status, render_table, render_text, rows_left
    from scheduler.ledger import LedgerReads
    from scheduler.readonly import readonly_engine

    cfg, _ = _load_for_ledger(config, None)
    # Read-only: status never creates, changes or upgrades a ledger, even one a daemon is using.
    engine = readonly_engine(cfg.ledger)
    try:
        reads = None if engine is None else LedgerReads(engine)
        if reads is not None and not reads.has_tables():
            reads = None
        left, away = rows_left(cfg, str(config)) if backlog and reads is not None else (None, {})
        report = collect_status(cfg, reads, backlog=left, away=away)
    except sa.exc.SQLAlchemyError as error:
        cause = redact_text(str(getattr(error, "orig", None) or error).splitlines()[0],
                            config_secrets(cfg))  # fmt: skip
        _fail(LedgerError(f"cannot read the ledger {redact_url(cfg.ledger)}: {cause}"))
    finally:
        if engine is not None:
            engine.dispose()
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif sys.stdout.isatty():
        Console().print(render_table(report))
    else:
        typer.echo(render_text(report))


@app.command()
def retry(
    config: ConfigPath,
    source: Sources = None,
    dead: Annotated[bool, typer.Option("--dead", help="Also requeue dead batches.")] = False,
) -> None:
    """Requeue failed (with --dead also dead) batches with fresh attempts."""
    from collections import Counter

    from config.errors import ClaimConflict

    cfg, names = _load_for_ledger(config, source)
    ledger = _open_ledger(cfg)
    requeued: Counter[str] = Counter()
    skipped = 0
    if ledger is not None:
        try:
            states = ["failed", "dead"] if dead else ["failed"]
            for batch_id, name in ledger.reads.batch_ids(states, names).items():
                try:
                    ledger.requeue(batch_id)
                except ClaimConflict:  # a running daemon retried it meanwhile
                    skipped += 1
                else:
                    requeued[name] += 1
        finally:
            ledger.close()
    detail = ", ".join(f"{name} {count}" for name, count in sorted(requeued.items()))
    typer.echo(f"requeued {requeued.total()} batches" + (f" ({detail})" if detail else "")
               + (f"; {skipped} changed meanwhile and were left alone" if skipped else ""))


@app.command()
def reset(
    config: ConfigPath,
    source: Sources = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Forget sources' progress (checkpoint, batches, claimed keys); they start over.

    Re-importing is safe (every write is idempotent) but redoes the work.
    Stop the daemons on this ledger first.
    """
    from config.secrets import redact_url
    from scheduler.commands.streams import forget_sources

    cfg, names = _load_for_ledger(config, source)
    ledger = _open_ledger(cfg)
    if ledger is None:
        typer.echo("nothing to reset: the ledger does not exist yet")
        return
    try:
        if not yes:
            try:
                sure = typer.confirm(
                    f"Forget the progress of {', '.join(names)} in {redact_url(cfg.ledger)}? "
                    "They will be migrated again from the start", default=False,
                )
            except typer.Abort:  # no answer (stdin closed): not a yes
                sure = False
            if not sure:
                typer.echo("reset aborted: nothing changed", err=True)
                raise typer.Exit(1)
        for line in forget_sources(ledger, cfg, names):
            typer.echo(line)
    finally:
        ledger.close()


@app.command("import")
def import_(
    config: ConfigPath,
    batch: Annotated[str, typer.Option("--batch", help="The batch id (see sluice status).")],
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logs.")] = False,
) -> None:
    """Import one batch now, in the foreground, and record it in the ledger.

    A failed or dead batch is requeued first; a done one is left alone; one a
    running daemon holds is refused. Exit 0 when the batch is done, 1 when it
    failed (its error is shown) or rows were rejected, 2 for a bad config.
    """
    from config.loader import load_config
    from config.secrets import config_secrets, redact_text
    from scheduler.commands.import_batch import import_batch
    from scheduler.observe.logs import setup_logging
    from sinks.spark import start_session

    try:
        cfg = load_config(config)
    except ConfigError as error:
        _fail(error)
    secrets = config_secrets(cfg)
    setup_logging(cfg.log_format, logging.DEBUG if verbose else logging.INFO, secrets)
    try:
        outcome = import_batch(
            cfg, batch, lambda: start_session(cfg, app_name=f"sluice-import-{batch}")
        )
    except SluiceError as error:
        _fail(error)
    result = outcome.result
    if outcome.error is not None:
        typer.echo(f"batch {batch} {outcome.state}: {redact_text(outcome.error, secrets)}",
                   err=True)
    elif result is None:
        typer.echo(f"batch {batch} is already done: nothing to import")
    else:
        skipped = " (already committed in the target: not read again)" if result.skipped else ""
        typer.echo(f"batch {batch} done: {result.rows_written} rows into {result.target}"
                   + (f", {result.rows_rejected} rejected" if result.rows_rejected else "")
                   + skipped)
    raise typer.Exit(outcome.exit_code)


@app.command()
def plan(
    config: ConfigPath,
    ticks: Annotated[int, typer.Option(help="How many ticks to simulate.", min=0)] = 10,
) -> None:
    """Dry run: each source's backlog (read-only) and what the next ticks would feed.

    Writes nothing: no ledger, no work folder. Exit 1 if a backlog could not be read.
    """
    from config.loader import load_config
    from scheduler.commands.plan import make_plan, render

    try:
        cfg = load_config(config)
    except ConfigError as error:
        _fail(error)
    result = make_plan(cfg, ticks, config_path=str(config))
    typer.echo(render(result, str(config)))
    raise typer.Exit(0 if result.ok else 1)


# Their options and logic live in scheduler/commands/ (this module is at its size limit).
for _name, _command in (("where", where_command), ("init", init_command),
                        ("verify", verify_command), ("cutover", cutover_command)):  # fmt: skip
    app.command(_name)(_command(_fail))


def main() -> None:
    """Console-script entry point."""
    from spark_jobs.engines.connections import bound_connections

    bound_connections()  # no connection of any command waits for the OS's TCP timeouts
    try:
        app()
    except SluiceError as error:  # anything not handled by a command
        typer.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
