"""The run-wide sections: ``spark``, ``batch``, ``backpressure``, ``retry`` and ``lease``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from config.base import Duration, Model


class SparkConfig(Model):
    """Where and how the import jobs run."""

    master: str = "local[2]"
    """Spark's master: ``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://…``."""
    deploy: Literal["session", "submit"] = "session"
    """``session``: import jobs on a SparkSession inside the daemon; ``submit``: each batch
    its own ``spark-submit`` application (big batches on a cluster)."""
    conf: dict[str, str] = {}
    """Spark settings (``spark.executor.memory: 4g``), passed as they are."""
    max_concurrent_imports: int = Field(default=2, gt=0)
    """Import jobs running at once (the import slots)."""
    jars: Literal["auto"] | list[str] = "auto"
    """The JDBC driver jars: ``auto`` takes them from ``/usr/share/java``, or a list of
    paths the driver can read."""
    ship_dependencies: bool = True
    """Cluster masters: ship the Python packages sluice's code needs on executors
    (psycopg, PyMySQL, SQLAlchemy, pydantic) on ``spark.archives``. False where
    the executors have them installed, or run another OS, architecture or Python."""

    @field_validator("conf", mode="before")
    @classmethod
    def _conf_values_as_text(cls, value: Any) -> Any:
        # Spark conf values are strings; YAML readers write 4 or true unquoted.
        if isinstance(value, dict):
            return {
                k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()
            }
        return value


MIN_ITEMS = 100
"""``batch.min_items`` when unset (or ``max_items``, when that is smaller)."""

ROWS_BATCH = 2_000_000
"""``batch.max_items`` when unset: the most rows a keyset batch holds. Its rows are
streamed from the source into the target, never held (``docs/architecture.md``, "Batch
sizes by default"), so a batch's size costs no memory, and each batch costs ~150 ms of
Spark job and connections whatever its size."""

KEY_BATCH = 10_000
"""The most items a batch of keys or messages (sweep, incremental, SQS) holds when
``batch.max_items`` is unset: those are held in the source's buffer, one by one."""

KEY_RANGE = 250_000
"""Rows of a keyset range when the source sets no ``page_size``, capped by its batch size
and, for wide rows, by :data:`BATCH_BYTES` of them: a range's end is one key query
walking that many index entries (~20 ms of PostgreSQL's for 250,000), where ranges of
a 10,000-row page made 1,000 queries of the daemon's process for 10 M rows, and the
first batch waited for 125 of them."""

BATCH_BYTES = 256 * 2**20
"""About the most bytes (as text) a keyset batch holds when ``batch.max_items`` is
unset: a table of wide rows gets fewer rows a batch (at least :data:`KEY_BATCH`)."""


