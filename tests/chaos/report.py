"""A pytest plugin that prints the chaos table at the end of the session.

``make chaos`` loads it with ``-p tests.chaos.report``; each verified
scenario has added its line to :data:`tests.chaos.harness.RESULTS`.
"""

from __future__ import annotations

import time
from typing import Any

from tests.chaos.harness import RESULTS, Outcome

_started = time.monotonic()

HEADERS = ("scenario", "kills/faults", "rows checked", "duplicates", "missing", "time")


def render(results: list[Outcome], total_seconds: float) -> str:
    """The table, then the notes of each scenario, then the total time."""
    rows = [
        (r.scenario, str(r.injected), f"{r.rows_checked:,}", str(r.duplicates), str(r.missing),
         f"{r.seconds:.0f} s")
        for r in results
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(HEADERS)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(HEADERS), line(tuple("-" * w for w in widths)), *map(line, rows)]
    notes = [f"  {r.scenario}: {note}" for r in results for note in r.notes]
    if notes:
        out += ["", "notes:", *notes]
    bad = [r.scenario for r in results if r.duplicates or r.missing]
    out += ["", f"total {total_seconds / 60:.1f} min ({total_seconds:.0f} s); "
                + ("duplicates or missing rows in: " + ", ".join(bad) if bad
                   else "0 duplicates and 0 missing rows in every scenario")]
    return "\n".join(out)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the table (only when some scenario ran)."""
    if not RESULTS:
        return
    terminalreporter.section("chaos")
    terminalreporter.write_line(render(RESULTS, time.monotonic() - _started))
