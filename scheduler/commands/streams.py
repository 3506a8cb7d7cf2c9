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
    a line per source. ``forget_position``: also forget the stream's position in its target."""
    from sources.stream import StreamSource
    from spark_jobs.apply_changes import forget_stream
    from spark_jobs.jdbc import sql_engine

    done = []
    for name in stream_sources(cfg, names):
        src = cfg.sources[name]
        assert isinstance(src, SqlSourceConfig)
        source = StreamSource(name, src)
        try:
            dropped = source.drop()
        finally:
            source.close()
        what = f"dropped {source.kept}" if dropped else f"no {source.kept} of sluice's to drop"
        target = cfg.targets.get(split_target(src.target)[0])
        if forget_position and isinstance(target, JdbcTargetConfig):
            forget_stream(sql_engine(target.url), name)
            what += "; forgot its position in the target"
        done.append(f"{name}: {what}")
    return done
