"""``sluice`` as real processes: each run leads its own process group.

:class:`Proc` starts ``sluice run`` with ``start_new_session=True``, so that
:meth:`Proc.kill` takes the Spark JVM and its Python workers down with the
daemon, exactly as ``kill -9`` of the whole group would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

SLUICE = str(Path(sys.executable).parent / "sluice")


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


class Proc:
    """One ``sluice`` process, leader of its own process group."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.started = time.monotonic()
        self.killed = False

    @property
    def pid(self) -> int:
        """The daemon's pid, which is also its process group id."""
        return self.popen.pid

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        return self.popen.poll()

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s; the exit code, or None if it still runs."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """``kill -9`` the whole group (daemon, Spark JVM, Python workers) and wait for it."""
        self.killed = True
        with suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=60)
        self.wait_group_gone()

    def stop(self) -> None:
        """SIGTERM to the daemon alone (its first signal drains), as systemd's
        ``KillMode=mixed`` does: sent to the group, it would kill the Spark JVM at once."""
        with suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)

    def wait_group_gone(self, timeout: float = 30.0) -> None:
        """Wait until no process of the group runs (a crash point kills its group itself)."""
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while _group_alive(self.pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"process group {self.pid} still alive {timeout} s after kill")
            pause.wait(0.1)  # another process's exit: nothing to wait on but time

    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def tail(self, chars: int = 4000) -> str:
        """The end of the output, for assertion messages."""
        return f"--- {self.log_path} ---\n{self.output()[-chars:]}"


def sluice(*args: str, env: dict[str, str] | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    """Run one short ``sluice`` command (status, retry, validate) and capture its output."""
    return subprocess.run(
        [SLUICE, *args], capture_output=True, text=True, timeout=timeout,
        env=env or base_env(), check=False,
    )


def base_env(**extra: str) -> dict[str, str]:
    """The environment of every sluice process: loopback Spark, no instance metadata."""
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_FAULT"}
    env.update(SPARK_LOCAL_IP="127.0.0.1", AWS_EC2_METADATA_DISABLED="true",
               PYTHONUNBUFFERED="1", **extra)
    return env
