"""The CLI reference, made from the typer app itself (``scheduler/cli.py``).

The app is walked as the click command tree typer builds: every command with
its help, its usage line, and every argument and option with its help and
default. An option without help fails the docs build, naming it. (Typer ships
click inside itself: the tree is read by its attributes, not click's classes.)
"""

from __future__ import annotations

from typing import Any

import typer.main

from scheduler.cli import app


class MissingHelp(ValueError):
    """CLI commands or options without help text."""


def cli_group() -> Any:
    """The click group typer makes of ``sluice``."""
    group = typer.main.get_command(app)
    assert hasattr(group, "commands"), "sluice's typer app is no longer a group of commands"
    return group


def _option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def cli_reference() -> str:
    """Every command of ``sluice`` as Markdown: usage, what it does, its parameters."""
    group = cli_group()
    ctx = group.make_context("sluice", [], resilient_parsing=True)  # for list_commands
    missing = [f"sluice {name}" for name, cmd in group.commands.items() if not cmd.help]
    missing += [f"sluice {name} {param.opts[0]}" for name, cmd in group.commands.items()
                for param in cmd.params
                if _option(param) and not param.help]  # fmt: skip
    if missing:
        raise MissingHelp("these have no help text (help= in scheduler/): " + ", ".join(missing))
    out = ["### sluice", "", _first(group.help), "", _params_table(group.params), ""]
    for name in group.list_commands(ctx):
        command = group.commands[name]
        usage = " ".join(["sluice", name, *_usage(command.params)])
        out += [f"### sluice {name}", "", "```", usage, "```", "", _help(command.help), ""]
        if command.params:
            out += [_params_table(command.params), ""]
    return "\n".join(out)


def cli_names() -> tuple[set[str], set[str]]:
    """Every command name and every option and argument name (for the docs test)."""
    group = cli_group()
    commands = set(group.commands)
    params = {opt for cmd in [group, *group.commands.values()] for p in cmd.params
              for opt in (p.opts if _option(p) else [p.name or ""])}  # fmt: skip
    return commands, params


def _params_table(params: list[Any]) -> str:
    rows = ["| argument or option | type | default | what it does |", "|---|---|---|---|"]
    for param in params:
        if _option(param):
            names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            shown = "flag" if param.is_flag else _type(param)
            default = _default(param)
            rows.append(f"| {names} | {shown} | {default} | {_help(param.help)} |")
        else:
            what = getattr(param, "help", None) or ""
            name = (param.name or "").upper()
            rows.append(f"| `{name}` | {_type(param)} | required | {_help(what)} |")
    return "\n".join(rows)


def _usage(params: list[Any]) -> list[str]:
    """``[OPTIONS]``, the options that must be given, and the arguments, as ``--help`` shows."""
    pieces = ["[OPTIONS]"] if any(_option(p) for p in params) else []
    for param in params:
        if _option(param) and param.required:
            pieces.append(f"{param.opts[0]} {(param.name or '').upper()}")
        elif not _option(param):
            pieces.append((param.name or "").upper())
    return pieces


_TYPES = {bool: "flag", int: "integer", float: "number", str: "text"}


def _type(param: Any) -> str:
    """The parameter's type in words (``text``, ``integer``, ``path``; ``text, repeatable``)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:
        return str(getattr(getattr(param, "type", None), "name", "text"))
    inner = getattr(annotation, "__args__", (annotation,))[0]
    shown = _TYPES.get(inner) or getattr(inner, "__name__", str(inner)).lower()
    return f"{shown}, repeatable" if getattr(param, "multiple", False) else shown


def _default(param: Any) -> str:
    value = param.default
    if param.required:
        return "required"
    if param.is_flag:
        return "off" if not value else "on"
    if value is None or value == () or callable(value):
        return "—"
    return f"`{value}`"


def _first(text: str | None) -> str:
    return (text or "").strip().split("\n\n")[0]


def _help(text: str | None) -> str:
    """Help text as one table cell (typer keeps a docstring's line breaks)."""
    return " ".join((text or "").split()).replace("|", "\\|")
