"""The one exception root of sluice and its families.

Each subclass also inherits the matching builtin so callers that only know
Python's exceptions still catch them. ``transient`` says whether retrying with
backoff can help (a dead database) or not (a bad column).
"""

from __future__ import annotations


class SluiceError(Exception):
    """Root of every error sluice raises on purpose."""

    transient: bool = False
    exit_code: int = 1


class ConfigError(SluiceError, ValueError):
    """The configuration is wrong; the message names file, line, key and fix."""

    exit_code = 2


class SourceError(SluiceError, RuntimeError):
    """A source could not be read; usually transient (network, restart)."""

    transient = True


class TargetError(SluiceError, RuntimeError):
    """A target refused a write; terminal unless the cause is fixed."""


class SinkUnavailable(SluiceError, RuntimeError):
    """The sink cannot run any import (Spark's JVM did not start): the daemon stops,
    rather than fail every batch it has into backoff and then into the dead."""


class LedgerError(SluiceError, RuntimeError):
    """The ledger could not record a state change."""


class ClaimConflict(LedgerError):
    """A compare-and-set lost: another writer changed the row first."""

    transient = True


class FingerprintMismatch(ConfigError):
    """A source's definition changed since the ledger recorded its progress."""
