"""Shared fixtures: real PostgreSQL, MariaDB and Spark on loopback.

Each test session creates its own databases (``sluice_t_<random>_<name>``) in
the machine's servers and drops them at the end; the servers themselves are
never reconfigured. Outside CI a missing service skips its tests with the
reason; in CI (``CI=true``) it fails them, because there it must be present.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_URL = os.environ.get("SLUICE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MARIADB_ADMIN_URL = os.environ.get("SLUICE_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test")
RUN_ID = uuid.uuid4().hex[:8]


def need(available: bool, reason: str) -> None:
    """Skip (locally) or fail (in CI) when a service a test needs is absent."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this service must be present)")
    pytest.skip(reason)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class DatabaseFactory:
    """Creates throwaway databases in one server and drops them once their tests are done.

    A PostgreSQL ``DROP DATABASE`` waits for a checkpoint (a second or two
    on a busy machine): the databases of each test module are dropped on a
    thread of their own while the next modules run (:meth:`drop_later`), so
    that the session's end waits only for the last ones.
    """

    def __init__(self, admin_url: str, dialect: str) -> None:
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.admin_url = sa.make_url(admin_url)
        self.dialect = dialect
        self.created: list[str] = []
        self._handed_over = 0  # created[:_handed_over] are the dropper's
        self._doomed: queue.Queue[str | None] = queue.Queue()
        self._dropper = threading.Thread(target=self._drop_each, name=f"drop-{dialect}",
                                         daemon=True)
        self._dropper.start()
        _FACTORIES.append(self)

    def create(self, name: str) -> str:
        """Create database ``sluice_t_<run>_<name>``; return its SQLAlchemy URL."""
        db = f"sluice_t_{RUN_ID}_{name}_{uuid.uuid4().hex[:6]}"
        quoted = self.admin.dialect.identifier_preparer.quote(db)
        with self.admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {quoted}"))
            conn.execute(sa.text(f"CREATE DATABASE {quoted}"))
        self.created.append(db)
        return self.admin_url.set(database=db).render_as_string(hide_password=False)

    def drop_later(self) -> None:
        """Drop, in the background, every database created so far (their tests are done)."""
        for db in self.created[self._handed_over :]:
            self._doomed.put(db)
        self._handed_over = len(self.created)

    def drop_all(self) -> None:
        """Drop every database not dropped yet, and wait until they are gone."""
        self.drop_later()
        self._doomed.put(None)
        self._dropper.join(timeout=300)  # a drop stuck on a lock must not hang the session
        self.admin.dispose()

    def _drop_each(self) -> None:
        while (db := self._doomed.get()) is not None:
            try:
                self._drop(db)
            except Exception as error:  # a leftover must not fail the session, nor stop the rest
                print(f"could not drop test database {db}: {error}", file=sys.stderr)

    def _drop(self, db: str) -> None:
        quoted = self.admin.dialect.identifier_preparer.quote(db)
        with self.admin.connect() as conn:
            # FORCE (PostgreSQL 13+): a process still connected (a test's
            # daemon child that outlived it) does not block it.
            force = " WITH (FORCE)" if self.dialect == "postgresql" else ""
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {quoted}{force}"))


_FACTORIES: list[DatabaseFactory] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once a module's last test is torn down (its module fixtures too), drop its databases."""
    yield
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        for factory in _FACTORIES:
            factory.drop_later()


@pytest.fixture(scope="session")
def pg_factory() -> Iterator[DatabaseFactory]:
    """Throwaway PostgreSQL databases (user postgres, trust auth)."""
    need(_port_open("127.0.0.1", 5432), "PostgreSQL is not listening on 127.0.0.1:5432")
    factory = DatabaseFactory(PG_ADMIN_URL, "postgresql")
    yield factory
    factory.drop_all()


@pytest.fixture(scope="session")
def mariadb_factory() -> Iterator[DatabaseFactory]:
    """Throwaway MariaDB databases (root, empty password)."""
    need(_port_open("127.0.0.1", 3306), "MariaDB is not listening on 127.0.0.1:3306")
    factory = DatabaseFactory(MARIADB_ADMIN_URL, "mysql")
    yield factory
    factory.drop_all()


def _own_server(server: Any, dialect: str) -> Iterator[DatabaseFactory]:
    """Start ``server`` (:mod:`tests.servers`); throwaway databases in it; stop it at the end."""
    server.start()
    try:
        factory = DatabaseFactory(server.admin_url, dialect)
        yield factory
        factory.drop_all()
        _FACTORIES.remove(factory)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def logical_pg() -> Iterator[DatabaseFactory]:
    """Throwaway databases in a PostgreSQL of the session's own with ``wal_level=logical``
    (:mod:`tests.servers`): the machine's server is shared and runs without it."""
    from tests.servers import PG_BIN, LogicalPostgres

    need(LogicalPostgres.available(), f"PostgreSQL's initdb and pg_ctl are not in {PG_BIN}")
    yield from _own_server(LogicalPostgres(), "postgresql")


