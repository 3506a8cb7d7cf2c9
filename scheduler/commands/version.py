"""``sluice --version``: the installed release."""

from __future__ import annotations

import typer


def show_version(shown: bool) -> None:
    """The ``--version`` option's callback: print the release and exit, when ``shown``."""
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"sluice {version('sluice')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("sluice (not installed: version unknown)")
        raise typer.Exit(0)
