"""Keys of a SQL table, read in key order with SQLAlchemy Core.

Only the key columns are read: the Spark import job re-reads the rows through
JDBC. An item's ``key`` is always a tuple of the key column values (a 1-tuple
for a simple key). Identifiers are quoted by the dialect, values are bound, and
``where:`` is trusted operator SQL pushed down as written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import sqlalchemy as sa
from cachetools import LRUCache

from config.errors import ConfigError, SourceError, is_transient
from config.models import SqlSourceConfig
from sources.abc import Item, LimitedSource
from spark_jobs.keyorder import row_compare

KeyTuple = tuple[Any, ...]


def _nothing_done(keys: Sequence[KeyTuple]) -> set[KeyTuple]:
    return set()


class SqlSource(LimitedSource):
    """A table's keys in key order: ``keyset``, ``sweep`` or ``incremental``.

    - *keyset*: ranges of keys, not keys: each call plans ranges of at most
      ``range_rows`` rows past ``position`` (the database finds the range's
      last key and counts its rows; no key travels), ``limit`` rows in all.
      An item is a range (``key`` its last key, ``rows`` its size); it never
      returns a range twice. ``position`` advances to the last range's end;
      ``exhausted`` when a range came out shorter than asked.
    - *sweep*: re-reads the ``where:`` rows page by page, from the start again
      after the end, handing out keys neither handed out (not yet acked or
      released) nor done (``is_done``, behind an LRU cache of done keys).
      ``exhausted`` after a full pass found nothing new.
    - *incremental*: ``(cursor, key) > position``; an item's ``version`` is its
      cursor value, so a row whose cursor moves forward comes back (rows with
      a NULL cursor are never read).

    ``next_batch`` blocks on the database and raises :class:`SourceError`:
    transient when the database could not be reached or gave up on the query
    (timeout, deadlock), not transient when it refused the query itself (see
    :func:`is_transient`). ``ack``/``release`` may be called from another
    thread than ``next_batch``.
    """

    def __init__(
        self,
        name: str,
        cfg: SqlSourceConfig,
        *,
        after: KeyTuple | None = None,
        engine: sa.Engine | None = None,
        is_done: Callable[[Sequence[KeyTuple]], set[KeyTuple]] = _nothing_done,
        done_cache_size: int = 100_000,
        range_rows: int | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.weighs_rows = cfg.mode == "keyset"
        # Rows per planned range (keyset): the page size, unless the daemon
        # needs smaller ranges (a batch, or the gate's room, is smaller).
        self.range_rows = max(1, range_rows or cfg.page_size)
        self._owns_engine = engine is None
        self.engine = engine if engine is not None else _make_engine(cfg)
        schema, _, table = cfg.table.rpartition(".")
        cursor = [cfg.cursor] if cfg.mode == "incremental" and cfg.cursor else []
        order: list[sa.ColumnClause[Any]] = [sa.column(c) for c in [*cursor, *cfg.key_columns]]
        self._order_cols = order
        self._table = sa.table(table, *order, schema=schema or None)
        # Escape ':' so the operator's SQL reaches the database verbatim
        # rather than being read as bind parameters (PostgreSQL '::int' casts).
        where = cfg.where.replace(":", "\\:") if cfg.where else None
        self._where = sa.text(f"({where})") if where else None
        # Rows with a NULL cursor have no place in (cursor, key) order: a NULL
        # position would compare as unknown and end the walk (SQLite and
        # MariaDB sort NULLs first), so they are left out explicitly.
        self._has_cursor = order[0].is_not(None) if cursor else None
        self._position = after
        self._exhausted = False
        self._lock = threading.Lock()  # sweep state: ack/release come from other threads
        self._handed: set[KeyTuple] = set()
        self._done: LRUCache[KeyTuple, bool] = LRUCache(maxsize=done_cache_size)
        self._is_done = is_done
        self._found_in_pass = False

    @property
    def position(self) -> KeyTuple | None:
        """The last key read (``(cursor, *key)`` in incremental mode); None at the start."""
        return self._position

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    def reset(self, after: KeyTuple | None) -> None:
        """Continue after ``after`` (None: from the start), e.g. after a lost claim race."""
        self._position = after
        self._exhausted = False

    def check(self) -> None:
        """Run the query with ``LIMIT 0``: raise if it cannot run.

        :class:`SourceError` (transient) when the database cannot be reached;
        :class:`ConfigError` when it answers but refuses the query (missing
        table or column, a failing ``where:``), naming source, table and cause.
        """
        try:
            conn = self.engine.connect()
        except sa.exc.DBAPIError as exc:
            raise self._error("cannot connect", exc) from exc
        with conn:
            try:
                conn.execute(self._select(None, 0)).all()
            except sa.exc.DBAPIError as exc:
                raise ConfigError(self._describe("check query failed", exc)) from exc

    def backlog(self) -> int:
        """Rows still to read, counted without reading them or writing anything.

        Keyset and incremental: rows past :attr:`position` (that match
        ``where:``). Sweep: every row that matches ``where:`` (a sweep reads
        them all again; which are done only the ledger knows). Blocks on the
        database; raises :class:`SourceError` like :meth:`next_batch`.
        """
        after = None if self.cfg.mode == "sweep" else self._position
        stmt = self._filter(sa.select(sa.func.count()).select_from(self._table), after)

        def run() -> int:
            with self.engine.connect() as conn:
                return int(conn.scalar(stmt) or 0)

        return cast(int, self._guard(run))

    def next_batch(self, limit: int) -> list[Item]:
        if limit <= 0:
            return []
        if self.cfg.mode == "sweep":
            return self._sweep(limit)
        if self.cfg.mode == "keyset":
            return self._plan(limit)
        rows = self._read(self._position, limit)
        self._exhausted = len(rows) < limit
        if rows:
            self._position = rows[-1]
        return [Item(self.name, row[1:], version=str(row[0])) for row in rows]

    def ack(self, items: Sequence[Item]) -> None:
        if self.cfg.mode == "sweep":
            with self._lock:
                keys = [cast(KeyTuple, item.key) for item in items]
                self._handed.difference_update(keys)
                self._done.update(dict.fromkeys(keys, True))

    def release(self, items: Sequence[Item]) -> None:
        if self.cfg.mode == "sweep":
            with self._lock:
                self._handed.difference_update(item.key for item in items)

    def close(self) -> None:
        """Dispose of the engine's connections (only an engine this source created)."""
        if self._owns_engine:
            self.engine.dispose()

    # -- keyset ---------------------------------------------------------------

    def _plan(self, limit: int) -> list[Item]:
        """Adjacent ranges past :attr:`position`, ``limit`` rows in all."""
        items: list[Item] = []
        left = limit
        while left > 0:
            size = min(self.range_rows, left)
            end = self._range_end(self._position, size)
            if end is None:
                self._exhausted = True
                return items
            last, rows = end
            items.append(Item(self.name, last, rows=rows))
            self._position = last
            left -= rows
            if rows < size:
                self._exhausted = True
                return items
        # Every range came out full: whether a row is left past the last is
        # one index probe, and knowing it now lets the loop share the last
        # rows among parallel imports (not only on the next, empty, refill).
        self._exhausted = not self._read(self._position, 1)
        return items

    def _range_end(self, after: KeyTuple | None, size: int) -> tuple[KeyTuple, int] | None:
        """The last key and the row count of the next ``size`` rows past ``after``.

        One query over the key's index; None when no row is left.
        """
        inner = self._select(after, size).subquery()
        keys = [inner.c[c.name] for c in self._order_cols]
        if len(keys) == 1:
            stmt = sa.select(sa.func.max(keys[0]), sa.func.count())
        else:
            # A row value has no max(): the last row, with the count of all.
            stmt = (
                sa.select(*keys, sa.func.count().over())
                .order_by(*[k.desc() for k in keys])
                .limit(1)
            )

        def run() -> tuple[Any, ...] | None:
            with self.engine.connect() as conn:
                row = conn.execute(stmt).first()
            return None if row is None else tuple(row)

        row = self._guard(run)
        if row is None or not row[-1]:
            return None
        return tuple(row[:-1]), int(row[-1])

    # -- sweep ---------------------------------------------------------------

    def _sweep(self, limit: int) -> list[Item]:
        out: list[KeyTuple] = []
        wrapped = False
        page_size = self.cfg.page_size
        while len(out) < limit:
            page = self._read(self._position, page_size)
            new = self._not_taken(page)
            want = limit - len(out)
            if len(new) > want:
                # Stop right after the last key taken: the rest come next call.
                new = new[:want]
                self._position = new[-1]
            elif page:
                self._position = page[-1]
            out.extend(new)
            if new:
                self._found_in_pass = True
            if len(page) < page_size and len(out) < limit:
                # End of a pass. A pass that found nothing new means drained;
                # either way the next read starts from the beginning again.
                self._exhausted = not self._found_in_pass
                self._position = None
                self._found_in_pass = False
                if self._exhausted or wrapped or out:
                    break
                wrapped = True  # one more pass in this call, at most
        if out:
            self._exhausted = False
            with self._lock:
                self._handed.update(out)
        return [Item(self.name, key) for key in out]

    def _not_taken(self, page: list[KeyTuple]) -> list[KeyTuple]:
        with self._lock:
            candidates = [k for k in page if k not in self._handed and k not in self._done]
        if not candidates:
            return []
        done = self._guard(lambda: self._is_done(candidates))
        if done:
            with self._lock:
                self._done.update(dict.fromkeys(done, True))
        return [k for k in candidates if k not in done]

    # -- queries -------------------------------------------------------------

    def _select(self, after: KeyTuple | None, limit: int) -> sa.Select[Any]:
        stmt = self._filter(sa.select(*self._order_cols).select_from(self._table), after)
        return stmt.order_by(*self._order_cols).limit(limit)

    def _filter(self, stmt: sa.Select[Any], after: KeyTuple | None) -> sa.Select[Any]:
        """The rows this source reads: past ``after``, matching ``where:``, with a cursor."""
        if after is not None:
            stmt = stmt.where(row_compare(self._order_cols, after, ">", self.engine.dialect.name))
        if self._has_cursor is not None:
            stmt = stmt.where(self._has_cursor)
        if self._where is not None:
            stmt = stmt.where(self._where)
        return stmt

    def _read(self, after: KeyTuple | None, limit: int) -> list[KeyTuple]:
        def run() -> list[KeyTuple]:
            with self.engine.connect() as conn:
                result = conn.execute(self._select(after, limit))
                # The columns are untyped (sa.column): SQLAlchemy has no value
                # to convert, so the driver's rows are taken as they are. A
                # Row object per key cost four times as much, and a refill
                # reads every key of the table on the loop's process.
                return list(map(tuple, result.cursor.fetchall()))

        return self._guard(run)

    def _guard(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except sa.exc.DBAPIError as exc:
            error = self._error("read failed", exc)
            error.transient = is_transient(exc)
            raise error from exc

    def _error(self, what: str, exc: BaseException) -> SourceError:
        return SourceError(self._describe(what, exc))

    def _describe(self, what: str, exc: BaseException) -> str:
        url = self.engine.url.render_as_string(hide_password=True)
        cause = getattr(exc, "orig", None) or exc
        first_line = str(cause).strip().splitlines()[0] if str(cause).strip() else repr(cause)
        return f"source {self.name} (table {self.cfg.table!r} at {url}): {what}: {first_line}"


def _make_engine(cfg: SqlSourceConfig) -> sa.Engine:
    url = sa.make_url(cfg.url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if not (url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")):
        # At most max_connections to the source database, never an overflow.
        kwargs.update(pool_size=cfg.limits.max_connections, max_overflow=0)
    return sa.create_engine(url, **kwargs)
