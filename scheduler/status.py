"""``sluice status``: where every source stands, read from the ledger alone.

Nothing here touches a source or a target, so status answers the same whether
the daemon runs or not (SQLite's WAL lets it read beside a running writer).
Rates come from the ``updated_at`` of done batches; an ETA needs the backlog,
which only the sources know, so it is shown only when a caller passes one.
Every text that may carry a secret (errors, the ledger URL) is redacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.table import Table
from rich.text import Text

from config.models import SluiceConfig
from config.secrets import config_secrets, redact_text, redact_url
from scheduler.ledger import (
    STATES,
    Ledger,
    batches_table,
    owners_table,
    poison_table,
    sources_table,
)

RATE_WINDOW = 300.0
"""Seconds of done batches the rows/s figure is measured over."""


@dataclass(frozen=True)
class DeadBatch:
    """A batch that used up its attempts, with the error that killed it."""

    id: str
    attempts: int
    error: str | None
    updated_at: float


@dataclass(frozen=True)
class Owner:
    """A daemon registered in the ledger, and how long ago it last said it was alive."""

    owner: str
    heartbeat_age_s: float


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


@dataclass(frozen=True)
class Status:
    """Every configured source, and the totals."""

    ledger: str  # redacted URL
    at: float
    window_s: float
    sources: list[SourceStatus]
    owners: list[Owner] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        """Batches per state, rows, rows/s and poison over every source."""
        return {
            "states": {s: sum(src.states[s] for src in self.sources) for s in STATES},
            "items": sum(src.items for src in self.sources),
            "rows": sum(src.rows for src in self.sources),
            "rejected": sum(src.rejected for src in self.sources),
            "rows_per_s": sum(src.rows_per_s for src in self.sources),
            "poison": sum(src.poison for src in self.sources),
        }

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``sluice status --json``)."""
        return {**asdict(self), "totals": self.totals()}


