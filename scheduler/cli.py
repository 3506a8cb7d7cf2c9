"""The ``sluice`` command line.

Exit codes (DESIGN.md): 0 done, 1 run failed (dead batches, rejected rows),
2 bad config or usage, 130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from config.errors import ConfigError, SluiceError

app = typer.Typer(
    name="sluice",
    help="Move records from SQL databases and SQS queues into targets, fairly and exactly once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigPath = Annotated[Path, typer.Argument(help="The YAML config file.", show_default=False)]


def _fail(error: SluiceError) -> None:
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


@app.command()
def schema() -> None:
    """Print the JSON Schema of config files (for editors)."""
    from config.models import SluiceConfig

    typer.echo(json.dumps(SluiceConfig.model_json_schema(), indent=2))


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
    from scheduler.logs import setup_logging
    from scheduler.progress import LogProgress

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
    from scheduler.daemon import Daemon, format_summary
    from scheduler.demo import prepare
    from scheduler.logs import setup_logging
    from scheduler.progress import BarProgress, LogProgress, is_tty

    setup_logging("text")
    folder = out or Path(tempfile.mkdtemp(prefix="sluice-demo-"))
    setup = prepare(folder.resolve(), rows)
    typer.echo(f"demo: {rows:,} rows in {setup.folder} (config: {setup.config})", err=True)
    cfg = load_config(setup.config)
    tty = is_tty()
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


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except SluiceError as error:  # anything not handled by a command
        typer.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
