"""A COPY's output read through ``psql`` (and through psycopg where there is none).

Both ways must give the very bytes the server sends; an error must come as
the statement's own would (SQLAlchemy's wrapper around psycopg's exception
of the SQLSTATE), a server lost mid-read must never look like the end of the
rows, and a reader that stops early must leave no ``psql`` behind.
"""

from __future__ import annotations

import os
import shutil

import pytest
import sqlalchemy as sa

from config.errors import is_transient
from spark_jobs.engines.postgresql import copy_out as module
from spark_jobs.engines.postgresql.read import SESSION, conninfo
from tests.helpers import wait_until

pytestmark = pytest.mark.postgres

ROWS = "SELECT g, repeat('é', g % 50), g * interval '1 s' FROM generate_series(1, 200000) g"


@pytest.fixture(params=["psql", "psycopg"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs through ``psql`` and through psycopg."""
    if request.param == "psql":
        assert shutil.which("psql"), "psql is installed with the PostgreSQL client (make test)"
    else:
        monkeypatch.setenv("SLUICE_PSQL", "none")
    return str(request.param)


def _read(url: str, statement: str) -> bytes:
    return b"".join(module.copy_out(conninfo(url), statement, SESSION))


def test_both_ways_give_the_bytes_the_server_sends(pg_url: str, way: str) -> None:
    binary = _read(pg_url, f"COPY ({ROWS}) TO STDOUT (FORMAT binary)")
    text = _read(pg_url, f"COPY ({ROWS}) TO STDOUT")
    assert binary.startswith(b"PGCOPY\n\xff\r\n\x00") and binary.endswith(b"\xff\xff")
    lines = text.decode().splitlines()
    assert len(lines) == 200_000
    # The session's forms: intervals as PostgreSQL prints them, whatever the server's default.
    assert lines[-1] == "200000\t\t55:33:20"
    assert lines[0] == "1\té\t00:00:01"


def test_a_query_error_is_the_statement_s_own(pg_url: str, way: str) -> None:
    with pytest.raises(sa.exc.ProgrammingError) as raised:
        _read(pg_url, "COPY (SELECT * FROM no_such_table) TO STDOUT")
    assert "no_such_table" in str(raised.value)
    assert not is_transient(raised.value)


def test_a_refused_connection_is_transient(pg_url: str, way: str) -> None:
    dead = sa.make_url(pg_url).set(port=1)
    with pytest.raises(sa.exc.OperationalError) as raised:
        _read(dead.render_as_string(hide_password=False), f"COPY ({ROWS}) TO STDOUT")
    assert is_transient(raised.value)


def test_a_server_lost_mid_read_is_an_error_not_the_end(pg_url: str, way: str) -> None:
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    database = sa.make_url(pg_url).database
    many = "SELECT g, repeat('x', 100) FROM generate_series(1, 5000000) g"
    chunks = module.copy_out(conninfo(pg_url), f"COPY ({many}) TO STDOUT", SESSION)
    read = len(next(chunks))
    with admin.connect() as conn:
        conn.execute(sa.text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :db "
            "AND pid <> pg_backend_pid() AND query LIKE 'COPY%'"), {"db": database},
        )  # fmt: skip
    admin.dispose()
    with pytest.raises(sa.exc.OperationalError) as raised:
        for chunk in chunks:
            read += len(chunk)
    assert is_transient(raised.value)
    assert read < 5_000_000 * 100


def test_a_reader_that_stops_leaves_no_psql_behind(pg_url: str, way: str) -> None:
    chunks = module.copy_out(conninfo(pg_url), f"COPY ({ROWS}) TO STDOUT", SESSION)
    next(chunks)
    chunks.close()
    assert not [p for p in _children() if _name(p) == "psql"]
    engine = sa.create_engine(pg_url)
    # Client backends only: an autovacuum worker may visit the new database meanwhile.
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :db "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")  # fmt: skip
    with engine.connect() as conn:
        # The server notices the client gone at its next write.
        wait_until(lambda: conn.execute(query, {"db": sa.make_url(pg_url).database}
                                        ).scalar_one() == 0, "the read's backend gone")  # fmt: skip
    engine.dispose()


def _children() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def test_a_small_read_goes_through_psycopg(pg_url: str) -> None:
    statement = f"COPY ({ROWS}) TO STDOUT"
    small = module.copy_out(conninfo(pg_url), statement, SESSION, rows=module.PSQL_ROWS - 1)
    next(small)
    assert not [p for p in _children() if _name(p) == "psql"]  # psql costs ~45 ms to start
    small.close()
    large = module.copy_out(conninfo(pg_url), statement, SESSION, rows=module.PSQL_ROWS)
    next(large)
    assert [p for p in _children() if _name(p) == "psql"]
    large.close()


def test_a_tasks_small_reads_share_one_session_and_a_lost_one_is_replaced(pg_url: str) -> None:
    """Inside :func:`one_session` (a load's task), reads through psycopg (fewer rows than
    ``PSQL_ROWS``) reuse the connection: 1,000 small tables are not 1,000 sessions. One the
    server ended meanwhile is replaced and the read gives all of its rows; one given up
    mid-read is not kept; at the session's end none stays open. Outside, each read has its
    own."""
    info = conninfo(pg_url)
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")

    def backend() -> int:
        return int(b"".join(module.copy_out(info, "COPY (SELECT pg_backend_pid()) TO STDOUT",
                                            SESSION, rows=1)))  # fmt: skip

    def alive(pid: int) -> bool:
        with admin.connect() as conn:
            return bool(conn.execute(sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"),
                                     {"pid": pid}).first())  # fmt: skip

    alone = backend()
    assert backend() != alone
    with module.one_session():
        first = backend()
        assert backend() == first
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        wait_until(lambda: not alive(first), "the ended session to be gone")
        again = backend()
        assert again != first
        assert b"".join(module.copy_out(info, f"COPY ({ROWS} LIMIT 10) TO STDOUT", SESSION,
                                        rows=10)).count(b"\n") == 10  # fmt: skip
        chunks = module.copy_out(info, f"COPY ({ROWS}) TO STDOUT", SESSION, rows=1)
        next(chunks)
        chunks.close()  # given up: its session is closed, not kept half read
        last = backend()
        assert last != again
    wait_until(lambda: not alive(last), "the session's connection to be closed at its end")
    admin.dispose()
