"""The change streams sluice made for ``mode: stream`` sources, dropped when they are done.

A logical slot keeps every change (and the WAL behind it) on the source
server until it is acknowledged: one left behind after a migration fills the
server's disk. ``sluice cutover`` drops sluice's own slots and publications
once the target may take over; ``sluice reset`` drops them too (the source
starts over with a new full load and a new slot) and forgets the stream's
position recorded in the target. Slots and publications the config names are
the operator's, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from config.models import JdbcTargetConfig, SluiceConfig, SqlSourceConfig, split_target

if TYPE_CHECKING:
    from scheduler.ledger import Ledger


def forget_sources(ledger: Ledger, cfg: SluiceConfig, names: Iterable[str]) -> Iterator[str]:
    """``sluice reset``: forget each source's progress in the ledger, and a stream source's
    slot, publication and position in its target; a line for each thing done."""
    names = list(names)
    for name in names:
        yield f"{name}: forgot {ledger.sources.reset(name)} batches and its checkpoint"
    yield from drop_streams(cfg, names, forget_position=True)


def stream_sources(cfg: SluiceConfig, names: Iterable[str] | None = None) -> list[str]:
    """The ``mode: stream`` sources of ``cfg`` (of ``names`` only, when given)."""
    wanted = None if names is None else set(names)
    return [name for name, src in cfg.sources.items()
            if isinstance(src, SqlSourceConfig) and src.mode == "stream"
            and (wanted is None or name in wanted)]  # fmt: skip


def drop_streams(
    cfg: SluiceConfig, names: Iterable[str] | None = None, *, forget_position: bool = False
) -> list[str]:
    """Drop the slot and publication of each stream source (see the module); what was done,
    a line per source, or per ``tables:`` group for the tables that share them.
    ``forget_position``: also forget each stream's position in its target."""
    done: dict[str, list[str]] = {}  # the line's subject → the sources it covers
    what: dict[str, str] = {}
    for name in stream_sources(cfg, names):
        src = cfg.sources[name]
        assert isinstance(src, SqlSourceConfig)
        subject = src.group or name
        if subject not in done:
            what[subject] = _dropped(name, src)
        done.setdefault(subject, []).append(name)
        target = cfg.targets.get(split_target(src.target)[0])
        if forget_position and isinstance(target, JdbcTargetConfig):
            from spark_jobs.changes.positions import forget_stream
            from spark_jobs.common.jdbc import sql_engine

            forget_stream(sql_engine(target.url), name)
    lines = []
    for subject, members in done.items():
        line = f"{subject}: {what[subject]}"
        if members != [subject]:
            line += f" (tables {', '.join(m.partition('.')[2] or m for m in members)})"
        if forget_position:
            line += "; forgot its position in the target" if len(members) == 1 else \
                "; forgot their positions in the target"  # fmt: skip
        lines.append(line)
    return lines


def _dropped(name: str, src: SqlSourceConfig) -> str:
    """Drop what stream source ``name`` keeps on its database; what was done."""
    from sources.stream import StreamSource

    source = StreamSource(name, src)
    try:
        dropped = source.drop()
    finally:
        source.close()
    kept = source.backend.what
    return f"dropped {kept}" if dropped else f"no {kept} of sluice's to drop"
