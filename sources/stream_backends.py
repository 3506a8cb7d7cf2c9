"""What a stream source needs of its database: changes, watermarks, chunks of the table.

:class:`~sources.stream.StreamSource` merges a table's chunks and its change
stream the same way on every engine; a backend gives it, in the target's
terms (PostgreSQL's text of each value):

- :class:`~sources.pg_stream.PgBackend`: a logical slot and a publication, the
  table's own or its ``tables:`` group's; a position is a transaction's end LSN.
- :class:`~sources.binlog_stream.MariaBackend`: the row binary log read by GTID;
  a position is a GTID's sequence number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SqlSourceConfig
from sources.pg_changes import StreamNames, stream_names
from spark_jobs.changes.change_batches import CopyRows, Key, LoadRange, StreamEvent
from spark_jobs.engines import url_traits
from spark_jobs.engines.postgresql.pgoutput import UNCHANGED


def names_of(name: str, cfg: SqlSourceConfig) -> StreamNames:
    """The publication and slot of a PostgreSQL stream source: the config's, or sluice's own,
    named after its ``tables:`` group when it has one (the group's tables share them)."""
    if cfg.stream is not None and cfg.stream.slot is not None:
        assert cfg.stream.publication is not None  # the config checks both or neither
        return StreamNames(cfg.stream.publication, cfg.stream.slot, owned=False)
    return stream_names(cfg.group or name)


def check_distinct(sources: Mapping[str, SqlSourceConfig]) -> None:
    """Raise :class:`ConfigError` when two PostgreSQL stream sources of one server would use
    one slot, or two of one database one publication (a name the config gave twice, or
    sluice's own names of two sources that differ only in case or punctuation, or past
    63 characters): each would move the other's slot on past changes it never read. The
    tables of one ``tables:`` group share theirs by design."""
    held: dict[tuple[str, ...], tuple[str, str]] = {}
    for name, cfg in sources.items():
        if cfg.mode != "stream" or not url_traits(cfg.url).stream_slots:
            continue
        url = sa.make_url(cfg.url)
        names = names_of(name, cfg)
        server = (url.host or "", str(url.port or 5432))
        for what, key in (("slot", (*server, "slot", names.slot)),
                          ("publication", (*server, url.database or "", "pub",
                                           names.publication))):  # fmt: skip
            other, group = held.setdefault(key, (name, cfg.group or name))
            if other != name and group != (cfg.group or name):
                raise ConfigError(
                    f"sources {other} and {name} would share the {what} {key[-1]!r} on "
                    f"{url.host}: a stream needs its own; name them with stream: "
                    "{publication: P, slot: S} on one of them"
                )


@dataclass
class Txn:
    """A committed transaction of the stream: its position (``end``), commit time, changes
    of the table (``op``, ``new``, ``key(columns)``, ``old_key(columns)``, values as text)
    and the contents of the watermarks written in it."""

    end: int
    committed_at: float
    changes: list[Any] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    begin: int = 0  # PostgreSQL: the commit's LSN (a slot at it still has the transaction)


class Backend(Protocol):
    """One engine's change stream and table, as a :class:`~sources.stream.StreamSource` reads
    them; every call may raise :class:`SourceError`."""

    what: str  # what it keeps on the source: "slot X and publication Y", "table Z"
    shared: bool  # its stream is its tables: group's (each table says what it needs kept)
    at_end: bool  # the last read reached what was committed when it began
    whole_chunks: bool  # a chunk is read whole, one event (CopyRows), not a row at a time
    reached: int  # the position the last read got to (past transactions of other tables)
    live_ranges: bool  # the load's ranges are read as the table is then, not in a snapshot

    @property
    def made_slot(self) -> bool:
        """This process made its slot: it holds no change from before."""

    @property
    def snapshot(self) -> tuple[str, int] | None:
        """The snapshot the full load reads and the position the stream starts at; None: the
        load reads between watermarks (see :attr:`PgBackend.snapshot`)."""

    def open(self) -> None: ...
    def columns(self) -> list[str]: ...
    def read(self, after: int, messages: int) -> list[Txn]: ...
    def acknowledge(self, end: int) -> None: ...
    def mark(self, content: str) -> None: ...
    def chunk(
        self, after: list[Any] | None, rows: int, snapshot: str | None = None
    ) -> list[dict[str, Any]] | CopyRows: ...
    def load_range(self, after: list[Any] | None, rows: int, snapshot: str) -> LoadRange: ...
    def loaded(self) -> None: ...
    def position(self) -> int:
        """The source's position now (a full load whose ranges are read as the table then is
        catches up to it, see :mod:`sources.stream_catchup`)."""
    def current(self, keys: list[Key], columns: list[str]) -> dict[Key, dict[str, Any]]: ...
    def retained_bytes(self) -> int | None: ...
    def drop(self) -> bool: ...
    def undo(self) -> list[str]: ...
    def close(self) -> None: ...


def last_key(
    rows: list[dict[str, Any]] | CopyRows, key: Sequence[str], size: int
) -> list[Any] | None:
    """The key of the last row of a chunk :meth:`Backend.chunk` read (its values as text)
    when the chunk was full (more may follow); None: the table's end."""
    if isinstance(rows, CopyRows):
        return list(rows.bounds[1]) if rows.rows == size and rows.bounds else None
    return [rows[-1][k] for k in key] if len(rows) == size else None


def complete_unsent(
    events: list[StreamEvent],
    holds_back: Callable[[Key], bool],
    current: Callable[[list[Key], list[str]], dict[Key, dict[str, Any]]],
) -> list[StreamEvent]:
    """``events`` with the values an update did not send (PostgreSQL's unchanged out-of-line
    values) read from the source (``current``), where the target cannot keep them: the
    update moved the key (the row at the new key is new to the target), or a chunk being
    read holds the key (``holds_back``: its row is dropped for the change's sake).

    The value read is the row's value now, not at the change: any change between the two
    that set it comes later in the stream, with the value, so the row ends right. A key no
    row has now keeps the marker: a later change in the stream removes it.
    """
    wanted = [n for n, e in enumerate(events)
              if e.op == "update" and e.new is not None
              and any(v is UNCHANGED for v in e.new.values())
              and (e.moved_from is not None or holds_back(e.key_values))]  # fmt: skip
    if not wanted:
        return events
    columns = list(dict.fromkeys(c for n in wanted for c, v in (events[n].new or {}).items()
                                 if v is UNCHANGED))  # fmt: skip
    found = current(list({events[n].key_values for n in wanted}), columns)
    out = list(events)
    for n in wanted:
        now = found.get(events[n].key_values)
        if now is None:
            continue
        new = {c: now[c] if v is UNCHANGED else v for c, v in (events[n].new or {}).items()}
        out[n] = StreamEvent(events[n].op, events[n].key_values, events[n].moved_from, new)
    return out
