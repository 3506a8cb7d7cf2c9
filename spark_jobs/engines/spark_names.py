"""A name as Spark SQL reads it: a column in backquotes, whatever characters it holds."""

from __future__ import annotations


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier (backquoted, inner backquotes doubled)."""
    return "`" + name.replace("`", "``") + "`"
