"""Shared by the benchmarks: how a figure is printed."""

from __future__ import annotations

import json


def report(bench: str, value: float, unit: str, baseline: float | None = None) -> None:
    """Print one figure as the JSON line the runner collects."""
    figure: dict[str, object] = {"bench": bench, "value": round(value, 3), "unit": unit}
    if baseline is not None:
        figure["baseline"] = round(baseline, 3)
        figure["ratio"] = round(value / baseline, 3) if baseline else None
    print(json.dumps(figure), flush=True)
