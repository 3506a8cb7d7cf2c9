"""``sluice status``: where every source stands, read from the ledger alone.

Nothing here touches a source or a target, so status answers the same whether
the daemon runs or not (SQLite's WAL lets it read beside a running writer).
Rates come from the ``updated_at`` of done batches; an ETA needs the backlog,
which only the sources know, so it is shown only when a caller passes one,
at that rate but never faster than the source's configured ``max_rows_per_s``.
Batch sizes and limits are the configured ones (said so): those in force
(an adaptive batch size, a daemon's share, the latency feedback) only a
running daemon knows, on its ``/status.json``.
A change stream (``mode: stream``) has no end and no ETA here: the ledger knows
how far its batches are claimed (the high-water mark, a stream position) and the
config its slot and publication; its lag, changes/s, changes waiting and the WAL
its slot keeps are a running daemon's figures (its page, ``/status.json``,
``/metrics``): the daemon publishes them nowhere status could read them.
Every text that may carry a secret (errors, the ledger URL) is redacted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.table import Table
from rich.text import Text

from config.errors import ConfigError
from config.models import SluiceConfig, SqlSourceConfig
from config.secrets import config_secrets, redact_text, redact_url
from config.sources import walks_ranges
from scheduler.ledger import SCHEMA, STATES, UNFINISHED, LedgerReads
from scheduler.ledger.reads import DeadBatch, Owner, SourceFigures
from spark_jobs.engines import url_traits

RATE_WINDOW = 300.0
"""Seconds of done batches the rows/s figure is measured over."""


@dataclass(frozen=True)
class StreamStatus:
    """A change stream as the ledger and the config know it (no I/O)."""

    slot: str | None  # None: a MariaDB/MySQL source (the binary log, read by GTID)
    publication: str | None
    position: list[Any] | None  # the last stream position claimed: [end, event number]
    at: str  # the position as its server prints it (an LSN, a GTID's sequence number)


@dataclass(frozen=True)
class SourceStatus:
    """One source as the ledger sees it."""

    source: str
    target: str
    states: dict[str, int]  # batches per state, every state present
    items: int  # keys claimed, in batches of any state
    rows: int  # rows written by done batches
    rejected: int  # rows the targets refused, in done batches
    rows_per_s: float  # over the last ``Status.window_s`` seconds
    eta_s: float | None  # None: backlog unknown, or no rate yet
    last_error: str | None
    poison: int
    high_water: list[Any] | None  # keyset: the last key claimed
    dead: list[DeadBatch] = field(default_factory=list)
    zero_dates: dict[str, int] = field(default_factory=dict)  # per column, made NULL
    left: int | None = None  # rows (keys, messages) still to migrate; None: not measured
    done: bool = False  # nothing left and no batch unfinished
    # Batch size and limits as the config sets them: a running daemon's in force (its
    # adaptive batch size, its share of the limits) are on its /status.json.
    configured: dict[str, Any] = field(default_factory=dict)
    stream: StreamStatus | None = None  # mode: stream
    unreachable: str | None = None  # why its database did not answer status now


@dataclass(frozen=True)
class Status:
    """Every configured source, and the totals."""

    ledger: str  # redacted URL
    at: float
    window_s: float
    sources: list[SourceStatus]
    owners: list[Owner] = field(default_factory=list)
    schema: str | None = None  # the ledger's schema revision (None: no ledger yet)

    def totals(self) -> dict[str, Any]:
        """Batches per state, rows, rows/s and poison over every source."""
        return {
            "states": {s: sum(src.states[s] for src in self.sources) for s in STATES},
            "items": sum(src.items for src in self.sources),
            "rows": sum(src.rows for src in self.sources),
            "rejected": sum(src.rejected for src in self.sources),
            "rows_per_s": sum(src.rows_per_s for src in self.sources),
            "poison": sum(src.poison for src in self.sources),
            "eta_s": self.eta_s(),
            "done": all(src.done for src in self.sources),
        }

    def eta_s(self) -> float | None:
        """Every source's rows left at the sources' rates together; None when unknown."""
        if all(src.done for src in self.sources):
            return 0.0
        if any(src.left is None for src in self.sources):
            return None
        rate = sum(src.rows_per_s for src in self.sources)
        left = sum(src.left or 0 for src in self.sources)
        return left / rate if rate > 0 else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``sluice status --json``)."""
        return {**asdict(self), "totals": self.totals()}


