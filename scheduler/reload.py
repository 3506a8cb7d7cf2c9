"""The daemon's config while it runs: re-read on change or SIGHUP, applied where it may change.

Strategy, batch, backpressure, retry and windows change at the next tick of
the loop. Sources, targets, the ledger, the work folder and Spark take a
restart: a reload keeps them as they run and says so (a SQL source's
``limits:`` change at once).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from config.models import SluiceConfig

# The daemon's logger: reloads are the daemon's lines, as they were before this module existed.
log = logging.getLogger("sluice.daemon")

# Sections a reload leaves as they run (sources are compared less their buffers).
_FIXED = ("ledger", "work_dir", "spark", "targets")


class ConfigReloader:
    """Holds the running config and replaces it with the file's when that is valid.

    ``apply`` puts a new running config to use (the daemon hands it to the
    sources and the loop); it runs on the thread that reloads: the config
    watch's job or SIGHUP's thread.
    """

    def __init__(
        self, cfg: SluiceConfig, config_path: str, apply: Callable[[SluiceConfig], None]
    ) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self._apply = apply
        self._mtime = _mtime(config_path)

    @property
    def watched(self) -> bool:
        """Whether the file was there at start, so that a change to it can be seen."""
        return self._mtime is not None

    def watch(self) -> None:
        """Reload if the file changed since it was last looked at (a periodic job)."""
        mtime = _mtime(self.config_path)
        if mtime != self._mtime:
            self._mtime = mtime
            self.reload("the file changed")

    def reload(self, reason: str) -> bool:
        """Re-read the config; apply the strategy, batch, backpressure, retry and windows.

        An invalid file is logged and ignored: the running config stays.
        Changes to sources, targets, the ledger or Spark need a restart.
        """
        from config.errors import ConfigError
        from config.loader import load_config

        try:
            # tables: sources keep the tables found at start (new ones take a restart).
            new = load_config(self.config_path, tables=self.cfg.table_catalog)
        except ConfigError as error:
            log.warning("config reload (%s) ignored, the running config stays: %s", reason, error)
            return False
        fixed = [f for f in _FIXED if getattr(new, f) != getattr(self.cfg, f)]
        if _without_buffers(new) != _without_buffers(self.cfg):
            fixed.append("sources")
        if fixed:
            log.warning("config reload: %s changed; that takes a restart", ", ".join(fixed))
        # Sources stay as they run (buffers too: one that follows batch.max_items
        # is sized at start), but for their limits; so does whatever else
        # takes a restart.
        sources = {
            name: src if name not in new.sources or src.kind != "sql"
            else src.model_copy(update={"limits": new.sources[name].limits})  # type: ignore[union-attr]
            for name, src in self.cfg.sources.items()
        }  # fmt: skip
        new = new.model_copy(update={f: getattr(self.cfg, f) for f in fixed} | {"sources": sources})
        self.cfg = new
        self._apply(new)
        log.info("config reloaded (%s): strategy, batch, backpressure, retry, windows, limits",
                 reason)
        return True


def _without_buffers(cfg: SluiceConfig) -> dict[str, Any]:
    """The sources as configured, less their buffers (which may follow ``batch.max_items``)
    and their limits (which a reload changes)."""
    return {name: src.model_dump(exclude={"buffer", "limits"}) for name, src in cfg.sources.items()}


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
