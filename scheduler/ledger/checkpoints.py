"""Sources in the ledger: their fingerprints, their claim high-water marks,
their resume points, their poison.

A source is recorded on its first run with a fingerprint of what defines its
progress; a later run with a different table, key, mode or ``where`` is
refused rather than resumed from a mark that means something else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.errors import FingerprintMismatch
from config.models import SqlSourceConfig, SqsSourceConfig
from scheduler.ledger.outage import ride_out
from scheduler.ledger.schema import (
    batches_table,
    decode_key,
    decode_position,
    encode_position,
    keys_table,
    poison_table,
    sources_table,
)
from scheduler.ledger.writer import SerialWriter


@dataclass(frozen=True)
class Checkpoint:
    """A source's claim high-water mark and the version that guards it.

    ``resume_after``: an incremental source's walk position before which
    every row version read is done (None: from the start).
    """

    high_water: list[Any] | None
    version: int
    resume_after: list[Any] | None = None


def fingerprint(cfg: SqlSourceConfig | SqsSourceConfig) -> str:
    """A digest of what defines a source's progress (url without password, table, key…)."""
    if isinstance(cfg, SqlSourceConfig):
        url = sa.make_url(cfg.url).set(password=None).render_as_string(hide_password=False)
        parts: dict[str, Any] = {
            "url": url, "table": cfg.table, "key": cfg.key_columns, "mode": cfg.mode,
            "where": cfg.where,
        }
    else:
        parts = {"queue_url": cfg.queue_url, "key": cfg.key}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


_NAMES_PER_QUERY = 500
"""Names in one ``IN`` list (SQLite allows 32,766 parameters; far fewer keep plans cheap)."""


class SourceBook:
    """The ``sluice_sources`` and ``sluice_poison`` rows of the configured sources."""

    def __init__(self, engine: sa.Engine, writer: SerialWriter, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.writer = writer
        self.clock = clock

    def register(self, name: str, digest: str, *, config_path: str = "CONFIG") -> Checkpoint:
        """Record a source (first run) or check it is the one recorded before."""
        return self.register_all({name: digest}, config_path=config_path)[name]

    def register_all(
        self, digests: Mapping[str, str], *, config_path: str = "CONFIG"
    ) -> dict[str, Checkpoint]:
        """:meth:`register` each source (name → its fingerprint) in one transaction: the
        rows there are read in a few queries, the missing ones inserted in one (1,000
        sources, a read and an insert each, took ~0.4 s of the start)."""
        t = sources_table
        names = list(digests)

        def registering(conn: sa.Connection) -> dict[str, Any]:
            rows = {
                row.name: row
                for start in range(0, len(names), _NAMES_PER_QUERY)
                for row in conn.execute(
                    sa.select(t).where(t.c.name.in_(names[start:start + _NAMES_PER_QUERY]))
                )
            }  # fmt: skip
            new = [
                {"name": name, "fingerprint": digests[name], "high_water": None, "version": 0,
                 "updated_at": self.clock()}
                for name in names if name not in rows
            ]  # fmt: skip
            if new:
                conn.execute(t.insert(), new)
            return rows

        try:
            found = self.writer.call(registering)
        except sa.exc.IntegrityError:
            # Another daemon starting on the same config inserted some first: read theirs.
            found = self.writer.call(registering)
        return {
            name: _checkpoint(name, digest, found.get(name), config_path)
            for name, digest in digests.items()
        }

    def save_resume_point(self, name: str, after: Sequence[Any] | None) -> None:
        """Record where a restart resumes an incremental source's walk (None: the start).

        The last writer wins: every daemon's point is safe to resume from
        (see :mod:`sources.resume`), a later one only saves reading.
        """
        t = sources_table
        text = None if after is None else encode_position(after)
        self.writer.call(lambda conn: conn.execute(
            t.update().where(t.c.name == name).values(resume_after=text, updated_at=self.clock())
        ))

    def checkpoint(self, name: str) -> Checkpoint:
        """The current high-water mark of a source."""
        t = sources_table

        def read() -> Any:
            with self.engine.connect() as conn:
                return conn.execute(
                    sa.select(t.c.high_water, t.c.version, t.c.resume_after)
                    .where(t.c.name == name)
                ).one()

        row = ride_out(read, self.writer.patience)
        return Checkpoint(
            decode_key(row.high_water), row.version, decode_position(row.resume_after)
        )

    def reset(self, name: str) -> int:
        """Forget a source's progress and batches; returns the batches removed."""

        def write(conn: sa.Connection) -> int:
            conn.execute(sources_table.delete().where(sources_table.c.name == name))
            conn.execute(keys_table.delete().where(keys_table.c.source == name))
            conn.execute(poison_table.delete().where(poison_table.c.source == name))
            result = conn.execute(batches_table.delete().where(batches_table.c.source == name))
            return result.rowcount or 0

        return self.writer.call(write)

    def record_poison(self, source: str, message_id: str, body: str, reason: str) -> None:
        """Keep a message no batch can take (bad JSON, no key…) before it is deleted."""
        values = {
            "source": source, "message_id": message_id, "body": body, "reason": reason,
            "recorded_at": self.clock(),
        }
        self.writer.call(lambda conn: conn.execute(poison_table.insert().values(**values)))


def _checkpoint(name: str, digest: str, row: Any, config_path: str) -> Checkpoint:
    """A registered source's checkpoint from its row as it was (None: just recorded)."""
    if row is None:
        return Checkpoint(None, 0)
    if row.fingerprint != digest:
        raise FingerprintMismatch(
            f"source {name!r} changed (url, table, key, mode or where) since the ledger "
            f"recorded its progress; to start it over run: "
            f"sluice reset {config_path} --source {name}"
        )
    return Checkpoint(decode_key(row.high_water), row.version, decode_position(row.resume_after))