class BatchConfig(Model):
    """How big a batch may get and how long a partial one may wait.

    With ``target_latency`` each source's batch size adapts (see
    :mod:`scheduler.batch_size`) between ``min_items`` and ``max_items`` so
    that its imports take about that long; without it every batch may hold
    ``max_items``. Left out, ``max_items`` is sluice's to choose per source
    (:attr:`chosen`): a keyset source's batches hold up to :data:`ROWS_BATCH`
    rows, fewer for wide rows (:data:`BATCH_BYTES`); other sources' up to
    :data:`KEY_BATCH` items.
    """

    max_items: int = Field(default=ROWS_BATCH, gt=0)
    """The most items (rows, keys or messages) a batch holds, for every source. Left out,
    sluice sizes each source's batches: a keyset source's about 256 MiB of rows as text (at
    least 10,000 rows, at most 2,000,000), others' up to 10,000 keys or messages."""
    max_wait: Duration = 2.0
    """A partial batch is flushed once its first item has waited this long."""
    target_latency: Duration | None = Field(default=None, gt=0)
    """Each source's batch size moves between ``min_items`` and ``max_items`` so that its
    imports take about this long; None: batches are ``max_items``."""
    min_items: int = Field(default=MIN_ITEMS, gt=0)
    """With ``target_latency``: the smallest a batch gets (``max_items`` when that is
    smaller than 100)."""

    @model_validator(mode="before")
    @classmethod
    def _least_follows_a_small_batch(cls, data: Any) -> Any:
        # A config that sets only a small max_items keeps it valid: the
        # least size is then the batch size itself.
        if not isinstance(data, dict) or "min_items" in data:
            return data
        try:
            most = int(data.get("max_items", MIN_ITEMS))  # "7" from a ${VAR} too
        except (TypeError, ValueError):
            return data  # max_items' own error says what is wrong
        return {**data, "min_items": most} if 0 < most < MIN_ITEMS else data

    @property
    def chosen(self) -> bool:
        """Whether sluice chooses each source's batch size (``max_items`` left out)."""
        return "max_items" not in self.model_fields_set

    @property
    def key_items(self) -> int:
        """The most keys or messages a batch holds: ``max_items``, or :data:`KEY_BATCH`
        where sluice chooses."""
        return KEY_BATCH if self.chosen else self.max_items

    def largest(self, walks_ranges: bool) -> int:
        """The most a batch of a source may hold before its rows are looked at: ``max_items``
        for a keyset source (``walks_ranges``; sluice may choose fewer for wide rows),
        :attr:`key_items` for the others."""
        return self.max_items if walks_ranges else self.key_items

    @model_validator(mode="after")
    def _least_within_most(self) -> BatchConfig:
        if self.min_items > self.max_items:
            raise ValueError(
                f"min_items ({self.min_items}) must not exceed max_items ({self.max_items})"
            )
        return self


class ProbeConfig(Model):
    """A probe of the downstream's own pending work: a SQL count or an HTTP number."""

    sql: str | None = None
    """A query answering one number: the downstream's pending work (with ``url``)."""
    url: str | None = None
    """The database ``sql`` runs on (a SQLAlchemy URL)."""
    http: str | None = None
    """A URL answering one number in its body, instead of ``sql``."""
    ttl: Duration = 5.0
    """How often the probe is read; a read also times out after this (at least 1 s)."""

    @model_validator(mode="after")
    def _one_kind(self) -> ProbeConfig:
        if (self.sql is None) == (self.http is None):
            raise ValueError("probe needs exactly one of sql: (with url:) or http:")
        if self.sql is not None and self.url is None:
            raise ValueError("probe sql: needs url: (the database to count in)")
        return self


class BackpressureConfig(Model):
    """When to stop and resume feeding (hysteresis on pending items)."""

    max_pending: int = Field(default=50000, gt=0)
    """Stop feeding at this many items not yet imported (with the probe's count). Left out,
    it follows the largest batch: every import slot busy with one job's worth of rows and
    one more waiting, at least 50,000."""
    resume_below: int = Field(default=25000, ge=0)
    """Feed again once pending items fall below this. Left out, one batch under
    ``max_pending``."""
    max_importing_batches: int = Field(default=4, gt=0)
    """The most batches importing at once. Left out, as many as ``max_pending`` makes, and
    at least 32 per import slot and 32 more (small tables' batches share Spark jobs)."""
    probe: ProbeConfig | None = None
    """Adds the downstream's own backlog (a SQL count or an HTTP number) to the pending
    count."""

    @model_validator(mode="after")
    def _resume_below_max(self) -> BackpressureConfig:
        if self.resume_below > self.max_pending:
            raise ValueError(
                f"resume_below ({self.resume_below}) must not exceed "
                f"max_pending ({self.max_pending})"
            )
        return self


class RetryConfig(Model):
    """How failed batches are retried before they are declared dead."""

    max_attempts: int = Field(default=5, gt=0)
    """Attempts of a batch before it is dead (``sluice retry --dead`` requeues it)."""
    backoff: Duration = 10.0
    """The wait before a failed batch's first retry; it doubles each attempt."""
    max_backoff: Duration = 600.0
    """The longest wait between two attempts."""


class LeaseConfig(Model):
    """How long an importer owns a batch without renewing its lease."""

    ttl: Duration = 600.0
    """A batch whose owner has not renewed its lease for this long (a dead daemon) is taken
    over by a live one."""