def ledger_exists(url: str) -> bool:
    """False for a SQLite ledger file not created yet (status must not create it)."""
    parsed = sa.make_url(url)
    if not url_traits(parsed).file_database or parsed.database in (None, "", ":memory:"):
        return True
    return Path(parsed.database).exists()


def collect_status(
    cfg: SluiceConfig,
    reads: LedgerReads | None,
    *,
    now: float | None = None,
    window: float = RATE_WINDOW,
    backlog: Mapping[str, int] | None = None,
    dead_shown: int = 10,
    away: Mapping[str, str] | None = None,
) -> Status:
    """Read the status of ``cfg``'s sources; ``reads`` None means nothing ran yet.

    ``now`` is on the ledger's clock (``time.time`` unless injected);
    ``backlog`` (items left per source, where a caller knows it) gives ETAs;
    ``away``: the sources whose databases did not answer, with why.
    """
    now = time.time() if now is None else now
    names = list(cfg.sources)
    found = {} if reads is None else reads.figures(names, now - window, dead_shown)
    owners = [] if reads is None else reads.owners_seen(now)
    secrets = config_secrets(cfg)
    result = []
    for name in names:
        row = found.get(name) or SourceFigures()
        # Over the window, or since the source's first batch if that is more recent.
        span = max(1.0, now - max(now - window, row.first_created or now))
        rate = row.recent_rows / span
        left = (backlog or {}).get(name)
        why = (away or {}).get(name)
        result.append(replace(_source(cfg, name, row, rate, left, secrets),
                              unreachable=why and redact_text(why, secrets)))  # fmt: skip
    schema = None if reads is None else reads.schema()
    return Status(redact_url(cfg.ledger), now, window, result, owners, schema)


def rows_left(cfg: SluiceConfig, config_path: str) -> tuple[dict[str, int], dict[str, str]]:
    """Rows each source has left: not yet claimed (its backlog) and in unfinished batches;
    and each source whose database does not answer now, with why.

    Read-only, as ``sluice plan`` reads them; a source whose backlog cannot
    be read is left out (its ETA is unknown). The databases are asked at
    once first, as a run's start asks them: one that does not answer within
    its wait is not waited for again.
    """
    from scheduler.commands.plan import measure, read_ledger  # reads sources: only when asked
    from sources.reach import unreachable

    try:
        urls = unreachable(cfg)
    except ConfigError:  # a database that refuses what the config names: measure says so
        urls = {}
    away = {name: urls[url] for name, src in cfg.sources.items()
            if (url := getattr(src, "url", None)) in urls}  # fmt: skip
    view = read_ledger(cfg.ledger)
    left = {}
    for name in (n for n in cfg.sources if n not in away):
        measured = measure(name, cfg, view, config_path)
        if measured.error is None:
            left[name] = measured.pending + view.unfinished.get(name, (0, 0))[1]
    return left, away


def _source(
    cfg: SluiceConfig, name: str, row: SourceFigures, rate: float, left: int | None,
    secrets: list[str],
) -> SourceStatus:  # fmt: skip
    def clean(text: str | None) -> str | None:
        return None if text is None else redact_text(text, secrets)

    configured = _configured(cfg, name)
    stream = _stream(cfg, name, row.high_water)
    # A change stream has no end: never done, and no ETA offline.
    done = stream is None and left == 0 and not any(
        row.states.get(s, 0) for s in (*UNFINISHED, "failed"))
    left = None if stream is not None else left
    # A source goes no faster than its database's limit (a lowered one is right at once).
    limit = configured.get("max_rows_per_s")
    going = rate if limit is None else min(rate, limit)
    eta = 0.0 if done else (left / going if left is not None and going > 0 else None)

    return SourceStatus(
        source=name, target=cfg.sources[name].target, states=row.states, items=row.items,
        rows=row.rows, rejected=row.rejected, rows_per_s=rate, eta_s=eta,
        last_error=clean(row.last_error), poison=row.poison, high_water=row.high_water,
        dead=[DeadBatch(d.id, d.attempts, clean(d.error), d.updated_at) for d in row.dead],
        zero_dates=dict(sorted(row.zero_dates.items())),
        left=left, done=done, configured=configured, stream=stream,
    )


