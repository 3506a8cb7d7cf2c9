"""A MariaDB change stream: the row binary log read by GTID, whole transactions in order.

Against a MariaDB of the session's own with ``log_bin`` and
``binlog_format=ROW`` (``binlog_mariadb``, :mod:`tests.servers`): inserts,
updates (a key changed), deletes, in commit order, each transaction with its
GTID; other tables and rolled-back work left out; a read resumes exactly
after a position; a purged position is a permanent error that names the way
out. The machine's server (``log_bin=OFF``) is refused with the settings it
needs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from config.errors import ConfigError, SourceError
from sources.binlog_changes import BinlogChangeStream, advanced
from tests.helpers import wait_until

pytestmark = pytest.mark.mariadb


@pytest.fixture
def db(binlog_mariadb: Any) -> sa.Engine:
    engine = sa.create_engine(binlog_mariadb.create("binlog"))
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (id int PRIMARY KEY, name varchar(20), "
                             "amount decimal(10,2))"))  # fmt: skip
        conn.execute(sa.text("CREATE TABLE other (id int PRIMARY KEY)"))
    yield engine
    engine.dispose()


def _write(engine: sa.Engine, *statements: str) -> None:
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))


def test_changes_come_whole_in_commit_order_with_their_gtids(db: sa.Engine) -> None:
    stream = BinlogChangeStream(db.url, ["t"], "source t")
    start = stream.check()
    _write(db, "INSERT INTO t VALUES (1, 'a', 1.50), (2, 'b', NULL)")
    _write(db, "UPDATE t SET id = 20 WHERE id = 2", "DELETE FROM t WHERE id = 1",
           "INSERT INTO other VALUES (1)")  # fmt: skip
    with db.connect() as conn, conn.begin() as txn:  # rolled back: never in the log
        conn.execute(sa.text("INSERT INTO t VALUES (99, 'x', 0)"))
        txn.rollback()
    _write(db, "INSERT INTO other VALUES (2)")  # no change of t: read past, not handed out
    _write(db, "UPDATE t SET name = 'c' WHERE id = 20")

    read = stream.changes(start)
    # The server's sequence is every session's: others may write meanwhile (other tests).
    reached = int(read.position.rsplit("-", 1)[1])
    first, second, third = read.transactions
    sequences = [int(t.gtid.rsplit("-", 1)[1]) for t in read.transactions]
    assert reached >= sequences[2]
    assert reached <= int(stream.source_position().rsplit("-", 1)[1])
    # The transaction of ``other`` alone between the last two: read past, not handed out.
    assert sequences == sorted(sequences) and sequences[2] - sequences[1] >= 2
    assert abs(datetime.now(UTC) - first.committed_at) < timedelta(minutes=1)
    assert [(c.op, c.new) for c in first.changes] == [
        ("insert", {"id": 1, "name": "a", "amount": Decimal("1.50")}),
        ("insert", {"id": 2, "name": "b", "amount": None}),
    ]
    rekeyed, deleted = second.changes
    assert (rekeyed.op, rekeyed.key(["id"]), rekeyed.old_key(["id"])) == ("update", (20,), (2,))
    assert (deleted.op, deleted.key(["id"]), deleted.new) == ("delete", (1,), None)
    (renamed,) = third.changes
    assert renamed.old_key(["id"]) is None and renamed.new == {"id": 20, "name": "c",
                                                               "amount": None}

    # Resumed after the first transaction, one at a time: exactly what follows.
    after_first = advanced(start, first.gtid)
    one = stream.changes(after_first, max_transactions=1)
    assert [t.gtid for t in one.transactions] == [second.gtid]
    assert one.position == advanced(start, second.gtid)
    rest = stream.changes(one.position)
    assert [t.gtid for t in rest.transactions] == [third.gtid]
    assert stream.changes(read.position).transactions == []


def test_positions_move_per_replication_domain() -> None:
    assert advanced("0-1-5", "0-1-9") == "0-1-9"
    assert advanced("0-1-5,2-3-7", "2-3-8") == "0-1-5,2-3-8"
    assert advanced("", "1-1-1") == "1-1-1"


def test_a_purged_position_is_permanent_and_names_the_way_out(db: sa.Engine) -> None:
    stream = BinlogChangeStream(db.url, ["t"], "source t")
    start = stream.check()
    _write(db, "INSERT INTO t VALUES (1, 'a', 1)")
    with db.connect() as conn:
        # A log is purged once InnoDB's binlog checkpoint has moved past it: again until gone.
        def purged() -> bool:
            conn.execute(sa.text("FLUSH BINARY LOGS"))
            newest = conn.execute(sa.text("SHOW BINARY LOGS")).all()[-1][0]
            conn.execute(sa.text(f"PURGE BINARY LOGS TO '{newest}'"))
            return len(conn.execute(sa.text("SHOW BINARY LOGS")).all()) == 1

        wait_until(purged, "the old binary logs purged", timeout=30)
    with pytest.raises(SourceError) as caught:
        stream.changes(start)
    assert caught.value.permanent and not caught.value.transient
    assert f"source t: the binary log at position {start} is no longer on the server" in str(
        caught.value)
    assert "a new snapshot of the tables is the way out" in str(caught.value)


def test_a_server_without_a_row_binary_log_is_refused_with_what_it_needs(
    mariadb_url: str,
) -> None:
    stream = BinlogChangeStream(mariadb_url, ["t"], "source t")
    with pytest.raises(ConfigError, match=r"source t: .* runs with log_bin=OFF.*: a change "
                                          r"stream needs log_bin=ON, binlog_format=ROW, "
                                          r"binlog_row_metadata=FULL"):  # fmt: skip
        stream.check()
    dead = BinlogChangeStream("mysql+pymysql://root@127.0.0.1:1/x", ["t"], "source t")
    with pytest.raises(SourceError, match="source t: cannot reach the database"):
        dead.check()
