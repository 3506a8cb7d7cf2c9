"""The ledger's tables (``sluice_*``) as of schema :data:`SCHEMA`, its batch states,
and how its database is opened.

These describe the tables for queries; they are created and changed only by
the migrations (:mod:`scheduler.ledger.migrate`): a change here needs one there.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from config.sqlite import sqlite_engine
from spark_jobs.engines import url_traits

SCHEMA = "0006"
"""The schema revision these tables are (``migrate.REVISIONS[-1]``; a test holds them equal)."""
UNFINISHED = ("claimed", "importing")
STATES = ("claimed", "importing", "done", "failed", "dead")

metadata = sa.MetaData()

sources_table = sa.Table(
    "sluice_sources",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("high_water", sa.Text, nullable=True),  # JSON list of key values
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("resume_after", sa.Text, nullable=True),  # schema 0003: incremental, typed JSON
)

batches_table = sa.Table(
    "sluice_batches",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("source", sa.String(200), nullable=False, index=True),
    sa.Column("target", sa.String(400), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("token", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("items", sa.Integer, nullable=False),
    sa.Column("rows", sa.BigInteger, nullable=True),
    sa.Column("rejected", sa.BigInteger, nullable=True),
    sa.Column("manifest", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("not_before", sa.Float, nullable=True),
    sa.Column("owner", sa.String(120), nullable=True, index=True),
    sa.Column("lease_until", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    # Schema 0004: a keyset range's place in its source's claim order (the
    # high-water mark's version its claim made), so that the range holding a
    # key is found by a binary search over this index, not a scan.
    sa.Column("range_seq", sa.Integer, nullable=True),
    sa.Index("ix_sluice_batches_source_range_seq", "source", "range_seq"),
    # Schema 0006: MySQL zero dates the batch made NULL, JSON {column: count}.
    sa.Column("zero_dates", sa.Text, nullable=True),
)

keys_table = sa.Table(
    "sluice_keys",
    metadata,
    sa.Column("source", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(1000), primary_key=True),  # JSON list of key values
    sa.Column("version", sa.String(200), primary_key=True),
    sa.Column("batch_id", sa.String(32), nullable=False, index=True),
)

poison_table = sa.Table(
    "sluice_poison",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source", sa.String(200), nullable=False, index=True),
    sa.Column("message_id", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
)

cutover_table = sa.Table(  # schema 0005: one row while a cutover is requested
    "sluice_cutover",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("requested_at", sa.Float, nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=False),
)

owners_table = sa.Table(
    "sluice_owners",
    metadata,
    sa.Column("owner", sa.String(120), primary_key=True),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("sluice_version", sa.String(40), nullable=True),  # schema 0002
    sa.Column("schema", sa.String(32), nullable=True),  # schema 0002
)


def encode_key(key: Iterable[Any]) -> str:
    """The JSON text a key is stored as."""
    return json.dumps(list(key), separators=(",", ":"), default=str)


def decode_key(text: str | None) -> list[Any] | None:
    """A stored key back as a list of values (None stays None)."""
    return None if text is None else json.loads(text)


# Cursor values are timestamps as often as numbers: a resume point keeps their
# type, so that the restarted walk binds a timestamp, not text, to compare.
_TYPED: dict[str, tuple[type, Callable[[Any], str], Callable[[str], Any]]] = {
    "datetime": (dt.datetime, dt.datetime.isoformat, dt.datetime.fromisoformat),
    "date": (dt.date, dt.date.isoformat, dt.date.fromisoformat),
    "time": (dt.time, dt.time.isoformat, dt.time.fromisoformat),
    "decimal": (decimal.Decimal, str, decimal.Decimal),
    "uuid": (uuid.UUID, str, uuid.UUID),
    "bytes": (bytes, bytes.hex, bytes.fromhex),
}


def encode_position(position: Sequence[Any]) -> str:
    """A walk position as JSON that :func:`decode_position` gives back with its types."""

    def typed(value: Any) -> Any:
        # datetime before date: a datetime is a date too.
        for tag, (kind, dump, _) in _TYPED.items():
            if isinstance(value, kind):
                return {"$" + tag: dump(value)}
        return value

    return json.dumps([typed(v) for v in position], separators=(",", ":"))


def decode_position(text: str | None) -> list[Any] | None:
    """A stored walk position back as its typed values (None stays None)."""
    if text is None:
        return None

    def typed(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            (tag, raw), = value.items()
            return _TYPED[tag[1:]][2](raw)
        return value

    return [typed(v) for v in json.loads(text)]


WRITE_OPTION = "sluice_ledger_write"
"""Execution option the ledger writer sets on its connections (SQLite: BEGIN IMMEDIATE)."""


def open_engine(url: str) -> sa.Engine:
    """An engine for the ledger; SQLite gets WAL (readers beside the writer) and
    ``BEGIN IMMEDIATE`` for the writer's transactions only."""
    if not url_traits(url).file_database:
        return sa.create_engine(url, pool_pre_ping=True)
    return sqlite_engine(
        url, wal=True, pool_pre_ping=True,
        writes=lambda conn: bool(conn.get_execution_options().get(WRITE_OPTION, False)),
    )  # fmt: skip
