"""Shared by the benchmarks: how a figure is printed."""

from __future__ import annotations

import json


def report(
    bench: str, value: float, unit: str, baseline: float | None = None, **extra: object
) -> None:
    """Print one figure as the JSON line the runner collects.

    ``extra`` fields follow the standard ones (say, ``settings``: the
    non-default settings the figure was measured with).
    """
    figure: dict[str, object] = {"bench": bench, "value": round(value, 3), "unit": unit}
    if baseline is not None:
        figure["baseline"] = round(baseline, 3)
        figure["ratio"] = round(value / baseline, 3) if baseline else None
    figure.update(extra)
    print(json.dumps(figure), flush=True)
