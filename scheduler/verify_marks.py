"""A live stream's table verified once, then only the rows its changes touched since.

Comparing every row of a large table while its source is written to takes
minutes (the servers' row sums differ while changes are in flight, and Spark
reads both tables whole), and at the cutover the writes are stopped for as long
as the verify takes. A stream whose changes anyone can read again from an
earlier position (the binary log:
:attr:`~spark_jobs.engines.sessions.Sessions.rereads_changes`) needs that only
once, while the application still writes:

- before it reads, a verify notes the source's position and the position the
  target holds (``_sluice_streams``); ``since`` is the lower of the two;
- it compares the rows, then reads the source's changes after ``since`` up to
  now: a differing row whose key one of them touched is a change not applied
  yet (``in flight``), not a difference;
- with no other difference, the target keeps ``since`` (``_sluice_verified``).

A row no change from ``since`` on touched was equal when it was read, and neither
side has changed it since: the source made no change of it, and the target
takes only the stream's (a load range or a catch-up writes the row as the
source then holds it, which is as it held it at ``since``). So the rows to
compare again are those changed from ``since`` on (the transaction at ``since``
included: the target may have held part of it): proven by the servers' own row
sums over their keys, else compared in Spark, which names the keys. A verify
does that for the rows changed while it read, up to
:data:`~scheduler.verify_tables.FOLLOW_UPS` times, so that the mark it keeps
is recent; the cutover, the writes stopped and the stream applied to its end,
does it once, with the two tables' row counts, and no difference is in flight
then. Too many changes since (more than :data:`MAX_CHANGED`), a truncate, counts
that differ at the cutover, or a log purged past ``since``: every row is
compared, as without a mark. A verify that finds a difference keeps no mark;
``sluice reset`` forgets it with the stream's position.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.models import JdbcTargetConfig, SqlSourceConfig
from spark_jobs.common.jdbc import sql_engine
from spark_jobs.engines import url_traits
from spark_jobs.load.target import TargetTable
from spark_jobs.verify.compare import TableDiff
from spark_jobs.verify.keys import encoded
from spark_jobs.verify.read import Scope

log = logging.getLogger("sluice.verify")

MAX_CHANGED = 1_000_000
"""Rows changed since the mark above which every row is compared again (a long list of
keys read by value costs about what a read of a whole table of several times as many
does), and which a verify holds the keys of while it reads."""


class StreamMarks:
    """The marks of one stream source whose changes can be read again (see the module)."""

    def __init__(self, name: str, source: SqlSourceConfig, target: TargetTable) -> None:
        from sources.sqldb import SourceDatabase
        from sources.stream import backend_of

        assert isinstance(target.config, JdbcTargetConfig)
        self.name = name
        self.source = source
        self._target = sql_engine(target.config.url)
        # A reader of its own, not the group's: a verify is another process.
        alone = source.model_copy()
        alone._group = None  # noqa: SLF001 - the config's own copy, made for this
        self._db = SourceDatabase(name, alone, None)
        self._backend = backend_of(name, alone, self._db)
        self._backend.open()

    @classmethod
    def of(cls, name: str, source: SqlSourceConfig, target: TargetTable) -> StreamMarks | None:
        """The marks of ``source``, a stream of an engine whose changes can be read again into
        a JDBC target; None for any other source."""
        if source.mode != "stream" or not isinstance(target.config, JdbcTargetConfig):
            return None
        if not url_traits(source.url).rereads_changes:
            return None
        try:
            return cls(name, source, target)
        except Exception as error:  # noqa: BLE001 - every row is compared then: say why
            log.warning("source %s: its change stream cannot be read here (%s): every row is "
                        "compared, and no mark is kept", name, error)  # fmt: skip
            return None

    def positions(self) -> tuple[int, int] | None:
        """The source's position now and the one the target holds (None: none yet)."""
        from spark_jobs.changes.positions import stream_position

        held = stream_position(self._target, self.name)
        return None if held is None else (self._backend.position(), held[0])

    def kept(self) -> int | None:
        """The position the last verify that proved the table equal kept; None: none."""
        from spark_jobs.changes.positions import verified_since

        return verified_since(self._target, self.name)

    def keep(self, since: int | None) -> None:
        """Keep ``since`` as proven (None: forget what was kept)."""
        from spark_jobs.changes.positions import keep_verified

        keep_verified(self._target, self.name, since)

    def changed(
        self, since: int, typed: Callable[[Sequence[Any]], list[Any]], *, inclusive: bool
    ) -> list[list[Any]] | None:
        """The keys (as ``typed`` types them) of the rows the source's changes after
        ``since`` touched, up to now, and those of the transaction at ``since`` too where
        ``inclusive``; None when they cannot stand in for every row: more than
        :data:`MAX_CHANGED`, a truncate, or a log that no longer reaches back there."""
        from sources.stream_catchup import touched_since

        start = since - 1 if inclusive else since
        if start < 1:
            return None
        began = time.monotonic()
        try:
            touched, reached = touched_since(self._backend, self.source.key_columns, start)
        except Exception as error:  # noqa: BLE001 - every row is compared then: say why
            log.warning("source %s: its changes since %s cannot be read again (%s): every "
                        "row is compared", self.name, since, error)  # fmt: skip
            return None
        keys = touched.keys
        log.info("source %s: %s changes of %s rows from position %s to %s, read again in "
                 "%.1f s", self.name, touched.changes, len(keys), start + 1, reached,
                 time.monotonic() - began)  # fmt: skip
        if touched.truncated or len(keys) > MAX_CHANGED:
            return None
        try:
            return [typed(list(key)) for key in keys]
        except (TypeError, ValueError):
            return None

    def counts(self, target: TargetTable) -> tuple[int, int]:
        """The source's and the target's row counts (the source's with its ``where:``)."""
        schema, _, table = self.source.table.rpartition(".")
        where = sa.text(self.source.where) if self.source.where else sa.true()
        mine = sa.select(sa.func.count()).select_from(sa.table(table, schema=schema or None))
        theirs = sa.select(sa.func.count()).select_from(
            sa.table(target.table, schema=target.schema))  # fmt: skip

        def count(engine: sa.Engine, query: sa.Select[Any]) -> int:
            with engine.connect() as conn:
                return int(conn.execute(query).scalar_one())

        with ThreadPoolExecutor(2, thread_name_prefix="verify-count") as pool:
            source_rows = pool.submit(count, self._db.engine, mine.where(where))
            return source_rows.result(), count(self._target, theirs)

    def close(self) -> None:
        """Let go of the source's reader and connections."""
        self._backend.close()
        self._db.close()


