"""The typed, frozen shape of a sluice config file.

Field names and defaults are the config's contract (README, docs/architecture.md).
Nothing outside ``config/`` reads raw YAML: everything works on these models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

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


class BufferConfig(Model):
    """The in-memory buffer of one source (its QueueingLimitedSource)."""

    capacity: int = Field(default=20000, gt=0)
    replenish_below: int = Field(default=5000, ge=0)

    @model_validator(mode="after")
    def _threshold_below_capacity(self) -> BufferConfig:
        if not self.capacity > self.replenish_below >= 0:
            raise ValueError(
                f"replenish_below ({self.replenish_below}) must be below capacity "
                f"({self.capacity}) and not negative"
            )
        return self


class LimitsConfig(Model):
    """What sluice may ask of a source database."""

    max_connections: int = Field(default=2, gt=0)
    max_rows_per_s: float | None = Field(default=None, gt=0)


class ReadConfig(Model):
    """How the Spark import job reads a SQL source."""

    num_partitions: int = Field(default=2, gt=0)
    fetchsize: int = Field(default=10000, gt=0)


class SqlSourceConfig(Model):
    """A table (or schema.table) in a SQL database reached by SQLAlchemy."""

    kind: Literal["sql"]
    url: str
    table: str
    key: str | list[str]
    mode: Literal["keyset", "sweep", "incremental"] = "keyset"
    where: str | None = None
    cursor: str | None = None
    sweep_pause: Duration = 30.0
    page_size: int = Field(default=10000, gt=0)
    buffer: BufferConfig = BufferConfig()
    limits: LimitsConfig = LimitsConfig()
    read: ReadConfig = ReadConfig()
    columns: dict[str, str] | None = None
    target: str

    @field_validator("key")
    @classmethod
    def _key_not_empty(cls, value: str | list[str]) -> str | list[str]:
        if not value:
            raise ValueError("key must name at least one column")
        return value

    @model_validator(mode="after")
    def _cursor_matches_mode(self) -> SqlSourceConfig:
        if self.mode == "incremental" and not self.cursor:
            raise ValueError("mode incremental needs cursor: (a column such as updated_at)")
        if self.mode != "incremental" and self.cursor:
            raise ValueError(f"cursor: is only used by mode incremental, not {self.mode}")
        return self

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The key as a tuple of column names (one for a simple key)."""
        return (self.key,) if isinstance(self.key, str) else tuple(self.key)


class SqsSourceConfig(Model):
    """An SQS queue whose messages are JSON objects carrying a key field."""

    kind: Literal["sqs"]
    queue_url: str
    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    key: str = "id"
    wait_time: Duration = 20.0
    visibility_timeout: Duration = 60.0
    max_receives: int = Field(default=5, gt=0)
    dead_letter_queue_url: str | None = None
    buffer: BufferConfig = BufferConfig(capacity=2000, replenish_below=500)
    columns: dict[str, str] | None = None
    target: str


SourceConfig = Annotated[SqlSourceConfig | SqsSourceConfig, Field(discriminator="kind")]


class WriteConfig(Model):
    """How the Spark import job writes a JDBC target."""

    batchsize: int = Field(default=10000, gt=0)
    num_partitions: int = Field(default=2, gt=0)


class JdbcTargetConfig(Model):
    """A database reached by Spark JDBC; tables are upserted on the key."""

    kind: Literal["jdbc"]
    url: str
    write: WriteConfig = WriteConfig()


class ParquetTargetConfig(Model):
    """A folder (local or any Hadoop path) of Parquet tables.

    ``partition_by``: columns whose values name the folders (Hive style,
    ``region=eu/``) each batch's files go into; empty: one file per batch.
    """

    kind: Literal["parquet"]
    path: str
    partition_by: list[str] = []

    @field_validator("partition_by")
    @classmethod
    def _partition_columns_distinct(cls, value: list[str]) -> list[str]:
        # A folder name k=v cannot hold an empty k; a column twice would
        # nest a folder level that says nothing.
        if any(not name.strip() for name in value):
            raise ValueError("a column name cannot be empty")
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"column {', '.join(map(repr, twice))} is named more than once")
        return value


TargetConfig = Annotated[JdbcTargetConfig | ParquetTargetConfig, Field(discriminator="kind")]


