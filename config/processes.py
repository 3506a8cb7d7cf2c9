"""Processes of this host: whether one still runs (the ledger's owners, local tasks' parent)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with that pid exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
