"""The target tables of many small tables' batches, made ready together.

A table's first batch, alone, asks the catalogue whether its table is there,
creates it in a transaction of its own, records it in ``_sluice_tables`` and
describes it, each on a connection of its own: of a small table's import, the
greater part (1,000 tables of 1,000 rows: ~37 ms a table of an import thread's
~85 ms). A group of batches of many tables does it here once for them all:
one connection, one transaction for the tables it creates, one statement for
their records.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from spark_jobs.engines import catalogued, engine_of
from spark_jobs.engines.base import Column, UnsupportedColumn
from spark_jobs.load.batch_columns import BatchColumn
from spark_jobs.load.early import build_early
from spark_jobs.load.jdbc_tables import (
    ensure_own_tables,
    fit_key,
    fit_known,
    new_table,
    of_built_in_types,
    record_made,
    remember_fit,
)
from spark_jobs.load.target import TargetTable
from spark_jobs.load.target_fit import check_catalogued

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wanted:
    """A target table a batch goes into: the batch's ``columns``, those null in all of its
    rows (``void``)."""

    target: TargetTable
    columns: Sequence[BatchColumn]
    void: Sequence[str] = ()


def make_ready(engine: sa.Engine, wanted: Sequence[Wanted]) -> list[bool]:
    """Which of ``wanted`` are ready for their batches: the table there and the batch's fit
    remembered (:func:`~spark_jobs.load.jdbc_tables.prepare_target` then asks nothing).

    In one transaction, each table is described (a table that is not there
    describes as no columns; one there whose fit this process knows is
    ready); those missing are created, with their records in
    ``_sluice_tables``, and described again; once they are committed, each
    fit is checked against what the catalogue described. PostgreSQL, whose DDL
    is transactional (the tables and their records commit together or not
    at all); elsewhere nothing is done here. Best effort: a table found here
    that sluice did not just make, one of types of its own, one whose
    columns do not fit, or all of them when the transaction fails (another
    import made one of the tables first) are not ready, and the table's own
    path makes it ready or says what is wrong.
    """
    ready = [False] * len(wanted)
    if not catalogued(engine.url) or not engine_of(engine.url).tables_made_in_transaction:
        return ready
    catalogue = engine_of(engine.url)
    tables = {(w.target.schema, w.target.table): i for i, w in enumerate(wanted)}
    made: dict[int, list[Column]] = {}
    try:
        ensure_own_tables(engine)
        with engine.begin() as conn:
            there = catalogue.describe_many(conn, list(tables))
            missing = []
            # In name order: two groups making some of the same tables lock them alike.
            for name, i in sorted(tables.items(), key=lambda t: (t[0][0] or "", t[0][1])):
                w = wanted[i]
                if name in there:
                    ready[i] = fit_known(fit_key(engine, w.target, w.columns, w.void))
                elif of_built_in_types(engine, w.target, w.columns):
                    missing.append(i)
            by_schema: dict[str | None, list[str]] = {}
            for i in missing:
                new_table(engine, wanted[i].target, wanted[i].columns).create(conn)
                by_schema.setdefault(wanted[i].target.schema, []).append(wanted[i].target.table)
            for schema, names in by_schema.items():
                record_made(conn, schema, *names)
                for made_name in names:
                    build_early(conn, schema, made_name)
            now = catalogue.describe_many(
                conn, [(wanted[i].target.schema, wanted[i].target.table) for i in missing])
            made = {i: now.get((wanted[i].target.schema, wanted[i].target.table), [])
                    for i in missing}  # fmt: skip
    except sa.exc.SQLAlchemyError as error:
        log.debug("%d target tables left to be made ready one by one: %s", len(tables), error)
        return [False] * len(wanted)
    for i, described in made.items():
        w = wanted[i]
        try:
            fit = check_catalogued(engine, w.target, w.columns, frozenset(w.void), described)
        except UnsupportedColumn:
            continue  # the table's own path says so
        remember_fit(fit_key(engine, w.target, w.columns, w.void), fit)
        ready[i] = True
    return ready
