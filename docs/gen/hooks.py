"""MkDocs hooks (``mkdocs.yml``, ``hooks:``): the generated parts of the pages.

A page asks for a generated part with a marker line, ``<!-- generated: NAME -->``,
and the build puts the part in its place: the configuration reference
(:mod:`config_reference`), the CLI reference (:mod:`cli_reference`), the type
and schema mapping tables (:mod:`type_tables`), the Grafana board's panels
(:mod:`grafana_panels`). A generator that finds a key or an option without
words, or a panel without a query, stops the build with a message naming them.
The pictures are not made here (:mod:`shots`, ``make docs-shots``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_HERE = Path(__file__).resolve().parent
for _path in (_HERE.parent.parent, _HERE):  # the repository (sluice's code), and this folder
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from cli_reference import MissingHelp, cli_reference  # noqa: E402
from config_reference import MissingDescription, config_reference  # noqa: E402
from grafana_panels import EmptyPanel, grafana_panels  # noqa: E402
from type_tables import GENERATED as TYPE_TABLES  # noqa: E402

_MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)

PARTS: dict[str, Callable[[], str]] = {
    "config-reference": config_reference,
    "cli-reference": cli_reference,
    "grafana-panels": grafana_panels,
    **TYPE_TABLES,
}
"""Marker name → the function that writes that part."""


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Put each marked part in its place on ``page``."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise PluginError(f"{page.file.src_path}: no generated part {name!r} "
                              f"(known: {', '.join(sorted(PARTS))})")  # fmt: skip
        try:
            return escape_tags(PARTS[name]())
        except (MissingDescription, MissingHelp, EmptyPanel) as error:
            raise PluginError(f"{page.file.src_path}: {error}") from None

    return _MARKER.sub(part, markdown)


def escape_tags(markdown: str) -> str:
    """``<`` outside code spans as ``&lt;`` (``array<string>`` is a type, not an HTML tag)."""
    pieces = re.split(r"(`+[^`]*`+)", markdown)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in pieces)