def _stream(cfg: SluiceConfig, name: str, position: list[Any] | None) -> StreamStatus | None:
    """A ``mode: stream`` source's slot, publication and position claimed (None: not one)."""
    src = cfg.sources[name]
    if not isinstance(src, SqlSourceConfig) or src.mode != "stream":
        return None
    engine = url_traits(src.url)
    at = engine.stream_position_text(position) if position else "nothing claimed yet"
    if not engine.stream_slots:  # MariaDB/MySQL's binary log: no slot, no publication
        return StreamStatus(None, None, position, at)
    # Only for a slot's names: this brings the stream's modules (and pyspark's).
    from sources.stream_backends import names_of

    names = names_of(name, src)
    return StreamStatus(names.slot, names.publication, position, at)


def _configured(cfg: SluiceConfig, name: str) -> dict[str, Any]:
    """A source's batch size and limits as configured (``status`` runs without a daemon)."""
    src = cfg.sources[name]
    found: dict[str, Any] = {"batch_size": cfg.batch.largest(walks_ranges(src))}
    if isinstance(src, SqlSourceConfig):
        found.update(max_rows_per_s=src.limits.max_rows_per_s,
                     max_connections=src.limits.max_connections,
                     max_query_latency_s=src.limits.max_query_latency)  # fmt: skip
    return found


# -- rendering -------------------------------------------------------------------------

_COLUMNS = (
    "source", "target", *STATES, "rows", "rejected", "rows/s", "ETA", "poison", "last error",
)


def _cells(src: SourceStatus) -> list[str]:
    return [
        src.source, src.target, *(f"{src.states[s]:,}" for s in STATES), f"{src.rows:,}",
        f"{src.rejected:,}", f"{src.rows_per_s:,.1f}",
        "stream" if src.stream else _eta(src.eta_s, src.done),
        f"{src.poison:,}", _short(src.last_error),
    ]


def _total_cells(status: Status) -> list[str]:
    t = status.totals()
    return [
        "total", "", *(f"{t['states'][s]:,}" for s in STATES), f"{t['rows']:,}",
        f"{t['rejected']:,}", f"{t['rows_per_s']:,.1f}", _eta(t["eta_s"], t["done"]),
        f"{t['poison']:,}", "",
    ]


def render_text(status: Status) -> str:
    """Plain aligned text, for pipes and logs."""
    lines = [_heading(status)]
    table = [list(_COLUMNS), *(_cells(s) for s in status.sources), _total_cells(status)]
    widths = [max(len(row[i]) for row in table) for i in range(len(_COLUMNS) - 1)]
    lines.extend(
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)  # names left, numbers right
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ) + "  " + row[-1]
        for row in table
    )
    lines.extend(_configured_lines(status))
    lines.extend(_stream_lines(status))
    lines.extend(_zero_date_lines(status))
    lines.extend(_dead_lines(status))
    lines.extend(_away_lines(status))
    return "\n".join(line.rstrip() for line in lines)


