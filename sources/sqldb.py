"""The database a SQL source reads: its engine, and errors that say where they came from."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import sqlalchemy as sa

from config.errors import ConfigError, SourceError, cause_line, is_transient, refused_by_config
from config.models import SqlSourceConfig
from sources.budget import KEY_QUERIES, Budget
from sources.budgets import least
from spark_jobs.engines import url_traits
from spark_jobs.engines.connections import bound_waits

T = TypeVar("T")

_TIMED: ContextVar[bool] = ContextVar("sluice_query_timed", default=True)


@contextmanager
def untimed() -> Iterator[None]:
    """Queries run inside (on this thread) do not count as key queries' latency.

    For a backlog count: its time grows with the table, not with the
    database's load, and must not slow a source down (``max_query_latency``).
    """
    token = _TIMED.set(False)
    try:
        yield
    finally:
        _TIMED.reset(token)


class SourceDatabase:
    """One SQL source's database: the engine and the errors of what runs on it.

    The engine is ``engine`` when given (the caller owns it), otherwise the
    one every source of the URL shares, taken here (:meth:`close` lets go
    of it). A database error becomes a :class:`SourceError` or
    :class:`ConfigError` that names the source, its table and the URL with
    its password hidden.
    """

    def __init__(
        self, name: str, cfg: SqlSourceConfig, engine: sa.Engine | None,
        budget: Budget | None = None,
    ) -> None:  # fmt: skip
        self.name = name
        self._table = cfg.table
        self._owns_engine = engine is None
        self._url = cfg.url
        self.engine = engine if engine is not None else _ENGINES.take(
            cfg.url, cfg.limits.query_timeout)
        # Each query holds a connection permit of the database's budget (a
        # stand-alone source, as in `plan`, has a budget of its own).
        self.budget = budget if budget is not None else Budget(name)

    def check(self, stmt: sa.Select[Any]) -> None:
        """Run ``stmt``: raise if it cannot run.

        :class:`SourceError` (transient) when the database cannot be reached;
        :class:`ConfigError` when it answers but refuses the query.
        """
        with self.budget.connection(owner=self.name):
            try:
                conn = self.engine.connect()
            except sa.exc.DBAPIError as exc:
                if refused_by_config(exc):  # a password, a user, a database, a host name
                    raise ConfigError(self._describe("cannot connect", exc)) from exc
                raise self._error("cannot connect", exc) from exc
            with conn:
                try:
                    conn.execute(stmt).all()
                except sa.exc.DBAPIError as exc:
                    if is_transient(exc):  # cancelled waiting on a lock, the server gone
                        raise self._error("check query failed", exc) from exc
                    raise ConfigError(self._describe("check query failed", exc)) from exc

    def passes(self, stmts: Sequence[sa.Select[Any]]) -> bool:
        """Whether ``stmts`` all run, asked in one round trip: False if any is refused
        or the database cannot be reached (:meth:`check` each to know which and why).

        One script of them all where the driver takes several statements at once
        (their parameters written in), else one ``UNION ALL`` of them.
        """
        dialect = self.engine.dialect
        try:
            script = ";\n".join(
                str(s.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
                for s in stmts
            )  # fmt: skip
        except sa.exc.SQLAlchemyError:
            script = None  # a value with no literal form: the union below binds it
        with self.budget.connection(owner=self.name):
            try:
                with self.engine.connect() as conn:
                    ways: list[Callable[[], object]] = [
                        lambda: conn.execute(_union_of(stmts)).all()
                    ]
                    if script is not None:
                        ways.insert(0, lambda: conn.exec_driver_sql(script))
                    for way in ways:
                        try:
                            with conn.begin():
                                way()
                            return True
                        except sa.exc.DBAPIError:
                            continue  # one statement at a time, or one refused
            except sa.exc.DBAPIError:
                pass
        return False

    def guard(self, call: Callable[[], T], *, connects: bool = True) -> T:
        """Return ``call()``; a database error it raises becomes a :class:`SourceError`.

        The error is transient or not as :func:`is_transient` says.
        ``connects``: ``call`` opens a connection to this database, under a
        permit of its budget.
        """
        try:
            if not connects:
                return call()
            with self.budget.connection(timed=_TIMED.get(), owner=self.name):
                return call()
        except sa.exc.DBAPIError as exc:
            error = self._error("read failed", exc)
            error.transient = is_transient(exc)
            raise error from exc

    def close(self) -> None:
        """Let go of the database's engine (only an engine taken here)."""
        if self._owns_engine:
            _ENGINES.give_back(self._url, self.engine)

    def _error(self, what: str, exc: BaseException) -> SourceError:
        return SourceError(self._describe(what, exc))

    def _describe(self, what: str, exc: BaseException) -> str:
        url = self.engine.url.render_as_string(hide_password=True)
        return f"source {self.name} (table {self._table!r} at {url}): {what}: {cause_line(exc)}"


def _union_of(stmts: Sequence[sa.Select[Any]]) -> sa.Select[Any]:
    """One query that runs each of ``stmts``: a row of 1 per row they give."""
    together = sa.union_all(*[sa.select(sa.literal(1)).select_from(s.subquery()) for s in stmts])
    return sa.select(sa.literal(1)).select_from(together.subquery())


class _Engines:
    """One engine per source database URL, shared by its sources (the tables of a
    ``tables:`` source); disposed of when the last source lets go of it.

    Its pool keeps at most :data:`~sources.budget.KEY_QUERIES` connections,
    the most key queries of one database that hold a permit at once: a
    connection per key query cost a server process start each time, and a
    pool per table held one idle connection per table.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[str, tuple[sa.Engine, int]] = {}
        self._timeouts: dict[str, float | None] = {}

    def take(self, url: str, timeout: float | None = None) -> sa.Engine:
        """The engine of ``url`` (made now if no source holds it). ``timeout``: the taker's
        ``limits.query_timeout``; the least of the database's takers holds for the
        connections it opens from then on."""
        parsed = sa.make_url(url)
        if url_traits(parsed).file_database and parsed.database in (None, "", ":memory:"):
            # One in-memory database per connection: the pool must keep it, and
            # no other source sees it.
            return sa.create_engine(parsed, pool_pre_ping=True)
        with self._lock:
            known = self._engines.get(url)
            self._timeouts[url] = timeout if known is None else least(self._timeouts.get(url),
                                                                         timeout)  # fmt: skip
            engine, users = known or (self._make(url), 0)
            self._engines[url] = (engine, users + 1)
            return engine

    def give_back(self, url: str, engine: sa.Engine) -> None:
        """A source of ``url`` let go of ``engine``: disposed of when none holds it."""
        with self._lock:
            known, users = self._engines.get(url) or (None, 0)
            if known is engine and users > 1:
                self._engines[url] = (engine, users - 1)
                return
            if known is engine:
                del self._engines[url]
                self._timeouts.pop(url, None)
        engine.dispose()

    def _make(self, url: str) -> sa.Engine:
        engine = _make_engine(url)
        bound_waits(engine, lambda: self._timeouts.get(url))
        return engine


def _make_engine(url: str) -> sa.Engine:
    # Key queries hold a permit for each connection: a burst past the pool
    # (a source without a budget, as in ``plan``) opens connections it closes.
    return sa.create_engine(url, pool_pre_ping=True, pool_size=KEY_QUERIES, max_overflow=8)


_ENGINES = _Engines()
