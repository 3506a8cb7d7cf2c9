"""The Grafana board's panels, read from ``examples/grafana/sluice.json`` at each build.

One table per row of the board (Progress, ETA…, Flow control…): each panel's
title, its kind (graph or figure) and its PromQL queries with their legends (a
table row each), as
the board holds them, so the page cannot drift from the board. A board without a
panel, or a panel without a query, stops the build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BOARD = Path(__file__).resolve().parent.parent.parent / "examples" / "grafana" / "sluice.json"
"""The dashboard the metrics page describes."""

KINDS = {"timeseries": "graph", "stat": "figure"}
"""Grafana's panel types, in the page's words (others are shown as Grafana names them)."""


class EmptyPanel(ValueError):
    """A panel of the board has no query, or the board no panel."""


def _code(text: str) -> str:
    """``text`` as a code span in a table cell (its ``|`` escaped, backticks fenced)."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text.replace('|', chr(92) + '|')}{fence}"


def _queries(panel: dict[str, Any]) -> list[tuple[str, str]]:
    """The panel's queries and their legends, as code spans."""
    shown = [(_code(t["expr"]), _code(t["legendFormat"]) if t.get("legendFormat") else "")
             for t in panel.get("targets", []) if t.get("expr")]  # fmt: skip
    if not shown:
        raise EmptyPanel(f"{BOARD.name}: panel {panel.get('title')!r} has no PromQL query")
    return shown


def sections(board: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The board's rows in order, each with its panels (panels before any row: "Panels")."""
    found: list[tuple[str, list[dict[str, Any]]]] = []
    for panel in board.get("panels", []):
        if panel.get("type") == "row":
            found.append((panel.get("title") or "Panels", list(panel.get("panels", []))))
        elif found:
            found[-1][1].append(panel)
        else:
            found.append(("Panels", [panel]))
    return [(title, panels) for title, panels in found if panels]


def grafana_panels(board_path: Path = BOARD) -> str:
    """Every panel of the board as Markdown: a table per row of the board."""
    board = json.loads(board_path.read_text())
    parts = [f"The board's {len(board.get('templating', {}).get('list', []))} variables: "
             + ", ".join(f"`${v['name']}` ({v.get('label') or v['name']})"
                         for v in board.get("templating", {}).get("list", []))
             + "."]  # fmt: skip
    found = sections(board)
    if not found:
        raise EmptyPanel(f"{board_path.name}: no panel")
    for title, panels in found:
        lines = [f"**{title}**", "", "| panel | shown as | PromQL | legend |", "|---|---|---|---|"]
        for panel in panels:
            kind = KINDS.get(panel.get("type", ""), panel.get("type", "?"))
            about = panel.get("description")
            name = (panel.get("title", "?") + (f" — {about}" if about else "")).replace("|", "\\|")
            for i, (query, legend) in enumerate(_queries(panel)):  # a row per query
                first = (name, kind) if i == 0 else ("", "")
                lines.append(f"| {first[0]} | {first[1]} | {query} | {legend} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


if __name__ == "__main__":
    print(grafana_panels())