@pytest.fixture(scope="session")
def binlog_mariadb() -> Iterator[DatabaseFactory]:
    """Throwaway databases in a MariaDB of the session's own that writes a row binary log
    with GTIDs (:mod:`tests.servers`): the machine's server runs with ``log_bin=OFF``."""
    from tests.servers import BinlogMariaDB

    need(BinlogMariaDB.available(), "mariadbd and mariadb-install-db are not installed")
    yield from _own_server(BinlogMariaDB(), "mysql")


@pytest.fixture
def pg_url(pg_factory: DatabaseFactory, request: pytest.FixtureRequest) -> str:
    """A fresh PostgreSQL database for one test."""
    return pg_factory.create(_short(request.node.name))  # unique per call


@pytest.fixture
def pg_target(pg_factory: DatabaseFactory) -> str:
    """A second PostgreSQL database for the test, as target."""
    return pg_factory.create(f"dst_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def mariadb_url(mariadb_factory: DatabaseFactory, request: pytest.FixtureRequest) -> str:
    """A fresh MariaDB database for one test."""
    return mariadb_factory.create(_short(request.node.name))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Callable[[str], str]:
    """Make SQLite URLs of files under the test's temp folder."""
    return lambda name: f"sqlite:///{tmp_path / name}.db"


def _short(name: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in name.lower())
    return f"{cleaned[:30]}_{uuid.uuid4().hex[:4]}"


def spark_missing_reason() -> str | None:
    """Why Spark cannot run here, or None when it can."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java 17 is not installed (java not on PATH, JAVA_HOME unset)"
    jars = ["postgresql.jar", "mariadb-java-client.jar", "sqlite-jdbc.jar"]
    missing = [j for j in jars if not Path("/usr/share/java", j).exists()]
    if missing:
        return f"JDBC jars missing under /usr/share/java: {', '.join(missing)} (run make jars)"
    return None


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One SparkSession (local[2], loopback only) shared by the whole test session."""
    need(spark_missing_reason() is None, spark_missing_reason() or "")
    from config.models import SparkConfig
    from spark_jobs.tasks.session import build_session

    session = build_session(
        SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}),
        app_name="sluice-tests",
    )
    yield session
    session.stop()


# -- SQS: a moto_server on loopback ------------------------------------------

MOTO_START_TIMEOUT = 20.0  # seconds; moto imports many services before it listens


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP error is an answer too
    except OSError:
        return False


def _wait_until_up(proc: subprocess.Popen[bytes], url: str, deadline: float) -> bool:
    """Poll until the server answers; False if it exits or the deadline passes."""
    while time.monotonic() < deadline:
        if _answers(url):
            return True
        try:
            proc.wait(timeout=0.1)  # the poll interval, cut short if the server dies
        except subprocess.TimeoutExpired:
            continue
        return False
    return False


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``moto_server`` on a free loopback port for the session; yields its endpoint URL."""
    exe = Path(sys.executable).with_name("moto_server")
    need(exe.exists(), f"no moto_server next to {sys.executable} (pip install 'moto[server]')")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("moto") / "moto_server.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        if not _wait_until_up(proc, url, time.monotonic() + MOTO_START_TIMEOUT):
            tail = log_path.read_text(errors="replace")[-500:]
            need(False, f"moto_server not answering on {url} after {MOTO_START_TIMEOUT} s: {tail}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def sqs_queue(moto_server: str) -> Iterator[Callable[..., str]]:
    """Create uniquely named queues in moto; returns ``make(name="q", **attributes) -> url``.

    A dead-letter queue is one more call (``dlq = sqs_queue("dlq")``); extra
    keyword arguments become queue attributes (``VisibilityTimeout="2"``).
    Every queue made is deleted at the end of the test.
    """
    import boto3

    client = boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=moto_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    made: list[str] = []

    def make(name: str = "q", **attributes: str) -> str:
        url = client.create_queue(
            QueueName=f"sluice-{RUN_ID}-{name}-{uuid.uuid4().hex[:6]}", Attributes=attributes
        )["QueueUrl"]
        made.append(url)
        return str(url)

    yield make
    for url in made:
        client.delete_queue(QueueUrl=url)
    client.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the ``chaos_only`` scenarios unless ``CHAOS`` is set (``make chaos``), and
    the ``matrix_only`` pairs unless ``MATRIX`` is (``make matrix``).

    Deselected, not skipped: ``make test`` does not run them by design (they
    run daemons for minutes, or repeat what other pairs take), and a skip
    would read as something missing.
    """
    left_out = [marker for marker, wanted in (("chaos_only", "CHAOS"), ("matrix_only", "MATRIX"))
                if not os.environ.get(wanted)]
    kept = [item for item in items
            if not any(item.get_closest_marker(marker) for marker in left_out)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
