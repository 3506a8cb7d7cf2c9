"""Database servers of the tests' own, for settings the machine's servers must not change.

The machine's PostgreSQL runs with ``wal_level=replica`` and its MariaDB with
``log_bin=OFF``; both are shared: never reconfigured or restarted. A change
stream needs ``wal_level=logical``, so the tests that read one start a
PostgreSQL of their own (the machine's PostgreSQL 15 binaries, ``initdb`` and
``pg_ctl``, as the ``postgres`` user when run as root) on a free loopback port
in a temporary folder, and remove it at the end of the session; those that
read MariaDB's binary log start a MariaDB of their own with ``log_bin`` and
``binlog_format=ROW``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

PG_BIN = Path(os.environ.get("SLUICE_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
MARIADBD = os.environ.get("SLUICE_TEST_MARIADBD", "/usr/sbin/mariadbd")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answered(url: str, seconds: float, dead: Callable[[], str | None], sql: str = "") -> None:
    """Wait until the server at ``url`` takes a connection (and runs ``sql``); raise
    RuntimeError after ``seconds``, or as soon as ``dead()`` says why it never will."""
    engine = sa.create_engine(url)
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                with engine.connect() as conn:
                    if sql:
                        conn.exec_driver_sql(sql)
                    return
            except sa.exc.OperationalError as error:
                why = dead()
                if why is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{url} did not start: {error}; {why or ''}") from error
                time.sleep(0.2)
    finally:
        engine.dispose()


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
        answered(self.admin_url, 30, lambda: None)

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


class BinlogMariaDB:
    """A throwaway MariaDB writing a row-based binary log with GTIDs: :meth:`start`,
    :attr:`admin_url`, :meth:`stop`. ``root`` without a password, 127.0.0.1 only, nothing
    flushed to disk at each commit (nothing here must survive a crash of the machine)."""

    def __init__(self) -> None:
        self.port = 0
        self.folder: Path | None = None
        self._server: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        """Whether ``mariadbd`` and ``mariadb-install-db`` are installed."""
        return shutil.which("mariadb-install-db") is not None and Path(MARIADBD).exists()

    @property
    def admin_url(self) -> str:
        """The server's ``test`` database as ``root``."""
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/test?charset=utf8mb4"

    def start(self) -> None:
        """Make a data folder, start the server on a free port; wait until it answers."""
        self.folder = Path(tempfile.mkdtemp(prefix="sluice-mariadb-"))
        self.port = free_port()
        data = self.folder / "data"
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        if user:
            shutil.chown(self.folder, "mysql")
        subprocess.run(["mariadb-install-db", f"--datadir={data}", *user,
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       capture_output=True, check=True, timeout=120)  # fmt: skip
        self._server = subprocess.Popen(
            [MARIADBD, "--no-defaults", f"--datadir={data}", *user, f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.folder / 'sock'}",
             f"--pid-file={self.folder / 'pid'}", f"--log-bin={self.folder / 'binlog'}",
             "--binlog-format=ROW", "--binlog-row-metadata=FULL", "--server-id=1",
             "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=0",
             "--skip-name-resolve", f"--log-error={self.folder / 'log'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server, log = self._server, self.folder / "log"

        def dead() -> str | None:
            if server.poll() is None:
                return None
            return f"mariadbd exited: {log.read_text()[-2000:] if log.exists() else ''}"

        answered(self.admin_url.replace("/test?", "/?"), 60, dead,
                 "CREATE DATABASE IF NOT EXISTS test")  # fmt: skip

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        try:
            if self._server is not None:
                self._server.terminate()
                try:
                    self._server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self._server.kill()
                    self._server.wait()
        finally:
            self._server = None
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = None
