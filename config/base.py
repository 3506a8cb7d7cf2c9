"""What every config model shares: the strict, frozen base and the duration type."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

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


_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNIT_BYTES = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip


def parse_bytes(value: Any) -> int:
    """Turn ``512MiB``, ``10GB``, ``1TiB`` or a plain number into bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        match = _BYTES.match(value)
        if match:
            return int(float(match.group(1)) * _UNIT_BYTES[(match.group(2) or "").lower()])
    raise ValueError(f"expected a size such as 512MiB or 10GB, got {value!r}")


Bytes = Annotated[int, BeforeValidator(parse_bytes)]
"""Bytes, written in YAML as ``512MiB``, ``10GB`` or a number."""


def check_database_url(value: str) -> str:
    """``value`` when SQLAlchemy can parse it as a database URL; else a ValueError that says
    the form (the URL itself is not repeated: it may hold a password)."""
    try:
        make_url(value)
    except ArgumentError:
        scheme = value.split("://", 1)[0] if "://" in value else value.split(":", 1)[0]
        hint = "; sluice makes the JDBC URL from it" if value.lower().startswith("jdbc:") else ""
        raise ValueError(
            f"not a database URL (it starts {scheme[:20]!r}): write it as "
            "dialect+driver://user@host:port/database, e.g. "
            "postgresql+psycopg://app@db:5432/shop, mysql+pymysql://app@db/shop or "
            f"sqlite:///shop.db{hint}"
        ) from None
    return value


DatabaseUrl = Annotated[str, AfterValidator(check_database_url)]
"""A SQLAlchemy database URL (``postgresql+psycopg://…``), checked when the config loads."""


class Model(BaseModel):
    """Base of every config model: unknown keys are errors, values frozen.

    A field's docstring (the string under it) is its description in the JSON
    Schema (``sluice schema``) and in the configuration reference the docs
    build from it, which fails on a key without one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def path_at(path: str, base_dir: Path) -> str:
    """``path`` resolved against ``base_dir`` when it is relative (a Hadoop URL, with its
    ``scheme://``, and an absolute path are returned as they are)."""
    if "://" in path or Path(path).is_absolute():
        return path
    return str((base_dir / path).resolve())


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


def database_file(url: str, base_dir: Path) -> Path | None:
    """The file ``url``'s database is (a relative one resolved against ``base_dir``, as
    :func:`sqlite_url_at` resolves it); None for a server's database, or one in memory.

    Once resolved, a URL whose database is a file names it by its absolute path, where a
    server's names a database.
    """
    database = make_url(sqlite_url_at(url, base_dir)).database
    return Path(database) if database and Path(database).is_absolute() else None
