"""sluice configuration: the YAML schema, loading with ``${ENV}``, and secrets.

``load_config(path)`` is the one way YAML enters the program; everything else
works on the frozen :class:`SluiceConfig` it returns.
"""

from __future__ import annotations

from config.errors import ConfigError
from config.loader import load_config, load_config_text
from config.models import SluiceConfig

__all__ = ["ConfigError", "SluiceConfig", "load_config", "load_config_text"]
