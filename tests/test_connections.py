"""Every connection sluice opens sends TCP keepalives, in the daemon's process and in its load
tasks' workers: a database that goes silent mid-query fails the query within about a minute."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from config.connections import KEEPALIVES
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.engines.connections import bound_connections
from spark_jobs.tasks.local_tasks import LocalTasks


def _libpq_settings(url: str) -> dict[str, str]:
    """The keepalive parameters a PostgreSQL connection of ``sql_engine(url)`` was opened with."""
    with sql_engine(url).connect() as conn:
        given = conn.connection.driver_connection.info.get_parameters()  # type: ignore[union-attr]
    return {name: value for name, value in given.items() if name.startswith("keepalives")}


def _mysql_socket(url: str) -> tuple[int, int, int, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            sock = conn.connection.driver_connection._sock  # type: ignore[union-attr]
            return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))  # fmt: skip
    finally:
        engine.dispose()


EXPECTED = {name: str(value) for name, value in KEEPALIVES.items()}


@pytest.mark.postgres
def test_postgresql_connections_keep_alive_in_the_daemon_and_in_a_load_tasks_worker(
    pg_factory: Any,
) -> None:
    url = pg_factory.create("keepalive")
    bound_connections()  # what the command line does first
    assert _libpq_settings(url) == EXPECTED
    # A worker is a process of its own: sql_engine bounds its connections there too.
    tasks = LocalTasks(1)
    try:
        assert tasks.run(_libpq_settings, url) == EXPECTED
    finally:
        tasks.close()


@pytest.mark.postgres
def test_a_postgresql_url_sets_its_own_keepalives(pg_factory: Any) -> None:
    url = pg_factory.create("keepalive_own")
    bound_connections()
    own = sa.make_url(url).update_query_dict({"keepalives_idle": "45"})
    found = _libpq_settings(own.render_as_string(hide_password=False))
    assert found == {**EXPECTED, "keepalives_idle": "45"}


@pytest.mark.mariadb
def test_mysql_connections_keep_alive(mariadb_factory: Any) -> None:
    url = mariadb_factory.create("keepalive")
    bound_connections()
    assert _mysql_socket(url) == (1, KEEPALIVES["keepalives_idle"],
                                  KEEPALIVES["keepalives_interval"],
                                  KEEPALIVES["keepalives_count"])  # fmt: skip


@pytest.mark.mariadb
def test_the_binary_log_readers_connections_keep_alive(
    binlog_mariadb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica connections a change stream reads the binary log on (the library's
    control and stream connections) carry the same keepalives."""
    import sources.binlog_changes as binlog

    url = binlog_mariadb.create("keepalive")
    seen: list[tuple[int, int, int, int]] = []
    keep = binlog.keep_alive

    def recorded(connection: Any) -> None:
        keep(connection)
        sock = connection._sock
        seen.append((sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                     sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                     sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                     sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)))  # fmt: skip

    monkeypatch.setattr(binlog, "keep_alive", recorded)
    stream = binlog.BinlogChangeStream(url, ["t"], "source t")
    start = stream.check()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id integer PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    engine.dispose()
    read = stream.changes(start)
    assert [c.new for t in read.transactions for c in t.changes] == [{"id": 1}]
    expected = (1, KEEPALIVES["keepalives_idle"], KEEPALIVES["keepalives_interval"],
                KEEPALIVES["keepalives_count"])  # fmt: skip
    assert len(seen) >= 3 and set(seen) == {expected}  # check's, and the reader's two



def _keepalive_timer(local_port: int) -> bool | None:
    """Whether the keepalive timer of this machine's TCP connection from ``local_port`` runs
    (``/proc/net/tcp``'s timer 2); None when there is no such connection."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == local_port:
            return fields[5].split(":")[0] == "02"
    return None


@pytest.mark.mariadb
def test_connectorx_reads_keep_alive(mariadb_factory: Any) -> None:
    """A MariaDB read by connectorx (the Rust driver, outside Python's sockets) runs on a
    connection whose keepalive timer runs. Read over TCP: on the database's own host the
    driver would take the server's Unix socket."""
    import threading

    connectorx = pytest.importorskip("connectorx")
    from spark_jobs.engines.mysql.read import connectorx_url

    url = mariadb_factory.create("keepalive")
    over_tcp = connectorx_url(url) + "&prefer_socket=false"
    reading = threading.Thread(target=connectorx.read_sql,
                               args=(over_tcp, "SELECT SLEEP(3) AS keepalive_probe"),
                               kwargs={"return_type": "arrow"})  # fmt: skip
    reading.start()
    engine = sa.create_engine(url)
    try:
        host = None
        deadline = time.monotonic() + 10
        while host is None and time.monotonic() < deadline:
            with engine.connect() as conn:  # the server says which client port runs it
                host = conn.execute(sa.text(
                    "SELECT host FROM information_schema.processlist "
                    "WHERE info LIKE 'SELECT SLEEP(3) AS keepalive_probe%'"
                )).scalar()  # fmt: skip
            time.sleep(0.05)
        assert host is not None, "the read never showed in the server's process list"
        assert _keepalive_timer(int(str(host).rsplit(":", 1)[1])) is True
    finally:
        reading.join()
        engine.dispose()