def render_table(status: Status) -> Table:
    """A rich table, for a terminal."""
    table = Table(title=Text(_heading(status)), title_justify="left")
    for i, name in enumerate(_COLUMNS):
        table.add_column(name, justify="right" if 1 < i < len(_COLUMNS) - 1 else "left",
                         overflow="fold")
    # Text cells: an error such as "[SQLSTATE 23505]" is not rich markup.
    for src in status.sources:
        style = "red" if src.states["dead"] else None
        table.add_row(*map(Text, _cells(src)), style=style)
    table.add_row(*map(Text, _total_cells(status)), style="bold", end_section=True)
    notes = (_configured_lines(status) + _stream_lines(status) + _zero_date_lines(status)
             + _dead_lines(status) + _away_lines(status))  # fmt: skip
    if notes:
        table.caption, table.caption_justify = Text("\n".join(notes)), "left"
    return table


def _heading(status: Status) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(status.at))
    daemons = ", ".join(
        f"{o.owner} ({_sluice(o)}, seen {o.heartbeat_age_s:.0f} s ago)" for o in status.owners
    ) or "none registered"
    older = "" if status.schema in (None, SCHEMA) else (
        f"\nledger schema {status.schema}: the next `sluice run` upgrades it to {SCHEMA}")
    return (f"ledger {status.ledger} at {stamp} (rows/s over the last {status.window_s:g} s)\n"
            f"daemons: {daemons}{older}")


def _sluice(owner: Owner) -> str:
    return f"sluice {owner.sluice_version}" if owner.sluice_version else "an earlier sluice"


def _configured_lines(status: Status) -> list[str]:
    """Batch size and limits as configured (a daemon's in force are on its page)."""
    lines = []
    for src in status.sources:
        c = src.configured
        parts = [f"batch {c['batch_size']:,}"] if "batch_size" in c else []
        if c.get("max_rows_per_s") is not None:
            parts.append(f"{c['max_rows_per_s']:,.0f} rows/s")
        if c.get("max_connections") is not None:
            parts.append(f"{c['max_connections']} connections")
        if c.get("max_query_latency_s") is not None:
            parts.append(f"key queries under {c['max_query_latency_s']:g} s")
        lines.append(f"  {src.source}: {', '.join(parts)}")
    if lines:
        lines.insert(0, "configured (a running daemon's, in force, are on its /status.json):")
    return lines


def _stream_lines(status: Status) -> list[str]:
    """Each change stream's slot, publication and position claimed (the ledger's mark)."""
    lines = []
    for src in status.sources:
        if (s := src.stream) is None:
            continue
        names = "binary log" if s.slot is None else (
            f"slot {s.slot}, publication {s.publication}")  # fmt: skip
        lines.append(f"  {src.source}: {names}; claimed up to {s.at}")
    if lines:
        lines.insert(0, "change streams (lag, changes/s, changes waiting and the WAL kept are "
                        "a running daemon's: its page, /status.json, /metrics):")  # fmt: skip
    return lines


def _zero_date_lines(status: Status) -> list[str]:
    """MySQL zero dates that done batches made NULL, per column."""
    lines = [
        f"  {src.source}.{column}: {count:,}"
        for src in status.sources for column, count in src.zero_dates.items()
    ]
    if lines:
        lines.insert(0, "zero dates made NULL (a source's zero_dates: reject sets them aside):")
    return lines


def _dead_lines(status: Status) -> list[str]:
    lines = [
        f"  dead {src.source} batch {d.id} ({d.attempts} attempts): {d.error}"
        for src in status.sources for d in src.dead
    ]
    if lines:
        lines.insert(0, "dead batches (sluice retry CONFIG --dead requeues them):")
    return lines


def _away_lines(status: Status) -> list[str]:
    lines = [f"  {src.source}: {src.unreachable}" for src in status.sources if src.unreachable]
    if lines:
        lines.insert(0, "unreachable now (their ETA is unknown; a running daemon asks them again "
                        "with backoff, and its page says for how long):")  # fmt: skip
    return lines


def _eta(seconds: float | None, done: bool = False) -> str:
    if done:
        return "done"
    if seconds is None:
        return "unknown"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _short(text: str | None, width: int = 60) -> str:
    if text is None:
        return "-"
    line = text.splitlines()[0] if text.strip() else text
    return line if len(line) <= width else line[: width - 1] + "…"
