"""The ``sources:`` section: SQL tables and SQS queues, with their buffers and limits."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from config.base import Bytes, DatabaseUrl, Duration, Model


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


DATABASE_CONNECTIONS = 10
"""``limits.max_connections`` when unset: the connections sluice opens to one source
database in all (key queries and the import jobs' reads), shared by every source of
that URL, such as the tables of a ``tables:`` source. A stock server allows 100
(PostgreSQL) or 151 (MariaDB): this leaves the application most of them."""


QUERY_TIMEOUT = 600.0
"""``limits.query_timeout`` when unset: seconds (a key query of a table of billions of rows
with a ``where:`` no index serves takes minutes; one that waits longer waits on a lock)."""


class LimitsConfig(Model):
    """What sluice may ask of a source database (every source of its URL shares it)."""

    max_connections: int = Field(default=DATABASE_CONNECTIONS, gt=0)
    max_rows_per_s: float | None = Field(default=None, gt=0)
    # Key queries slower than this halve the rate (AIMD); None: no feedback.
    max_query_latency: Duration | None = None
    # A query of sluice's own (a key query, a check, a count; not a batch's read) running
    # longer is cancelled by the database and tried again with backoff: one waiting on a
    # lock is shown, not waited for in silence. The least of a database's sources holds,
    # read at start (a reload leaves it); None: no limit. PostgreSQL's statement_timeout
    # (unless the URL's options set one), MariaDB's max_statement_time, MySQL's
    # max_execution_time.
    query_timeout: Duration | None = Field(default=QUERY_TIMEOUT, gt=0)


class ReadConfig(Model):
    """How the Spark import job reads a SQL source."""

    num_partitions: int = Field(default=2, gt=0)
    fetchsize: int = Field(default=10000, gt=0)


class StreamConfig(Model):
    """A ``mode: stream`` source's change stream: PostgreSQL's publication and logical slot
    (sluice makes ``sluice_<source>`` of each unless named here; named ones must exist and
    are never dropped), and the WAL the slot may keep on the server before sluice warns."""

    publication: str | None = None
    slot: str | None = None
    max_retained_wal: Bytes = 10 * 2**30


class SchemaObjectsConfig(Model):
    """What a target table sluice creates gets of its source table's schema objects (its
    indexes, constraints, defaults, sequences and identity, triggers and comments), and
    what ``sluice cutover`` requires of any target table before it says READY.

    ``skip``: objects left out, by name (globs; in a ``tables:`` group also
    ``TABLE.NAME``; a column's default, identity or on-update attribute by its
    column's name), listed by ``sluice plan`` and the cutover. ``define``: an
    object's definition in the target's SQL where sluice has no translation
    (``{customers_email_check: "CHECK (email LIKE '%@%')"}``). ``build: false``:
    columns and key only, every other object skipped.
    """

    build: bool = True
    skip: list[str] = []
    define: dict[str, str] = {}


class SqlSourceConfig(Model):
    """A table (or schema.table) in a SQL database reached by SQLAlchemy."""

    kind: Literal["sql"]
    url: DatabaseUrl
    table: str
    key: str | list[str]
    mode: Literal["keyset", "sweep", "incremental", "stream"] = "keyset"
    where: str | None = None
    cursor: str | None = None
    # Incremental: a restart resumes at the checkpoint written this long
    # before (source transactions that commit late are read again).
    checkpoint_lag: Duration = 60.0
    sweep_pause: Duration = 30.0
    # mode stream: the change stream's publication, slot and WAL limit.
    stream: StreamConfig | None = None
    page_size: int = Field(default=10000, gt=0)
    buffer: BufferConfig = BufferConfig()
    limits: LimitsConfig = LimitsConfig()
    read: ReadConfig = ReadConfig()
    columns: dict[str, str] | None = None
    # Per column, the type a target table sluice creates gives it, instead of the
    # catalogue's mapping ({amount: "numeric(20,4)"}); a type its values cannot all be
    # is refused by plan and by the batch's first attempt.
    cast: dict[str, str] | None = None
    # MySQL's zero dates (0000-00-00) in another engine: null (left out) makes them NULL,
    # counted; reject sets their rows aside as rejects.
    zero_dates: Literal["reject"] | None = None
    target: str
    # Sources whose first pass must be done before this one is fed (a
    # table's foreign-key parents: ``order: foreign_keys`` fills it in).
    depends_on: list[str] = []
    # The source table's indexes, constraints, defaults… in the target (``schema:`` in YAML:
    # a field of that name would hide pydantic's own).
    objects: SchemaObjectsConfig = Field(default=SchemaObjectsConfig(), alias="schema")

    @field_validator("cast")
    @classmethod
    def _cast_names_types(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for column, type_sql in (value or {}).items():
            if not type_sql.strip() or ";" in type_sql:
                raise ValueError(f"cast: {column}: {type_sql!r} is not a column type")
        return value

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
        if self.mode != "incremental" and "checkpoint_lag" in self.model_fields_set:
            raise ValueError(f"checkpoint_lag: is only used by mode incremental, not {self.mode}")
        if self.mode != "stream" and self.stream is not None:
            raise ValueError(f"stream: is only used by mode stream, not {self.mode}")
        if self.mode == "stream":
            self._check_stream()
        return self

    def _check_stream(self) -> None:
        """What a change stream cannot do (yet), refused when the config loads."""
        if not self.url.startswith(("postgresql", "mysql", "mariadb")):
            raise ValueError("mode stream reads PostgreSQL's logical replication or MariaDB's "
                             f"binary log; {self.url.split(':', 1)[0]} sources take keyset, "
                             "sweep or incremental")  # fmt: skip
        if self.where is not None:
            raise ValueError("mode stream moves every row of the table: where: cannot be used")
        if self.columns:
            raise ValueError("mode stream writes the table's columns as they are: "
                             "columns: cannot be used")  # fmt: skip
        named = self.stream or StreamConfig()
        if (named.publication is None) != (named.slot is None):
            raise ValueError("stream: name both publication and slot, or neither "
                             "(sluice then makes its own)")  # fmt: skip

    # The tables: entry this source was made from; set by the loader, not the YAML.
    _group: str | None = PrivateAttr(default=None)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The key as a tuple of column names (one for a simple key)."""
        return (self.key,) if isinstance(self.key, str) else tuple(self.key)

    @property
    def group(self) -> str | None:
        """The ``tables:`` entry this source is one table of; None for a source written as
        itself."""
        return self._group

    def in_group(self, group: str) -> SqlSourceConfig:
        """This source, one table of the ``tables:`` entry ``group``."""
        self._group = group
        return self


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
    # Drained: no message received for this long (default visibility_timeout,
    # so that a killed daemon's invisible messages are back within it).
    drain_quiet: Duration | None = None
    max_receives: int = Field(default=5, gt=0)
    dead_letter_queue_url: str | None = None
    buffer: BufferConfig = BufferConfig(capacity=2000, replenish_below=500)
    columns: dict[str, str] | None = None
    # Per column, the type a target table sluice creates gives it, instead of the
    # catalogue's mapping ({amount: "numeric(20,4)"}); a type its values cannot all be
    # is refused by plan and by the batch's first attempt.
    cast: dict[str, str] | None = None
    # MySQL's zero dates (0000-00-00) in another engine: null (left out) makes them NULL,
    # counted; reject sets their rows aside as rejects.
    zero_dates: Literal["reject"] | None = None
    target: str


SourceConfig = Annotated[SqlSourceConfig | SqsSourceConfig, Field(discriminator="kind")]
"""One entry of ``sources:``, told apart by its ``kind``."""


def walks_ranges(source: object) -> bool:
    """Whether ``source`` (a source's config) is a keyset source: its batches are key ranges
    of rows, streamed, and its end is final."""
    return isinstance(source, SqlSourceConfig) and source.mode == "keyset"