def ledger_exists(url: str) -> bool:
    """False for a SQLite ledger file not created yet (status must not create it)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return True
    return Path(parsed.database).exists()


def collect_status(
    cfg: SluiceConfig,
    ledger: Ledger | None,
    *,
    now: float | None = None,
    window: float = RATE_WINDOW,
    backlog: Mapping[str, int] | None = None,
    dead_shown: int = 10,
) -> Status:
    """Read the status of ``cfg``'s sources; ``ledger`` None means nothing ran yet.

    ``now`` is on the ledger's clock (``time.time`` unless injected);
    ``backlog`` (items left per source, where a caller knows it) gives ETAs.
    """
    now = time.time() if now is None else now
    names = list(cfg.sources)
    found = {} if ledger is None else _read(ledger.engine, names, now - window, dead_shown)
    owners = [] if ledger is None else _owners(ledger.engine, now)
    secrets = config_secrets(cfg)
    result = []
    for name in names:
        row = found.get(name) or _Row()
        # Over the window, or since the source's first batch if that is more recent.
        span = max(1.0, now - max(now - window, row.first_created or now))
        rate = row.recent_rows / span
        left = (backlog or {}).get(name)
        eta = left / rate if left is not None and rate > 0 else None
        result.append(_source(cfg.sources[name].target, name, row, rate, eta, secrets))
    return Status(redact_url(cfg.ledger), now, window, result, owners)


@dataclass
class _Row:
    """What the queries found for one source."""

    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    items: int = 0
    rows: int = 0
    rejected: int = 0
    recent_rows: int = 0
    first_created: float | None = None
    last_error: str | None = None
    poison: int = 0
    high_water: list[Any] | None = None
    dead: list[DeadBatch] = field(default_factory=list)


def _source(
    target: str, name: str, row: _Row, rate: float, eta: float | None, secrets: list[str]
) -> SourceStatus:
    def clean(text: str | None) -> str | None:
        return None if text is None else redact_text(text, secrets)

    return SourceStatus(
        source=name, target=target, states=row.states, items=row.items, rows=row.rows,
        rejected=row.rejected, rows_per_s=rate, eta_s=eta, last_error=clean(row.last_error),
        poison=row.poison, high_water=row.high_water,
        dead=[DeadBatch(d.id, d.attempts, clean(d.error), d.updated_at) for d in row.dead],
    )


def _read(engine: sa.Engine, names: list[str], since: float, dead_shown: int) -> dict[str, _Row]:
    """Every figure of every source, in one read-only connection."""
    b, rows = batches_table, {name: _Row() for name in names}
    mine = b.c.source.in_(names)
    with engine.connect() as conn:
        for source, state, count, items, written, rejected, first in conn.execute(
            sa.select(b.c.source, b.c.state, sa.func.count(), sa.func.sum(b.c["items"]),
                      sa.func.sum(b.c.rows), sa.func.sum(b.c.rejected),
                      sa.func.min(b.c.created_at))
            .where(mine).group_by(b.c.source, b.c.state)
        ):
            row = rows[source]
            row.states[state] = int(count)
            row.items += int(items or 0)
            if state == "done":
                row.rows, row.rejected = int(written or 0), int(rejected or 0)
            row.first_created = min(first, row.first_created or first)
        for source, written in conn.execute(
            sa.select(b.c.source, sa.func.sum(b.c.rows))
            .where(mine, b.c.state == "done", b.c.updated_at >= since).group_by(b.c.source)
        ):
            rows[source].recent_rows = int(written or 0)
        for source, count in conn.execute(
            sa.select(poison_table.c.source, sa.func.count())
            .where(poison_table.c.source.in_(names)).group_by(poison_table.c.source)
        ):
            rows[source].poison = int(count)
        for source, high_water in conn.execute(
            sa.select(sources_table.c.name, sources_table.c.high_water)
            .where(sources_table.c.name.in_(names))
        ):
            rows[source].high_water = None if high_water is None else json.loads(high_water)
        for name, row in rows.items():
            row.last_error = conn.scalar(
                sa.select(b.c.error).where(b.c.source == name, b.c.error.is_not(None))
                .order_by(b.c.updated_at.desc()).limit(1)
            )
            if row.states["dead"]:
                row.dead = [
                    DeadBatch(r.id, r.attempts, r.error, r.updated_at)
                    for r in conn.execute(
                        sa.select(b.c.id, b.c.attempts, b.c.error, b.c.updated_at)
                        .where(b.c.source == name, b.c.state == "dead")
                        .order_by(b.c.updated_at.desc()).limit(dead_shown)
                    )
                ]
    return rows


def _owners(engine: sa.Engine, now: float) -> list[Owner]:
    o = owners_table
    with engine.connect() as conn:
        found = conn.execute(sa.select(o.c.owner, o.c.heartbeat_at).order_by(o.c.owner)).all()
    return [Owner(owner, max(0.0, now - beat)) for owner, beat in found]


def batch_ids(ledger: Ledger, states: Iterable[str], sources: Iterable[str]) -> dict[str, str]:
    """Batch id → source of the batches in ``states`` (for ``sluice retry``)."""
    b = batches_table
    with ledger.engine.connect() as conn:
        found = conn.execute(
            sa.select(b.c.id, b.c.source)
            .where(b.c.state.in_(list(states)), b.c.source.in_(list(sources)))
            .order_by(b.c.created_at)
        ).all()
    return {batch_id: source for batch_id, source in found}


# -- rendering -------------------------------------------------------------------------

_COLUMNS = (
    "source", "target", *STATES, "rows", "rejected", "rows/s", "ETA", "poison", "last error",
)


def _cells(src: SourceStatus) -> list[str]:
    return [
        src.source, src.target, *(f"{src.states[s]:,}" for s in STATES), f"{src.rows:,}",
        f"{src.rejected:,}", f"{src.rows_per_s:,.1f}", _eta(src.eta_s), f"{src.poison:,}",
        _short(src.last_error),
    ]


def _total_cells(status: Status) -> list[str]:
    t = status.totals()
    return [
        "total", "", *(f"{t['states'][s]:,}" for s in STATES), f"{t['rows']:,}",
        f"{t['rejected']:,}", f"{t['rows_per_s']:,.1f}", "", f"{t['poison']:,}", "",
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
    lines.extend(_dead_lines(status))
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
    dead = _dead_lines(status)
    if dead:
        table.caption, table.caption_justify = Text("\n".join(dead)), "left"
    return table


def _heading(status: Status) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(status.at))
    daemons = ", ".join(
        f"{o.owner} (seen {o.heartbeat_age_s:.0f} s ago)" for o in status.owners
    ) or "none registered"
    return (f"ledger {status.ledger} at {stamp} (rows/s over the last {status.window_s:g} s)\n"
            f"daemons: {daemons}")


def _dead_lines(status: Status) -> list[str]:
    lines = [
        f"  dead {src.source} batch {d.id} ({d.attempts} attempts): {d.error}"
        for src in status.sources for d in src.dead
    ]
    if lines:
        lines.insert(0, "dead batches (sluice retry CONFIG --dead requeues them):")
    return lines


def _eta(seconds: float | None) -> str:
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
