"""The ``targets:`` section: JDBC databases and Parquet folders, and target names."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from config.base import DatabaseUrl, Model, path_at, sqlite_url_at


class WriteConfig(Model):
    """How the Spark import job writes a JDBC target."""

    batchsize: int = Field(default=10000, gt=0)
    """Rows a Spark JDBC write sends a round trip (where the write goes through JDBC:
    SQLite, or MySQL without ``local_infile``)."""
    num_partitions: int = Field(default=2, gt=0)
    """Connections a Spark JDBC write uses at once (one for SQLite)."""


class JdbcTargetConfig(Model):
    """A database reached by Spark JDBC; tables are upserted on the key."""

    kind: Literal["jdbc"]
    """``jdbc``: a PostgreSQL, MySQL/MariaDB or SQLite database."""
    url: DatabaseUrl
    """The database, as a SQLAlchemy URL (``postgresql+psycopg://loader@dw/wh``)."""
    write: WriteConfig = WriteConfig()
    """How Spark's JDBC writer writes, where it is the one writing."""
    schema_jobs: int = Field(default=2, gt=0)
    """Connections building the tables' indexes and constraints at once after their load
    (pg_restore's and pgcopydb's ``--index-jobs``)."""

    def at(self, base_dir: Path) -> JdbcTargetConfig:
        """This target with a relative SQLite file resolved against ``base_dir``."""
        return self.model_copy(update={"url": sqlite_url_at(self.url, base_dir)})


class ParquetTargetConfig(Model):
    """A folder (local or any Hadoop path) of Parquet tables.

    ``partition_by``: columns whose values name the folders (Hive style,
    ``region=eu/``) each batch's files go into; empty: one file per batch.
    """

    kind: Literal["parquet"]
    """``parquet``: a folder of Parquet tables."""
    path: str
    """The folder (local, relative to the config file, or a Hadoop path); a table's files
    go under ``{path}/{table}/``."""
    partition_by: list[str] = []
    """Columns whose values name the folders each batch's files go into (``region=eu/``);
    empty: one file per batch."""

    def at(self, base_dir: Path) -> ParquetTargetConfig:
        """This target with a relative folder resolved against ``base_dir``."""
        return self.model_copy(update={"path": path_at(self.path, base_dir)})

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
"""One entry of ``targets:``, told apart by its ``kind``."""


def split_target(target: str) -> tuple[str, str | None, str]:
    """Split ``warehouse.orders`` / ``warehouse.sales.orders`` into (target, schema, table)."""
    parts = target.split(".")
    if len(parts) == 2:
        return parts[0], None, parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"target {target!r} must be TARGET.table or TARGET.schema.table")
