"""Shared by the benchmarks: how a figure is printed, throwaway databases, timed processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

TIMEOUT = 3600  # seconds per process: a hung run fails the benchmark, never the machine
ROOT = Path(__file__).resolve().parent.parent
FIRST_TO_LAST = re.compile(
    r"sluice: ([\d,]+) rows in ([\d.]+) s \(([\d,]+) rows/s\) from the first batch")


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


@contextmanager
def pg_database(admin_url: str) -> Iterator[str | None]:
    """The URL of a new throwaway PostgreSQL database, dropped on the way out.

    None (said on stderr) when PostgreSQL cannot be reached: the caller skips
    its PostgreSQL figures.
    """
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"sluice_bench_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as error:
        print(f"PostgreSQL not reachable, skipping its figures: {error}", file=sys.stderr)
        admin.dispose()
        yield None
        return
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class Run:
    """One timed process: its wall time and the peak RSS of its Python and JVM processes."""

    seconds: float
    python_mb: float = 0.0
    jvm_mb: float = 0.0
    output: str = ""


class Server:
    """Throwaway databases in one server (PostgreSQL or MariaDB)."""

    def __init__(self, admin_url: str) -> None:
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.pg = self.admin.dialect.name == "postgresql"

    def url(self, name: str) -> str:
        url = self.admin.url.set(database=name)
        if not self.pg:
            url = url.update_query_dict({"charset": "utf8mb4"})
        return url.render_as_string(hide_password=False)

    def create(self, name: str) -> str:
        self.drop(name)
        with self.admin.connect() as conn:
            extra = "" if self.pg else " CHARACTER SET utf8mb4"
            conn.execute(sa.text(f'CREATE DATABASE "{name}"' if self.pg else
                                 f"CREATE DATABASE `{name}`{extra}"))  # fmt: skip
        return self.url(name)

    def drop(self, name: str) -> None:
        with self.admin.connect() as conn:
            if self.pg:
                conn.execute(
                    sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": name},
                )  # fmt: skip
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            else:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))

    def checkpoint(self) -> None:
        """Flush what the last run left dirty now, not during the next timed run."""
        if self.pg:
            with self.admin.connect() as conn:
                conn.execute(sa.text("CHECKPOINT"))


def tree_rss(root: int) -> tuple[float, float]:
    """(Python MB, JVM MB): resident memory of the process tree under ``root``."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as comm:
                names[int(entry)] = comm.read().strip()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    python = jvm = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if names.get(pid) == "java":
            jvm += rss.get(pid, 0)
        elif names.get(pid, "").startswith(("python", "sluice")):
            python += rss.get(pid, 0)
    return python / 2**20, jvm / 2**20


def timed(
    command: list[str] | str, cwd: Path | None = None, expect: str = "", code: Path | None = None
) -> Run:
    """Run a command in a fresh process; its wall time and peak memory. ``code``: the
    checkout whose sluice it runs (default: this one)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(code or ROOT),
           "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    out = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the process ends
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
        shell=isinstance(command, str),
        executable="/bin/bash" if isinstance(command, str) else None,
    )  # fmt: skip
    peak = [0.0, 0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            python, jvm = tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], python), max(peak[1], jvm)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        code = proc.wait(timeout=TIMEOUT)
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - started
    out.seek(0)
    output = out.read().decode(errors="replace")
    out.close()
    if code != 0 or expect not in output:
        sys.stderr.write(output[-4000:])
        shown = command if isinstance(command, str) else " ".join(command[:4])
        raise SystemExit(f"{shown} exited with {code}" + (f", no {expect!r}" if code == 0 else ""))
    return Run(seconds, peak[0], peak[1], output[-4000:])


def first_to_last(output: Run | str) -> float | None:
    """sluice's rows/s from its first batch to its last, from its summary line."""
    found = FIRST_TO_LAST.search(output.output if isinstance(output, Run) else output)
    return float(found.group(3).replace(",", "")) if found else None