@dataclass
class Marked:
    """A stream's marks as one verify uses them (see the module): where both sides stood
    before it read; at the cutover (``final``), the rows changed since the kept mark (None:
    every row is compared), with the two tables' row counts."""

    marks: StreamMarks
    delta: bool  # only the rows changed since the kept mark, where it can be
    final: bool  # the cutover's: no change is in flight
    since: int | None = None
    listed: list[list[Any]] | None = None
    rows: tuple[int, int] = (0, 0)
    behind: bool = False  # the target was behind the source as the verify began
    _kept: int | None = None

    def sums_worth(self) -> bool:
        """Whether the servers' row sums may prove the rows this pass compares: not over a
        whole table whose target was behind (changes in flight: they would differ, after
        minutes of hashing on both servers)."""
        return self.listed is not None or not self.behind

    def ready(self, target: TargetTable, typed: Callable[[Sequence[Any]], list[Any]]) -> bool:
        """Whether only the rows changed since the kept mark need comparing (they are then
        :attr:`listed`, the tables' row counts :attr:`rows`), as both sides stand now."""
        self._note_positions()
        self._kept = self.marks.kept()
        if self._kept is None:
            return False
        with ThreadPoolExecutor(1, thread_name_prefix="verify-counts") as pool:
            counting = pool.submit(self.marks.counts, target)  # while the log is read
            # The transaction the mark was taken at too: the target may have held part of it.
            changed = self.marks.changed(self._kept, typed, inclusive=True)
            if changed is None:
                return False
            self.rows = counting.result()
        if self.final and self.rows[0] != self.rows[1]:
            # While the application writes, the target's count lags; at the cutover it
            # may not: every row is compared, to be told which.
            log.warning("source %s: %s rows against the target's %s: every row is compared",
                        self.marks.name, *self.rows)  # fmt: skip
            return False
        self.listed = changed
        return True

    def scope(self, target: TargetTable, typed: Callable[[Sequence[Any]], list[Any]],
              scope: Scope, said: str) -> tuple[Scope, str]:  # fmt: skip
        """The scope to compare, and how the report says so; notes where both sides stand
        (unless :meth:`ready` did)."""
        if self.listed is None:
            if not self.delta:
                self._note_positions()
                return scope, said
            if not self.ready(target, typed):
                return scope, said
        assert self.listed is not None
        kept = self._kept
        return Scope(keys=self.listed), (
            f"every row: the {len(self.listed):,} changed from position {kept} on compared "
            f"now, the rest proven equal by the verify that kept {kept}")  # fmt: skip

    def _note_positions(self) -> None:
        """:attr:`since`: the lower of the source's position now and the one the target
        holds, taken before the verify reads either (the changes from there on may be in
        one read and not in the other; None: the target holds no change yet); and whether
        the target is :attr:`behind`."""
        found = self.marks.positions()
        self.since = None if found is None else min(found)
        self.behind = found is not None and found[0] > found[1]

    def proven(self) -> None:
        """The servers' sums found the rows compared equal: keep :attr:`since`."""
        self.marks.keep(self.since)

    def settle(self, diff: TableDiff, typed: Callable[[Sequence[Any]], list[Any]]) -> None:
        """Differing rows changed since :attr:`since` are in flight (but at the cutover: the
        stream is applied to its end); keep :attr:`since` when nothing else differs, else
        forget any mark."""
        if self.since is not None and not diff.equal and not self.final:
            # Not the transaction at ``since``: whether the target held all of it is not
            # known here, so a difference of it counts (no mark) rather than be let go.
            changed = self.marks.changed(self.since, typed, inclusive=False)
            if changed is not None:
                diff.set_in_flight({encoded(key) for key in changed})
        self.marks.keep(self.since if diff.equal and not diff.pending else None)
