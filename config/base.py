"""What every config model shares: the strict, frozen base and the duration type."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Turn ``250ms``, ``2s``, ``5m``, ``1h`` or a plain number into seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 2s or 5m, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value!r}")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    raise ValueError(f"expected a duration such as 250ms, 2s, 5m or 1h, got {value!r}")


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Seconds, written in YAML as ``250ms``, ``2s``, ``5m``, ``1h`` or a number."""


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def sqlite_url_at(url: str, base_dir: Path) -> str:
    """``url`` with a relative ``sqlite:///file`` resolved against ``base_dir``.

    Relative paths in a config mean "next to the config file"; other URLs
    (and in-memory SQLite) are returned as they are.
    """
    prefix = "sqlite:///"
    rest = url[len(prefix) :] if url.startswith(prefix) else ""
    if not rest or rest == ":memory:" or Path(rest).is_absolute():
        return url
    return prefix + str((base_dir / rest).resolve())
