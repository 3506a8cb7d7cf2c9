"""The ``sources:`` section: SQL tables and SQS queues, with their buffers and limits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from config.base import Bytes, DatabaseUrl, Duration, Model, database_file


class BufferConfig(Model):
    """The in-memory buffer of one source (its QueueingLimitedSource)."""

    capacity: int = Field(default=20000, gt=0)
    """The most keys the buffer holds in memory (rows, for a keyset source's ranges). Left
    out, it follows the batch size: the batches in flight and two more for a keyset source,
    two batches for sweep and incremental, 2,000 messages for SQS."""
    replenish_below: int = Field(default=5000, ge=0)
    """A refill starts when the buffer falls to this many; below ``capacity``. Left out, it
    follows the batch size as ``capacity`` does."""

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
    """The connections sluice opens to the database in all: its key queries and the Spark
    read partitions of its batches, divided between the daemons on the ledger."""
    max_rows_per_s: float | None = Field(default=None, gt=0)
    """The most rows a second the database's batches are released to the import jobs (a
    token bucket, divided between the daemons); None: no limit."""
    max_query_latency: Duration | None = None
    """When sluice's key queries on the database get slower than this, its rate halves (at
    most once a second) and wins an eighth back each second they are fast; None: no
    feedback."""
    query_timeout: Duration | None = Field(default=QUERY_TIMEOUT, gt=0)
    """A query of sluice's own (a key query, a check, a count; not a batch's read) running
    longer is cancelled by the database and tried again with backoff: one waiting on a
    lock is shown, not waited for in silence. The least of a database's sources holds,
    read at start (a reload leaves it); None: no limit. PostgreSQL's statement_timeout
    (unless the URL's options set one), MariaDB's max_statement_time, MySQL's
    max_execution_time."""


class ReadConfig(Model):
    """How the Spark import job reads a SQL source."""

    num_partitions: int = Field(default=2, gt=0)
    """The Spark read partitions (connections) one batch of the source is read on, at most
    (``limits.max_connections`` may make them fewer)."""
    fetchsize: int = Field(default=10000, gt=0)
    """Rows a Spark JDBC read fetches a round trip (where the read goes through JDBC)."""


class StreamConfig(Model):
    """A ``mode: stream`` source's change stream: PostgreSQL's publication and logical slot
    (sluice makes ``sluice_<source>`` of each unless named here; named ones must exist and
    are never dropped), and the WAL the slot may keep on the server before sluice warns."""

    publication: str | None = None
    """An existing PostgreSQL publication to read (with ``slot``); None: sluice makes
    ``sluice_<source>`` and drops it at the cutover."""
    slot: str | None = None
    """An existing logical replication slot (pgoutput) to read (with ``publication``); None:
    sluice makes ``sluice_<source>``."""
    max_retained_wal: Bytes = 10 * 2**30
    """The log warns once when the slot keeps more WAL on the server than this
    (``10GiB``)."""


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
    """False: a table sluice creates gets its columns and key only."""
    skip: list[str] = []
    """Objects left out, by name (globs; ``TABLE.NAME`` in a ``tables:`` group; a column's
    default, identity or on-update by its column's name); listed by plan and cutover."""
    define: dict[str, str] = {}
    """Object name → its definition in the target's own SQL, built instead of a
    translation."""


class SqlSourceConfig(Model):
    """A table (or schema.table) in a SQL database reached by SQLAlchemy."""

    kind: Literal["sql"]
    """``sql``: a table of PostgreSQL, MySQL/MariaDB or SQLite."""
    url: DatabaseUrl
    """The database, as a SQLAlchemy URL (``postgresql+psycopg://app:${PGPASSWORD}@db/shop``,
    ``mysql+pymysql://…``, ``sqlite:///shop.db``); its password is never printed."""
    table: str
    """The table (or ``schema.table``); a ``tables:`` entry names many by pattern instead."""
    key: str | list[str]
    """The key column, or columns in key order: unique, and what batches, claims and upserts
    go by (a ``tables:`` entry takes each table's primary key)."""
    mode: Literal["keyset", "sweep", "incremental", "stream"] = "keyset"
    """How the table is read: ``keyset`` walks the key from the checkpoint; ``sweep`` re-runs
    ``where:`` and skips keys already migrated; ``incremental`` follows ``cursor:`` and
    migrates a row again when it moves; ``stream`` loads the table, then follows its change
    stream."""
    where: str | None = None
    """A SQL condition on the source's rows, pushed down into every read (not with
    ``mode: stream``)."""
    cursor: str | None = None
    """``mode: incremental``: the column that moves forward when a row changes
    (``updated_at``); rows with a NULL cursor are never read."""
    checkpoint_lag: Duration = 60.0
    """``mode: incremental``: a restart resumes at the checkpoint written this long before,
    so source transactions that commit with an older cursor value are read again."""
    sweep_pause: Duration = 30.0
    """How long a daemon waits, once the source found nothing new, before it asks the
    database again (a run ``--until-drained`` asks each second)."""
    stream: StreamConfig | None = None
    """``mode: stream``: the change stream's publication, slot and WAL warning."""
    page_size: int = Field(default=10000, gt=0)
    """Rows of one key query: the size of a keyset range (capped by the batch size; left
    out, 250,000 rows), a sweep's or incremental walk's page, a stream's load chunk (a
    range of a full load read in the slot's snapshot: left out, 200,000 rows, a batch
    each)."""
    buffer: BufferConfig = BufferConfig()
    """The source's in-memory buffer of keys."""
    limits: LimitsConfig = LimitsConfig()
    """What sluice may ask of the source's database, shared by every source of its URL."""
    read: ReadConfig = ReadConfig()
    """How the import jobs read the source's rows."""
    columns: dict[str, str] | None = None
    """The target's columns as Spark SQL expressions over the source's
    (``{total: "price * qty"}``); None keeps every column as it is (not with
    ``mode: stream``)."""
    cast: dict[str, str] | None = None
    """Per column, the type a target table sluice creates gives it, instead of the
    catalogue's mapping (``{amount: "numeric(20,4)"}``; ``enum`` on a MySQL enum bound for
    PostgreSQL creates an enum type of its labels); a type its values cannot all be is
    refused by plan and by the batch's first attempt."""
    zero_dates: Literal["reject"] | None = None
    """MySQL's zero dates (0000-00-00) in another engine: null (left out) makes them NULL,
    counted; ``reject`` sets their rows aside as rejects."""
    target: str
    """Where the rows go: ``TARGET.table`` or ``TARGET.schema.table``, with TARGET a name
    under ``targets:`` (a ``tables:`` entry names the target alone)."""
    depends_on: list[str] = []
    """Sources whose first pass must be done (in the ledger) before this one is fed: a
    table's foreign-key parents (``order: foreign_keys`` fills it in)."""
    # ``schema:`` in YAML: a field of that name would hide pydantic's own.
    objects: SchemaObjectsConfig = Field(default=SchemaObjectsConfig(), alias="schema")
    """The source table's indexes, constraints, defaults… in a target table: what is
    skipped or defined by hand, or ``build: false``."""

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
        """What a change stream cannot do (yet), refused when the config loads.

        A database in a file has no change stream; a server's engine without one sluice
        reads is refused when the source opens (:func:`sources.stream.backend_of`).
        """
        if database_file(self.url, Path.cwd()) is not None:
            raise ValueError(no_stream(self.url))
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


def no_stream(url: str) -> str:
    """Why a source of the database at ``url`` cannot take ``mode: stream``."""
    return ("mode stream reads PostgreSQL's logical replication or MariaDB's binary log; "
            f"{url.split(':', 1)[0]} sources take keyset, sweep or incremental")  # fmt: skip


class SqsSourceConfig(Model):
    """An SQS queue whose messages are JSON objects carrying a key field."""

    kind: Literal["sqs"]
    """``sqs``: an SQS queue of JSON messages."""
    queue_url: str
    """The queue's URL."""
    endpoint_url: str | None = None
    """Another SQS endpoint (a local one for tests); None: AWS's for ``region``."""
    region: str = "us-east-1"
    """The queue's AWS region."""
    access_key_id: SecretStr | None = None
    """AWS credentials (``${AWS_ACCESS_KEY_ID}``); None: boto3's standard chain
    (environment, profile; instance metadata is not asked)."""
    secret_access_key: SecretStr | None = None
    """The secret of ``access_key_id``; never printed."""
    key: str = "id"
    """The field of the JSON message body that holds the record's key (``a.b`` reaches into
    nested objects); the target's key column is its last part."""
    wait_time: Duration = 20.0
    """The longest one receive waits for messages (SQS's long poll, at most 20 s)."""
    visibility_timeout: Duration = 60.0
    """How long a received message stays hidden from other consumers; sluice extends it
    while the message's batch is in flight."""
    drain_quiet: Duration | None = None
    """``--until-drained``: the queue is drained when no message came for this long and none
    of ours is in flight; None: ``visibility_timeout`` (a killed daemon's messages are back
    by then)."""
    max_receives: int = Field(default=5, gt=0)
    """A message received more often than this is poison: set aside with the reason and
    deleted from the queue, so that it blocks no other."""
    dead_letter_queue_url: str | None = None
    """Where poison messages are sent; None: they are recorded in the ledger (``sluice
    status`` lists them)."""
    buffer: BufferConfig = BufferConfig(capacity=2000, replenish_below=500)
    """The source's in-memory buffer of messages."""
    columns: dict[str, str] | None = None
    """The target's columns as Spark SQL expressions over the message's fields; None keeps
    every field."""
    cast: dict[str, str] | None = None
    """Accepted as on a SQL source, but an SQS source's batches do not apply it yet: a
    created table's columns follow the fields' Spark types."""
    zero_dates: Literal["reject"] | None = None
    """Accepted as on a SQL source; messages hold no MySQL zero dates, so it changes
    nothing."""
    target: str
    """Where the messages go: ``TARGET.table`` or ``TARGET.schema.table``."""


SourceConfig = Annotated[SqlSourceConfig | SqsSourceConfig, Field(discriminator="kind")]
"""One entry of ``sources:``, told apart by its ``kind``."""


def walks_ranges(source: object) -> bool:
    """Whether ``source`` (a source's config) is a keyset source: its batches are key ranges
    of rows, streamed, and its end is final."""
    return isinstance(source, SqlSourceConfig) and source.mode == "keyset"
