"""The docs' pictures, made by sluice's own code (``make docs-shots``; the images are committed).

- ``docs/images/status-page.png``: the daemon's status page (:mod:`scheduler.observe.page`),
  served by sluice's HTTP server from a synthetic snapshot (:mod:`shot_data`: sources
  mid-run, one waiting, one whose database is away, a queue, a change stream with lag)
  and shot by headless Chromium, as ``tests/test_status_page.py`` shoots the live page;
- ``docs/images/sluice-status.svg``: ``sluice status`` in a terminal: the command's own
  table (:func:`scheduler.commands.status.render_table`) of a SQLite ledger filled
  through the ledger's API in a temporary folder, recorded by rich as SVG.

Run from the repository: ``python docs/gen/shots.py [page|status]`` (both by default).
``make docs`` never runs this: it needs Chromium, and the site needs only the images.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent.parent
for _path in (ROOT, _HERE):  # sluice's code, and this folder
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from shot_data import AT, fill_ledger, snapshot, status_config  # noqa: E402

IMAGES = ROOT / "docs" / "images"
PAGE = IMAGES / "status-page.png"
STATUS = IMAGES / "sluice-status.svg"
WINDOW = "1400,1160"
"""Chromium's window, width and height: the whole page of :func:`shot_data.snapshot`."""
STATUS_WIDTH = 150
"""The terminal's columns for ``sluice status``: its table whole, no column folded."""


class _Board:
    """The one snapshot, as the page's route asks the daemon's status board for it."""

    def __init__(self, shown: Any) -> None:
        self.shown = shown

    def latest(self) -> Any:
        """The snapshot (always the same one)."""
        return self.shown


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with the flags the status page's test uses."""
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=True)


def shoot_page(out: Path = PAGE) -> Path:
    """Serve the status page of :func:`shot_data.snapshot` on a free loopback port, and
    write Chromium's screenshot of it to ``out``."""
    from scheduler.observe.http import serve
    from scheduler.observe.page import PageRoute
    from scheduler.observe.snapshot import StatusBoard

    if shutil.which("chromium") is None:
        raise SystemExit("chromium is not installed (make chromium installs Debian's package)")
    endpoint = serve(0, {"/": PageRoute(cast(StatusBoard, _Board(snapshot())))})
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-shot-") as folder:
            shot = Path(folder) / "page.png"
            chromium(f"--screenshot={shot}", f"--window-size={WINDOW}",
                     f"http://127.0.0.1:{endpoint.port}/", profile=Path(folder) / "profile")
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, out)
    finally:
        endpoint.stop()
    return out


def record_status(out: Path = STATUS) -> Path:
    """Write ``sluice status``'s table, for the ledger :func:`shot_data.fill_ledger` makes,
    as rich records it in a terminal ``STATUS_WIDTH`` columns wide, to ``out`` (SVG)."""
    from rich.console import Console

    from config.loader import load_config
    from scheduler.commands.status import collect_status, render_table
    from scheduler.ledger import Ledger

    with tempfile.TemporaryDirectory(prefix="sluice-shot-") as folder:
        config = Path(folder) / "sluice.yaml"
        config.write_text(status_config())
        cfg = load_config(config)
        fill_ledger(cfg)
        ledger = Ledger(cfg.ledger)
        try:
            report = collect_status(cfg, ledger.reads, now=AT, backlog=BACKLOG, away=AWAY)
        finally:
            ledger.close()
    # The folder was temporary: the heading names the ledger as a user's config would.
    report = replace(report, ledger="sqlite:///ledger.db")
    console = Console(record=True, width=STATUS_WIDTH, force_terminal=True,
                      color_system="truecolor", file=io.StringIO())  # fmt: skip
    console.print(render_table(report))
    out.parent.mkdir(parents=True, exist_ok=True)
    console.save_svg(str(out), title="sluice status sluice.yaml")
    return out


BACKLOG = {"orders": 46_000, "customers": 0, "events": 1_250}
"""Rows (messages) each source has left, as ``sluice status`` counts them (none of the
away one: its database did not answer)."""
AWAY = {"payments": "no answer in 2.0 s"}
"""The sources whose databases did not answer ``sluice status``."""

SHOTS = {"page": shoot_page, "status": record_status}


def main(names: list[str]) -> None:
    """Make the shots named (every one without names)."""
    for name in names or list(SHOTS):
        if name not in SHOTS:
            raise SystemExit(f"no shot {name!r} (shots: {', '.join(SHOTS)})")
        print(f"{name}: {SHOTS[name]().relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