class SparkConfig(Model):
    """Where and how the import jobs run."""

    master: str = "local[2]"
    deploy: Literal["session", "submit"] = "session"
    conf: dict[str, str] = {}
    max_concurrent_imports: int = Field(default=2, gt=0)
    jars: Literal["auto"] | list[str] = "auto"
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


class ShareConfig(Model):
    """Bounds on a source's share of the items fed."""

    min: float = Field(default=0.0, ge=0, le=1)
    max: float = Field(default=1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _min_below_max(self) -> ShareConfig:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class FairEntry(Model):
    """A weighted child of ``fair`` that is itself a strategy."""

    weight: float = Field(default=1.0, gt=0)
    node: StrategyNode


class PreferNode(Model):
    """Ordered fallback: the first child with items buffered wins."""

    prefer: list[StrategyNode] = Field(min_length=1)


class FairNode(Model):
    """Weighted fair share between children (deficit round robin on items).

    Written ``fair: {orders: 2, customers: 1}`` for sources, or as a list of
    ``{node: <strategy>, weight: w}`` entries to nest strategies.
    """

    fair: dict[str, Annotated[float, Field(gt=0)]] | list[FairEntry] = Field(min_length=1)


StrategyNode = str | PreferNode | FairNode
FairEntry.model_rebuild()
PreferNode.model_rebuild()


class StrategyConfig(Model):
    """The top of the strategy tree, with optional per-source share bounds."""

    prefer: list[StrategyNode] | None = Field(default=None, min_length=1)
    fair: dict[str, Annotated[float, Field(gt=0)]] | list[FairEntry] | None = Field(
        default=None, min_length=1
    )
    shares: dict[str, ShareConfig] = {}

    @model_validator(mode="after")
    def _one_root(self) -> StrategyConfig:
        if (self.prefer is None) == (self.fair is None):
            raise ValueError("strategy needs exactly one of prefer: or fair:")
        return self

    @property
    def root(self) -> PreferNode | FairNode:
        """The root node of the tree."""
        if self.prefer is not None:
            return PreferNode(prefer=self.prefer)
        assert self.fair is not None
        return FairNode(fair=self.fair)


class BatchConfig(Model):
    """How big a batch may get and how long a partial one may wait."""

    max_items: int = Field(default=10000, gt=0)
    max_wait: Duration = 2.0


class ProbeConfig(Model):
    """A probe of the downstream's own pending work: a SQL count or an HTTP number."""

    sql: str | None = None
    url: str | None = None
    http: str | None = None
    ttl: Duration = 5.0

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
    resume_below: int = Field(default=25000, ge=0)
    max_importing_batches: int = Field(default=4, gt=0)
    probe: ProbeConfig | None = None

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
    backoff: Duration = 10.0
    max_backoff: Duration = 600.0


class LeaseConfig(Model):
    """How long an importer owns a batch without renewing its lease."""

    ttl: Duration = 600.0


class SluiceConfig(Model):
    """A whole sluice config file."""

    ledger: str = "sqlite:///sluice-ledger.db"
    work_dir: str = "./.sluice"
    log_format: Literal["text", "json"] = "text"
    metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    spark: SparkConfig = SparkConfig()
    sources: dict[str, SourceConfig] = Field(min_length=1)
    targets: dict[str, TargetConfig] = Field(min_length=1)
    strategy: StrategyConfig | None = None
    batch: BatchConfig = BatchConfig()
    backpressure: BackpressureConfig = BackpressureConfig()
    retry: RetryConfig = RetryConfig()
    lease: LeaseConfig = LeaseConfig()
    windows: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _sizes_follow_the_batch(cls, data: Any) -> Any:
        """Fill in the buffer and backpressure sizes the user left out, from the batch size.

        Fixed numbers would cap a larger ``batch.max_items`` (a 20,000-row
        buffer cannot hold a batch of 100,000) or leave no room for a second
        batch in flight; see :func:`derived_sizes`. Values given are kept.
        """
        if not isinstance(data, dict):
            return data
        spark = _as_dict(data.get("spark"))
        submits = isinstance(spark, dict) and spark.get("deploy") == "submit"
        sizes = derived_sizes(
            _given(data, "batch", "max_items", BatchConfig().max_items),
            _given(data, "spark", "max_concurrent_imports", SparkConfig().max_concurrent_imports),
            group=1 if submits else JOB_GROUP,
        )
        data = dict(data)
        backpressure = _as_dict(data.get("backpressure"))
        if isinstance(backpressure, dict):
            given = "max_pending" in backpressure
            backpressure.setdefault("max_pending", sizes.max_pending)
            max_pending = _as_int(backpressure["max_pending"], sizes.max_pending)
            if not given or "resume_below" not in backpressure:
                backpressure.setdefault("resume_below", sizes.resume_for(max_pending))
            backpressure.setdefault("max_importing_batches", sizes.max_importing_batches)
            data["backpressure"] = backpressure
        sources = data.get("sources")
        if isinstance(sources, dict):
            data["sources"] = {
                name: _with_buffer(source, sizes) for name, source in sources.items()
            }
        return data

    @field_validator("windows")
    @classmethod
    def _windows_are_crontabs(cls, value: list[str]) -> list[str]:
        from scheduler.windows import parse_window

        for expression in value:
            parse_window(expression)
        return value

    @model_validator(mode="after")
    def _references_resolve(self) -> SluiceConfig:
        # Raised as a ValidationError so each problem keeps the key path the
        # user wrote (the loader turns it into a file line), all at once.
        problems: list[InitErrorDetails] = []

        def problem(loc: tuple[str | int, ...], value: Any, message: str) -> None:
            error = PydanticCustomError("reference", message)
            problems.append(InitErrorDetails(type=error, loc=loc, input=value))

        targets = ", ".join(sorted(self.targets))
        for name, source in self.sources.items():
            parts = source.target.split(".")
            if len(parts) not in (2, 3) or parts[0] not in self.targets:
                problem(
                    ("sources", name, "target"),
                    source.target,
                    f"{source.target!r} must be TARGET.table or TARGET.schema.table "
                    f"with TARGET one of: {targets}",
                )
        if self.strategy is not None:
            sources = ", ".join(sorted(self.sources))
            for loc, name in _strategy_refs(self.strategy):
                if name not in self.sources:
                    problem(
                        ("strategy", *loc),
                        name,
                        f"strategy names source {name!r}, which is not defined "
                        f"(sources: {sources})",
                    )
            for name in self.strategy.shares:
                if name not in self.sources:
                    problem(
                        ("strategy", "shares", name),
                        name,
                        f"strategy.shares names unknown source {name!r} (sources: {sources})",
                    )
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    def resolve_paths(self, base_dir: Path) -> SluiceConfig:
        """Return a copy with relative paths resolved against ``base_dir``.

        Relative paths in a config mean "next to the config file", so a config
        behaves the same whatever the daemon's working directory is.
        """

        def absolute(path: str) -> str:
            if "://" in path or Path(path).is_absolute():
                return path
            return str((base_dir / path).resolve())

        def sqlite_url(url: str) -> str:
            prefix = "sqlite:///"
            if url.startswith(prefix) and not url.startswith("sqlite:////"):
                rest = url[len(prefix) :]
                if rest and rest != ":memory:":
                    return prefix + absolute(rest)
            return url

        sources = {
            name: src.model_copy(update={"url": sqlite_url(src.url)}) if src.kind == "sql" else src
            for name, src in self.sources.items()
        }
        targets = {
            name: (
                tgt.model_copy(update={"path": absolute(tgt.path)})
                if tgt.kind == "parquet"
                else tgt.model_copy(update={"url": sqlite_url(tgt.url)})
            )
            for name, tgt in self.targets.items()
        }
        return self.model_copy(
            update={
                "ledger": sqlite_url(self.ledger),
                "work_dir": absolute(self.work_dir),
                "sources": sources,
                "targets": targets,
            }
        )


@dataclass(frozen=True)
class DerivedSizes:
    """Defaults that follow ``batch.max_items`` (see :func:`derived_sizes`)."""

    max_items: int
    max_pending: int
    range_buffer: int
    key_buffer: int
    max_importing_batches: int

    def resume_for(self, max_pending: int) -> int:
        """``resume_below`` for a ``max_pending``: one batch under it, at least half of it."""
        return max(max_pending - self.max_items, max_pending // 2)


JOB_GROUP = 8
"""Most batches one Spark job of the in-process sink imports together (keyset ranges of
one source waiting for a thread together: see :class:`sinks.spark.SparkSink`)."""

JOB_ROWS = 100_000
"""Rows a Spark job should carry when batches are small: a job costs the driver
~0.1-0.25 s whatever its size, which is then a small part of it."""


def derived_sizes(max_items: int, imports: int, group: int = JOB_GROUP) -> DerivedSizes:
    """The buffer and backpressure sizes a config gets when it does not set them.

    ``group``: how many batches one import job may take together (1 when
    each batch is a ``spark-submit`` of its own). An import slot is busy
    with a job's worth of rows: one batch, or as many small ones as make
    :data:`JOB_ROWS` (at most ``group``).

    - ``backpressure.max_pending``: every import slot busy and one job's
      worth waiting for the next free one (at least 50,000); ``resume_below``:
      one batch's room under it (at least half of it), so that a batch is
      fed as soon as one is done; ``max_importing_batches``: as many batches
      as that many rows in flight make (at least 4).
    - a keyset source's ``buffer`` (counted in rows; its items are ranges,
      a few bytes each): what may be in flight and a batch more, and at
      least the batches in flight and two more; ``replenish_below`` one
      batch under it.
    - a sweep or incremental source's ``buffer`` (one item per key): two
      batches (at least 20,000 keys), refilled at one batch.

    SQS buffers keep their fixed default (2,000 messages, refilled at 500):
    messages held in a buffer stay invisible to every other consumer.
    """
    slot = max(max_items, min(JOB_ROWS, group * max_items))
    in_flight = (imports + 1) * slot
    return DerivedSizes(
        max_items=max_items,
        max_pending=max(50_000, in_flight),
        range_buffer=max(20_000, (imports + 2) * max_items, in_flight + max_items),
        key_buffer=max(20_000, 2 * max_items),
        max_importing_batches=max(4, -(-in_flight // max_items)),
    )


def _as_dict(value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    return dict(value) if isinstance(value, dict) else value


def _as_int(value: Any, default: int) -> int:
    valid = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if valid else default


def _given(data: dict[str, Any], section: str, key: str, default: int) -> int:
    part = _as_dict(data.get(section))
    return _as_int(part.get(key), default) if isinstance(part, dict) else default


def _with_buffer(source: Any, sizes: DerivedSizes) -> Any:
    """A SQL source's raw config with its derived buffer, unless it sets one."""
    raw = _as_dict(source)
    if not isinstance(raw, dict) or raw.get("kind") != "sql" or "buffer" in raw:
        return source
    capacity = sizes.range_buffer if raw.get("mode", "keyset") == "keyset" else sizes.key_buffer
    refill = capacity - sizes.max_items if capacity > sizes.max_items else capacity // 4
    return {**raw, "buffer": {"capacity": capacity, "replenish_below": refill}}


def strategy_sources(node: StrategyNode) -> list[str]:
    """Every source name a strategy (sub)tree mentions, in order."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, PreferNode):
        return [name for child in node.prefer for name in strategy_sources(child)]
    if isinstance(node.fair, dict):
        return list(node.fair)
    return [name for entry in node.fair for name in strategy_sources(entry.node)]


def _strategy_refs(
    node: StrategyConfig | StrategyNode, loc: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every source name a strategy (sub)tree mentions, with its key path in the YAML."""
    if isinstance(node, str):
        return [(loc, node)]
    if isinstance(node, StrategyConfig | PreferNode) and node.prefer is not None:
        return [
            ref
            for i, child in enumerate(node.prefer)
            for ref in _strategy_refs(child, (*loc, "prefer", i))
        ]
    fair = node.fair if isinstance(node, StrategyConfig | FairNode) else None
    if isinstance(fair, dict):
        return [((*loc, "fair", name), name) for name in fair]
    return [
        ref
        for i, entry in enumerate(fair or [])
        for ref in _strategy_refs(entry.node, (*loc, "fair", i, "node"))
    ]


def split_target(target: str) -> tuple[str, str | None, str]:
    """Split ``warehouse.orders`` / ``warehouse.sales.orders`` into (target, schema, table)."""
    parts = target.split(".")
    if len(parts) == 2:
        return parts[0], None, parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"target {target!r} must be TARGET.table or TARGET.schema.table")
