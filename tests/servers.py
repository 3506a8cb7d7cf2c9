"""Database servers of the tests' own, for settings the machine's servers must not change.

The machine's PostgreSQL runs with ``wal_level=replica`` and is shared: it is
never reconfigured or restarted. A change stream needs ``wal_level=logical``,
so the tests that read one start a PostgreSQL of their own (the machine's
PostgreSQL 15 binaries, ``initdb`` and ``pg_ctl``, as the ``postgres`` user
when run as root) on a free loopback port in a temporary folder, and remove
it at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

PG_BIN = Path(os.environ.get("SLUICE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LogicalPostgres:
    """A throwaway PostgreSQL with logical decoding: :meth:`start`, :attr:`admin_url`, :meth:`stop`.

    Trust authentication on 127.0.0.1 only, ``fsync`` off (nothing here must
    survive a crash of the machine). ``available()`` says whether the
    binaries are there.
    """

    def __init__(self) -> None:
        self.port = 0
        self.folder: Path | None = None

    @staticmethod
    def available() -> bool:
        """Whether PostgreSQL's server binaries are installed where :data:`PG_BIN` says."""
        return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()

    @property
    def admin_url(self) -> str:
        """The server's ``postgres`` database as user ``postgres``."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """initdb a new cluster in a temporary folder and start it; wait until it answers."""
        self.folder = Path(tempfile.mkdtemp(prefix="sluice-pg-"))
        self.port = free_port()
        data = self.folder / "data"
        self._run([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                   "-E", "UTF8", "--locale=C.UTF-8"])  # fmt: skip
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                   "-c wal_level=logical -c fsync=off -c max_connections=60 "
                   "-c max_replication_slots=20 -c max_wal_senders=20")  # fmt: skip
        self._run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options,
                   "-l", str(self.folder / "log"), "-w", "start"])  # fmt: skip
        engine = sa.create_engine(self.admin_url)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with engine.connect():
                        return
                except sa.exc.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            engine.dispose()

    def stop(self) -> None:
        """Stop the server (fast) and remove its folder."""
        if self.folder is None:
            return
        try:
            self._run([str(PG_BIN / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast",
                       "-w", "stop"])  # fmt: skip
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _run(self, command: list[str]) -> None:
        assert self.folder is not None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.folder, "postgres")
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.folder / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): "
                               f"{done.stderr.strip()} {tail}")  # fmt: skip
