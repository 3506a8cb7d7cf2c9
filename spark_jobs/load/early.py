"""Objects built in the transaction that makes their table, where the engine allows it.

A check added to an empty table reads no row; added after the load, it
reads every row once more (``VALIDATE`` of 10 M rows took ~1.5 s, after the
index builds). pg_dump puts a table's checks in its ``CREATE TABLE`` for the
same reason. The daemon keeps, once its plans are made
(:func:`spark_jobs.schema.early.remember`, through :func:`keep`), the
statements of each object its plan marks ``early``; the import that makes
the table runs them right after ``CREATE TABLE``, each object under a
savepoint of its own (:func:`build_early`). One that fails there (on a
column the target table was made without) is rolled back alone and built
after the load as planned: the build after the load looks at the target
first and builds only what is not there, so nothing is built twice, and a
process that does not know the plans (a ``spark-submit`` driver) makes the
table bare, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import sqlalchemy as sa

from config.errors import cause_line

log = logging.getLogger(__name__)

Objects = list[tuple[str, tuple[str, ...]]]
"""One table's early objects: each one's label and its statements, in order."""

_Where = tuple[str | None, int | None, str | None, str | None, str]
_early: dict[_Where, Objects] = {}
_lock = threading.Lock()


def keep(tables: Iterable[tuple[str, str | None, str, Objects]]) -> None:
    """Keep the early objects of ``tables`` (each its target's URL, schema, name and
    objects), replacing what was kept."""
    found = {_where(sa.make_url(url), schema, table): items for url, schema, table, items in tables}
    with _lock:
        _early.clear()
        _early.update(found)


def build_early(conn: sa.Connection, schema: str | None, table: str) -> None:
    """On ``conn``'s transaction, which has just made ``schema.table`` (None: the default
    schema): the early objects kept for it, each under a savepoint."""
    with _lock:
        if not any(where[-1] == table for where in _early):
            return
    if schema is None:
        schema = conn.execute(sa.text("SELECT current_schema()")).scalar_one()
    with _lock:
        items = list(_early.get(_where(conn.engine.url, schema, table), ()))
    for label, statements in items:
        try:
            with conn.begin_nested():
                for statement in statements:
                    conn.exec_driver_sql(escaped(conn, statement))
        except sa.exc.DBAPIError as error:
            log.info("%s.%s: %s not built with the table (%s): built after its load", schema,
                     table, label, cause_line(error))  # fmt: skip


def escaped(conn: sa.Connection, statement: str) -> str:
    """``statement`` as the driver takes it (pyformat drivers read ``%`` as a parameter)."""
    return statement.replace("%", "%%") if conn.dialect.paramstyle in ("pyformat", "format") else (
        statement)  # fmt: skip


def _where(url: sa.URL, schema: str | None, table: str) -> _Where:
    # The server and database, whatever driver each side's URL names.
    return url.host, url.port, url.database, schema, table
