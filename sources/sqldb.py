"""The database a SQL source reads: its engine, and errors that say where they came from."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import sqlalchemy as sa

from config.errors import ConfigError, SourceError, is_transient
from config.models import SqlSourceConfig
from sources.budget import Budget, bounded_connections

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

    The engine is ``engine`` when given (the caller owns it), otherwise one
    made from the config, pooled and owned here (:meth:`close` disposes of
    it). A database error becomes a :class:`SourceError` or
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
        self.engine = engine if engine is not None else _make_engine(cfg)
        # Each query holds a connection permit of the database's budget (a
        # stand-alone source, as in `plan`, has a budget of its own).
        self.budget = budget if budget is not None else Budget(name)

    def check(self, stmt: sa.Select[Any]) -> None:
        """Run ``stmt``: raise if it cannot run.

        :class:`SourceError` (transient) when the database cannot be reached;
        :class:`ConfigError` when it answers but refuses the query.
        """
        with self.budget.connection():
            try:
                conn = self.engine.connect()
            except sa.exc.DBAPIError as exc:
                raise self._error("cannot connect", exc) from exc
            with conn:
                try:
                    conn.execute(stmt).all()
                except sa.exc.DBAPIError as exc:
                    raise ConfigError(self._describe("check query failed", exc)) from exc

    def guard(self, call: Callable[[], T], *, connects: bool = True) -> T:
        """Return ``call()``; a database error it raises becomes a :class:`SourceError`.

        The error is transient or not as :func:`is_transient` says.
        ``connects``: ``call`` opens a connection to this database, under a
        permit of its budget.
        """
        try:
            if not connects:
                return call()
            with self.budget.connection(timed=_TIMED.get()):
                try:
                    return call()
                finally:
                    if self.budget.connections is not None and self._owns_engine:
                        self._close_idle()
        except sa.exc.DBAPIError as exc:
            error = self._error("read failed", exc)
            error.transient = is_transient(exc)
            raise error from exc

    def _close_idle(self) -> None:
        """Keep no idle connection once the budget counts them (a reload set
        ``max_connections`` on an engine made with a pool)."""
        if isinstance(self.engine.pool, sa.pool.QueuePool):  # not an in-memory SQLite's
            self.engine.dispose()

    def close(self) -> None:
        """Dispose of the engine's connections (only an engine made here)."""
        if self._owns_engine:
            self.engine.dispose()

    def _error(self, what: str, exc: BaseException) -> SourceError:
        return SourceError(self._describe(what, exc))

    def _describe(self, what: str, exc: BaseException) -> str:
        url = self.engine.url.render_as_string(hide_password=True)
        cause = getattr(exc, "orig", None) or exc
        first_line = str(cause).strip().splitlines()[0] if str(cause).strip() else repr(cause)
        return f"source {self.name} (table {self._table!r} at {url}): {what}: {first_line}"


def _make_engine(cfg: SqlSourceConfig) -> sa.Engine:
    url = sa.make_url(cfg.url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        pass  # one in-memory database per connection: the pool must keep it
    elif bounded_connections(cfg) is not None:
        # The database's budget counts open connections: none is kept idle.
        kwargs = {"poolclass": sa.pool.NullPool}
    else:
        # At most max_connections to the source database, never an overflow.
        kwargs.update(pool_size=cfg.limits.max_connections, max_overflow=0)
    return sa.create_engine(url, **kwargs)
