"""``sluice demo`` on a terminal: one whole bar per source, with rows/s and ETA, start to end.

The demo runs in a pseudo-terminal and its output is played into a terminal
emulator (pyte) as it arrives. After every chunk the screen and its scrollback
must hold at most one bar per source; a stale copy (what a line written
under a live display leaves, such as the JVM's start-up lines) fails the test.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

COLUMNS, LINES = 120, 40
SOURCES = ("orders", "customers")
JVM_LINES = ("Using incubator modules", "Setting default log level", "NativeCodeLoader")


def _screen_lines(screen: pyte.HistoryScreen) -> list[str]:
    """The scrollback's lines, then the screen's."""
    history = ["".join(ch.data for ch in line.values()) for line in screen.history.top]
    return history + list(screen.display)


def _bars(lines: list[str], source: str) -> list[str]:
    return [line for line in lines if line.lstrip().startswith(source) and "━" in line]


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_demo_shows_one_whole_bar_per_source_with_eta(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS),
           "LINES": str(LINES), "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip
    env.pop("CI", None)  # rich draws no live display when it sees a CI
    sluice = str(Path(sys.executable).with_name("sluice"))
    proc = subprocess.Popen(
        [sluice, "demo", "--rows", "3000", "--out", str(tmp_path / "demo")],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env, start_new_session=True,
    )
    os.close(secondary)
    screen = pyte.HistoryScreen(COLUMNS, LINES, history=10_000)
    stream = pyte.ByteStream(screen)
    seen_bars = 0
    deadline = time.monotonic() + 280
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            stream.feed(chunk)
            lines = _screen_lines(screen)
            for source in SOURCES:
                bars = _bars(lines, source)
                assert len(bars) <= 1, f"{source}: {len(bars)} bars on screen:\n" + "\n".join(bars)
                if bars:
                    seen_bars += 1
                    assert "eta" in bars[0] or "done" in bars[0], bars[0]
    finally:
        proc.kill() if proc.poll() is None else None
        os.close(primary)
    assert proc.wait(timeout=30) == 0
    lines = _screen_lines(screen)
    text = "\n".join(lines)
    assert seen_bars > 2, text  # the bars were drawn, and redrawn, while the run went
    for source in SOURCES:
        bars = _bars(lines, source)
        assert len(bars) == 1 and "done" in bars[0] and "rows/s" in bars[0], text
    assert not [line for line in lines if any(jvm in line for jvm in JVM_LINES)], text
    assert "3,000 rows" in text.replace("\n", " ") or "3,000" in text, text
    log = tmp_path / "demo" / "spark.log"
    assert log.exists()  # the JVM's output went there instead
