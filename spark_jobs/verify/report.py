"""What ``sluice verify`` reports: each table compared with its target table, and the whole.

Made by :mod:`scheduler.verify_tables` (which knows the ledger's part: the
scope that is done, the keys still held, the repairs), filled in by the
comparison (:mod:`.compare`) and the deletes (:mod:`.deletes`), printed by the
command (``scheduler/commands/verify.py``) or as one JSON document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TableReport:
    """One source's table compared with its target table."""

    source: str
    target: str
    checked: int = 0
    target_rows: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    rejected: int = 0
    duplicate: int = 0
    in_flight: int = 0
    pending: int = 0
    first: dict[str, list[list[Any]]] = field(default_factory=dict)
    scope: str = "every row"
    read_rate: float | None = None
    """Rows per second the source was read at, at most: its share of ``max_rows_per_s``."""
    repair_batches: int = 0
    repaired_keys: int = 0
    deleted: int = 0
    note: str | None = None
    error: str | None = None

    @property
    def equal(self) -> bool:
        """Compared, and nothing missing, extra, different, rejected or twice (a note
        alone is no difference)."""
        differences = self.missing + self.extra + self.different + self.rejected + self.duplicate
        return self.error is None and not differences


@dataclass
class VerifyReport:
    """Every table's :class:`TableReport`; ``equal`` when each is."""

    tables: list[TableReport]

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document."""
        return {"equal": self.equal,
                "tables": [{**asdict(t), "equal": t.equal} for t in self.tables]}  # fmt: skip
