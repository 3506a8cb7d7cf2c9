"""One binary-log reader for every table of a ``tables:`` group on a MariaDB/MySQL server.

Each read of the binary log is a replica connection that reads from a position to the
server's end, whatever tables the transactions on the way changed: a reader per table
reads the whole log once per table. The tables of a group share one
:class:`SharedBinlog` in this process (:func:`take_binlog`): a read brings the changes
of all of them, and what it brought answers the others, while it is at most
:data:`REFRESH` seconds old and starts at or before where they ask from.
"""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from sources.binlog_changes import (
    BinlogChangeStream,
    BinlogRead,
    BinlogTransaction,
    reached,
    sequence,
)
from sources.stream_hub import Guard, Shared

REFRESH = 0.2
"""Seconds a read answers the group's other tables before the log is read again."""


class SharedBinlog:
    """The binary log of the server of ``url``, read for the tables that :meth:`join`."""

    def __init__(self, url: sa.URL, label: str) -> None:
        self.stream = BinlogChangeStream(url, [], label)
        self._lock = threading.Lock()
        self._tables: set[str] = set()
        self._read: BinlogRead | None = None
        self._from = 0  # the sequence number the cached read started after
        self._at_end = False
        self._read_at = -1e9

    def join(self, table: str) -> None:
        """``table`` (``table`` or ``schema.table``) is read from now on."""
        with self._lock:
            self._tables.add(table)
            self.stream.add(table)

    def changes(
        self, after: str, transactions: int, guard: Guard[object]
    ) -> tuple[list[BinlogTransaction], str, bool]:
        """The transactions past ``after`` that changed one of the tables (or wrote a
        watermark), the position the read reached, and whether that is the server's end
        when the read began."""
        start = sequence(after)
        with self._lock:
            fresh = time.monotonic() - self._read_at <= REFRESH and len(self._tables) > 1
            if not (fresh and self._read is not None and self._from <= start):
                end = str(guard(self.stream.source_position))
                found = guard(lambda: self.stream.changes(after, transactions))
                assert isinstance(found, BinlogRead)
                self._read, self._from = found, start
                self._at_end = reached(found.position, end) if found.position else not end
                self._read_at = time.monotonic()
            read = self._read
            assert read is not None
            ahead = [t for t in read.transactions if sequence(t.gtid) > start]
            return ahead, read.position, self._at_end



_readers: Shared[SharedBinlog] = Shared()


def take_binlog(url: sa.URL, group: str, label: str) -> SharedBinlog:
    """This process's :class:`SharedBinlog` of ``group`` on the server of ``url``; give it
    back with :func:`give_back`."""
    key = (url.render_as_string(hide_password=True), group)
    return _readers.take(key, lambda: SharedBinlog(url, label))


def give_back(reader: SharedBinlog, url: sa.URL, group: str) -> None:
    """One table less reads ``reader``."""
    _readers.give_back((url.render_as_string(hide_password=True), group), reader)
