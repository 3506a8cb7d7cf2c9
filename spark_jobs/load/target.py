"""What every target writer shares: where a batch goes, what a commit records, and
the errors a commit can end with.

The writers themselves are :mod:`spark_jobs.load.write_jdbc` and
:mod:`spark_jobs.load.write_parquet`; :mod:`spark_jobs.load.write` chooses between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from config.errors import TargetError
from config.models import JdbcTargetConfig, ParquetTargetConfig
from spark_jobs.common.manifest import Manifest

COMMITS_TABLE = "_sluice_commits"
"""In a JDBC target, one row per committed batch; in a Parquet table, a folder of markers."""

REJECTS_TABLE = "_sluice_rejects"
"""In a JDBC target, one row per row the target refused, with the reason."""

MADE_TABLE = "_sluice_tables"
"""In a JDBC target, one row per table sluice created: the tables whose schema objects
(indexes, constraints, defaults…) sluice builds (see :mod:`spark_jobs.schema`)."""


class StaleToken(TargetError):
    """The batch was committed by a newer importer (a higher fencing token)."""


@dataclass(frozen=True)
class TargetTable:
    """Where a batch goes: the target's config, its schema (None: default), table and key.

    ``cursor``: the column an incremental source orders changes by
    (``updated_at``); an upsert never replaces a row whose cursor is newer
    than the incoming one's, so that two imports of one key in either order
    end with the newest version. None for other sources.
    """

    name: str
    config: JdbcTargetConfig | ParquetTargetConfig
    schema: str | None
    table: str
    key: tuple[str, ...]
    cursor: str | None = None
    cast: Mapping[str, str] = field(default_factory=dict)
    """Per column, the type a table sluice creates gives it (the source's ``cast:``)."""
    zero_dates: str = "null"
    """What MySQL's zero dates become in another engine: ``null`` or ``reject`` (a reject)."""
    fresh: bool = False
    """The table was made by this run without its primary key, which follows its first
    pass: a direct load leaves the range probe out (:mod:`spark_jobs.load.late_keys`)."""

    @property
    def label(self) -> str:
        """``target.schema.table`` for messages (no URL, so no secret)."""
        return ".".join(p for p in (self.name, self.schema, self.table) if p)


@dataclass(frozen=True)
class Commit:
    """A batch's commit as the target records it: its fencing token and its rows.

    ``rows``: rows the target took; ``rejected``: rows it refused (recorded in
    ``_sluice_rejects``), so that a reconciled batch still counts them.
    """

    token: int
    rows: int
    rejected: int = 0


@dataclass(frozen=True)
class Written:
    """What one write of a batch did: rows committed, rows the target rejected, and how.

    ``method``: ``copy`` (COPYed straight into the table), ``staged copy``
    (COPYed into a staging table, then upserted), ``staged jdbc`` (Spark's
    JDBC writer into a staging table, then upserted), ``parquet``.
    ``seconds``: how long the batch's own load took, where a Spark task of its
    own loaded it (None: the import on the driver times it). ``zero_dates``:
    per column, MySQL zero dates that became NULL on the way (see
    :mod:`spark_jobs.engines.transforms`).
    """

    rows: int
    rejected: int = 0
    method: str = ""
    seconds: float | None = None
    zero_dates: Mapping[str, int] = field(default_factory=dict)


def stale_token_error(target: TargetTable, manifest: Manifest, committed: int) -> StaleToken:
    """The refusal of a commit that carries an older token than the one recorded."""
    return StaleToken(
        f"stale fencing token: batch {manifest.batch_id} was committed to {target.label} "
        f"with token {committed}, this import carries {manifest.token}"
    )
