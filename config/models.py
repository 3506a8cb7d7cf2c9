"""The typed, frozen shape of a sluice config file.

Field names and defaults are the config's contract (docs/reference/configuration.md is
made from them; docs/architecture.md).
Nothing outside ``config/`` reads raw YAML: everything works on these models.

:class:`SluiceConfig`, the whole file, lives here; its sections live in
modules of their own (``config.sources``, ``config.targets``,
``config.strategy``, ``config.settings``, ``config.sizes``) and are all
importable from here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from config.base import DatabaseUrl, Duration, Model, parse_duration, path_at, sqlite_url_at
from config.catalog import TableCatalog
from config.http import HttpConfig
from config.settings import (
    BackpressureConfig,
    BatchConfig,
    LeaseConfig,
    ProbeConfig,
    RetryConfig,
    SparkConfig,
)
from config.sizes import JOB_GROUP, JOB_ROWS, DerivedSizes, derived_sizes, with_derived_sizes
from config.sources import (
    BufferConfig,
    LimitsConfig,
    ReadConfig,
    SourceConfig,
    SqlSourceConfig,
    SqsSourceConfig,
)
from config.strategy import (
    FairEntry,
    FairNode,
    PreferNode,
    ShareConfig,
    StrategyConfig,
    StrategyNode,
    strategy_refs,
    strategy_sources,
)
from config.tables import ORDERS, find_cycle
from config.targets import (
    JdbcTargetConfig,
    ParquetTargetConfig,
    TargetConfig,
    WriteConfig,
    split_target,
)

__all__ = [
    "JOB_GROUP",
    "JOB_ROWS",
    "BackpressureConfig",
    "BatchConfig",
    "BufferConfig",
    "DerivedSizes",
    "Duration",
    "FairEntry",
    "FairNode",
    "JdbcTargetConfig",
    "LeaseConfig",
    "LimitsConfig",
    "Model",
    "ParquetTargetConfig",
    "PreferNode",
    "ProbeConfig",
    "ReadConfig",
    "RetryConfig",
    "ShareConfig",
    "SluiceConfig",
    "SourceConfig",
    "SparkConfig",
    "SqlSourceConfig",
    "SqsSourceConfig",
    "StrategyConfig",
    "StrategyNode",
    "TargetConfig",
    "WriteConfig",
    "derived_sizes",
    "parse_duration",
    "split_target",
    "strategy_sources",
]


class SluiceConfig(Model):
    """A whole sluice config file."""

    ledger: DatabaseUrl = "sqlite:///sluice-ledger.db"
    """Where sluice records batches, claims and checkpoints: a SQLite or PostgreSQL URL
    (several daemons on one config need PostgreSQL). Its ``sluice_*`` tables are created and
    upgraded by sluice itself; a relative SQLite path is next to the config file."""
    ledger_outage: Duration = 600.0
    """How long the daemon waits out an unreachable ledger (its reads and writes retried with
    backoff) before it stops with exit code 1."""
    work_dir: str = "./.sluice"
    """A folder of sluice's own: the code and packages shipped to a Spark cluster
    (``pyfiles/``) and, with ``spark.deploy: submit``, each batch's manifest, log and result;
    relative to the config file's folder."""
    log_format: Literal["text", "json"] = "text"
    """How the daemon logs: lines of text, or one JSON object a line
    (``sluice run --log-format`` overrides it)."""
    metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    """Deprecated: the old spelling of ``http: {port: N}`` (loopback, no token); not with
    ``http:``."""
    http: HttpConfig | None = None
    """Serve the status page, ``/status.json``, ``/metrics`` and ``/record``; left out,
    nothing is served."""
    spark: SparkConfig = SparkConfig()
    """Where the import jobs run (Spark's master) and how (a session or ``spark-submit``)."""
    sources: dict[str, SourceConfig] = Field(min_length=1)
    """What to migrate, by name: SQL tables (``kind: sql``) and SQS queues (``kind: sqs``)."""
    targets: dict[str, TargetConfig] = Field(min_length=1)
    """Where it goes, by name: databases (``kind: jdbc``) and Parquet folders
    (``kind: parquet``); a source's ``target:`` names one of them."""
    strategy: StrategyConfig | None = None
    """Which source's items are fed next: a tree of ``prefer`` and ``fair`` nodes; left out,
    every source gets an equal share."""
    batch: BatchConfig = BatchConfig()
    """How big a batch may get and how long a partial one may wait."""
    backpressure: BackpressureConfig = BackpressureConfig()
    """When to stop feeding the import jobs and when to resume."""
    retry: RetryConfig = RetryConfig()
    """How many attempts a failed batch gets, and the waits between them."""
    lease: LeaseConfig = LeaseConfig()
    """How long a daemon owns a batch without renewing its lease."""
    windows: list[str] = []
    """Crontab expressions (UTC) of the minutes sluice may feed batches in
    (``"* 22-23,0-5 * * *"``); empty: always."""
    # What the tables: sources found in their databases (config.tables), and
    # the sources each of them became; set by the loader, not the YAML.
    _tables: TableCatalog = PrivateAttr(default_factory=TableCatalog)
    _groups: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    @property
    def endpoint(self) -> HttpConfig | None:
        """Where the daemon serves its page, metrics and record lookups: ``http``, or the
        old ``metrics_port`` (loopback, no token); None: nothing is served."""
        if self.http is not None or self.metrics_port is None:
            return self.http
        return HttpConfig(port=self.metrics_port)

    @model_validator(mode="after")
    def _one_endpoint(self) -> SluiceConfig:
        if self.http is not None and self.metrics_port is not None:
            raise ValueError("metrics_port and http: both set; keep http: {port: N} alone "
                             "(metrics_port is its old name)")  # fmt: skip
        return self

    @property
    def table_catalog(self) -> TableCatalog:
        """What the ``tables:`` sources found at load time (empty without them)."""
        return self._tables

    @property
    def groups(self) -> dict[str, list[str]]:
        """Each ``tables:`` source's name → the names of the sources it became."""
        return self._groups

    @property
    def waits(self) -> dict[str, list[str]]:
        """Each source that has ``depends_on`` → the sources it waits for."""
        return {
            name: list(src.depends_on)
            for name, src in self.sources.items()
            if src.kind == "sql" and src.depends_on
        }

    def with_tables(self, catalog: TableCatalog, groups: dict[str, list[str]]) -> SluiceConfig:
        """This config, remembering what its ``tables:`` sources expanded into."""
        self._tables, self._groups = catalog, groups
        for group, members in groups.items():
            for member in members:
                src = self.sources.get(member)
                if isinstance(src, SqlSourceConfig):
                    src.in_group(group)
        return self

    @model_validator(mode="before")
    @classmethod
    def _sizes_follow_the_batch(cls, data: Any) -> Any:
        """Fill in the buffer and backpressure sizes the user left out, from the batch size.

        Fixed numbers would cap a larger ``batch.max_items`` (a 20,000-row
        buffer cannot hold a batch of 100,000) or leave no room for a second
        batch in flight; see :func:`derived_sizes`. Values given are kept.
        """
        return with_derived_sizes(data)

    @field_validator("windows")
    @classmethod
    def _windows_are_crontabs(cls, value: list[str]) -> list[str]:
        # Imported here: APScheduler is not shipped to Spark executors, which
        # import these models too (sinks/pyfiles.py).
        from config.windows import parse_window

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
        names = ", ".join(sorted(self.sources))
        parents: dict[str, list[str]] = {}
        for name, source in self.sources.items():
            for i, parent in enumerate(getattr(source, "depends_on", [])):
                if parent not in self.sources or parent == name:
                    problem(("sources", name, "depends_on", i), parent,
                            f"depends_on names {parent!r}, which is not another source "
                            f"(sources: {names})")  # fmt: skip
                else:
                    parents.setdefault(name, []).append(parent)
        cycle = find_cycle(parents)
        if cycle:
            problem(("sources", cycle[0], "depends_on"), cycle,
                    "sources wait for each other in a cycle: " + " -> ".join([*cycle, cycle[0]])
                    + "; remove one of these from depends_on (for a tables: source, "
                    "depends_on: [] under its override)")  # fmt: skip
        if self.strategy is not None:
            sources = names
            for loc, name in strategy_refs(self.strategy):
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

        def sqlite_url(url: str) -> str:
            return sqlite_url_at(url, base_dir)

        sources = {
            name: src.model_copy(update={"url": sqlite_url(src.url)}) if src.kind == "sql" else src
            for name, src in self.sources.items()
        }
        targets = {name: tgt.at(base_dir) for name, tgt in self.targets.items()}
        return self.model_copy(
            update={
                "ledger": sqlite_url(self.ledger),
                "work_dir": path_at(self.work_dir, base_dir),
                "http": None if self.http is None else self.http.at(base_dir),
                "sources": sources,
                "targets": targets,
            }
        )


def editor_schema() -> dict[str, Any]:
    """The config's JSON Schema, for editors (``sluice schema``), with a SQL source's
    ``tables:``, ``overrides:`` and ``order:``, which exist only before expansion: a
    source names ``table:`` and ``key:``, or ``tables:`` (keys from the database)."""
    schema = SluiceConfig.model_json_schema()
    sql = schema["$defs"]["SqlSourceConfig"]
    sql["properties"].update({
        "tables": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                   "description": 'Table patterns: globs, "!" excludes ("public.*").'},
        "overrides": {"type": "object", "additionalProperties": {"type": "object"},
                      "description": "Per table: key, where, columns, mode, cursor, …"},
        "order": {"enum": list(ORDERS), "description": "foreign_keys: parents first."},
    })  # fmt: skip
    sql["required"] = [n for n in sql["required"] if n not in ("table", "key")]
    sql["oneOf"] = [{"required": ["table", "key"]}, {"required": ["tables"]}]
    return schema
