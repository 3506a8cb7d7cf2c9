"""What the wings above the engines ask of an engine beyond its types: how sluice connects
to a database of it, loads a batch into it, reads it and sums it (``sluice verify``).

Each is an attribute or a method with the default most engines share, which an
engine's class (:class:`~spark_jobs.engines.base.Engine`'s subclasses) overrides
where it differs, so that no module outside the engines wing asks for an engine by
its name (``tests/test_engine_names.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from spark_jobs.engines.bulk import BulkLoad
from spark_jobs.engines.sessions import Sessions


class Traits(Sessions):
    """An engine's answers to the data plane's questions (see the module), and to those of
    sluice's own sessions on its databases (:class:`~spark_jobs.engines.sessions.Sessions`)."""

    label: str

    # -- its connections (spark_jobs/common/jdbc.py) -----------------------------------------

    file_database = False
    """Whether a database of it is a file the process opens (SQLite): reached by its path,
    over JDBC too, and by SQLAlchemy without a pool of connections to bound."""

    jdbc_driver = ""
    """The JDBC driver class Spark reaches it with."""

    jdbc_port: int | None = None
    """The port a JDBC URL names when the SQLAlchemy URL names none."""

    jdbc_url_options = ""
    """What every JDBC URL of it ends with (options its driver reads only there)."""

    jdbc_read_options = ""
    """What a JDBC URL of Spark's reads adds (options its driver reads only there)."""

    jdbc_url_properties: tuple[str, ...] = ()
    """Options of a SQLAlchemy URL's query passed on to JDBC as connection properties."""

    bounded_keys = False
    """Whether a key column of text or bytes a table is created with needs a bounded type
    (MySQL indexes no TEXT or BLOB without a prefix length)."""

    def connect_args(self, url: Any) -> dict[str, Any]:
        """What a SQLAlchemy engine of the SQLAlchemy ``url`` connects with, beyond it."""
        return {}

    # -- a target's loads (spark_jobs/load/, spark_jobs/changes/) -----------------------------

    tables_made_in_transaction = False
    """Whether a table sluice creates is made in the transaction that records it in
    ``_sluice_tables`` and builds its early objects (PostgreSQL, whose DDL is
    transactional); else recorded just before, in a transaction of its own."""

    staging_prefixes: tuple[str, ...] = ()
    """What a staging table's ``CREATE`` says before ``TABLE`` (PostgreSQL: ``UNLOGGED``)."""

    one_writer = False
    """Whether the database takes one writer at a time (SQLite): parallel inserts would
    only wait on each other's lock."""

    jdbc_write_options: tuple[tuple[str, str], ...] = ()
    """Spark JDBC writer options a staging table is filled with (pgjdbc's batched inserts)."""

    keeps_nan = True
    """Whether a floating-point column keeps NaN (SQLite stores NULL: such rows are refused)."""

    floats_staged_as_text = False
    """Whether a batch's floating-point values are staged as text (MySQL has no NaN and no
    infinities, SQLite makes NULL of them: as text, a row holding one is set aside alone,
    with the column named)."""

    decimals_staged_as_text = False
    """Whether a batch's decimals are staged as text (SQLite's driver binds a decimal as a
    double: 2^64 - 1 becomes 1.8e19, 0.10 becomes 0.1; a TEXT column keeps the text)."""

    named_enums = False
    """Whether the engine has named enum types (``cast: {column: enum}`` makes one)."""

    spark_types_mapped = True
    """Whether a column known only by its Spark type (a ``columns:`` expression, an SQS
    field) is created in :meth:`spark_type`'s type (not SQLite's: the staging type)."""

    booleans_are_numbers = True
    """Whether a boolean column is a number column (MySQL's BOOL is a TINYINT, SQLite has
    no booleans), so that a number fits one and a boolean fits the other."""

    integer_bits: int | None = None
    """The bits every integer column holds whatever its declared type (SQLite: 64); None:
    its type says."""

    applies_change_streams = False
    """Whether a change stream's batches go into a table of it (PostgreSQL, for now)."""

    shares_snapshots = False
    """Whether another session may read in a snapshot one exported (PostgreSQL's ``SET
    TRANSACTION SNAPSHOT``): a stream's full-load ranges are then read in its slot's, each
    by its importer's COPY; else each as the table is when read
    (:mod:`spark_jobs.changes.load_ranges`)."""

    @contextmanager
    def lock_wait(self, conn: Any, seconds: int) -> Iterator[None]:
        """On ``conn``'s transaction: wait at most ``seconds`` for a lock another holds (a
        stuck importer's) while the body runs; where the engine can bound it."""
        yield

    def build_settings(self, memory: str) -> tuple[str, ...]:
        """The statements a schema build's transaction starts with (``memory``: what an
        index build may sort in); none by default."""
        return ()

    def compared_number_type(self, floating: bool) -> str:
        """The SQL type a number staged as text is compared in (``floating``: a float's)."""
        return "DOUBLE" if floating else "DECIMAL(65,30)"

    plain_insert_first = False
    """Whether a staged batch is first inserted plainly, upserted only where a key of it is
    there already (PostgreSQL: twice as fast as ``ON CONFLICT``'s speculative insertion)."""

    upsert_counts_rows = False
    """Whether an upsert's row count is the rows it wrote (PostgreSQL's ``ON CONFLICT DO
    UPDATE``; MySQL counts an update twice, and ``DO NOTHING`` skips rows there)."""

    def bulk_load(self, engine: Any) -> BulkLoad | None:
        """The bulk path a batch's rows take into a table of the SQLAlchemy ``engine``'s
        database, as its driver allows; None: Spark's JDBC writer writes them."""
        return None

    def take_row(
        self, conn: Any, table: Any, values: dict[str, Any], key: str, unchanged: str,
        returned: Sequence[str],
    ) -> Any:  # fmt: skip
        """On ``conn``'s transaction: insert ``values`` into ``table`` unless a row of their
        ``key`` is there, and hold that row until the transaction ends (``unchanged``: a
        column a no-op update sets to itself, where that takes the lock); its ``returned``
        columns. A second taker of the row waits until the first's transaction ends."""
        raise NotImplementedError(f"{self.label} keeps no tables of sluice's")

    def upsert_rows(
        self, table: Any, names: Sequence[str], rows: Any, key: Sequence[str],
        updates: Sequence[str], cursor: str | None, overriding: bool = False,
    ) -> Any:  # fmt: skip
        """``INSERT INTO table (names) rows`` updating the ``updates`` of a row whose ``key``
        is there (:mod:`~spark_jobs.engines.upserts`; ``cursor``: unless the row there is
        newer; ``overriding``: into identity columns the table generates always)."""
        raise NotImplementedError(f"{self.label} upserts no rows of sluice's")

    def insert_ignoring(self, table: Any) -> Any:
        """An INSERT into SQLAlchemy ``table`` that skips a row whose key is there already."""
        raise NotImplementedError(f"{self.label} keeps no tables of sluice's")

    # -- reads and sums (spark_jobs/read/, spark_jobs/verify/sums.py) -------------------------

    def jdbc_read_type(self, column_type: Any, stored: bool = False) -> str | None:
        """The Spark type (``customSchema``) that Spark's JDBC reader must read a column of
        SQLAlchemy type ``column_type`` in (``stored``: as the value is stored), where its
        driver declares it wrong, in a table outside the catalogue; None: as declared."""
        return None

    row_values_indexed = True
    """Whether ``(a, b) > (x, y)`` is answered from the key's index (PostgreSQL's and
    SQLite's row values are; MySQL's are not: the order is spelled out there)."""

    native_reads_in_pieces = False
    """Whether a native read takes a batch's range in consecutive pieces, a query each, one
    after the other (ConnectorX reads a query's rows ahead of a slower writer unbounded)."""

    def reads_natively(self, as_text: bool = False) -> bool:
        """Whether a table of this engine is read natively, in Spark tasks and by a load's
        own task (``as_text``: verify's reads); by Spark's JDBC reader otherwise."""
        return False

    def native_queries(
        self, url: str, table_sql: str, columns: Sequence[Any], reads: Sequence[str],
        names: Sequence[str], schema: Any, where: Sequence[str | tuple[str, ...]],
        as_text: bool, finish: tuple[str, str] | None,
    ) -> Any:  # fmt: skip
        """What a native read (:meth:`reads_natively`) of ``columns`` of ``table_sql`` at
        ``url`` runs: each column read by its SQL of ``reads`` as its quoted name of
        ``names`` (``as_text``: as the server prints it) into the Arrow ``schema``, a Spark
        task per condition of ``where``; ``finish``: the ``(target, zero_dates)`` of a
        load's own task. Its queries' ``rows`` read in a Spark task."""
        raise NotImplementedError(f"{self.label} is read by Spark's JDBC reader")

    hashes_records = False
    """Whether two tables of this engine are summed by the server's hashes of their record
    texts (``sluice verify``), not of verify's neutral text of each value."""

    def record_sums_sql(self, table_sql: str, values: Sequence[str], where: str) -> str:
        """The sums query of a table whose records are hashed (:attr:`hashes_records`)."""
        raise NotImplementedError(f"{self.label} does not hash its records")

    def table_sums(self, url: str, query: str, connect: Callable[[str], Any]) -> Any:
        """Run a sums query on the database at ``url`` (``connect``: the SQLAlchemy engine
        of a URL, where the engine's own driver does not connect), on a connection of its
        own, closed after; its :class:`~spark_jobs.engines.postgresql.sums.Sums`."""
        raise NotImplementedError(f"{self.label} counts no sums of sluice's")

    def estimated_rows(self, conn: Any, table: str) -> float | None:
        """The rows the server's statistics estimate ``table`` (``schema.table``) holds;
        None when they have no estimate."""
        raise NotImplementedError(f"{self.label} estimates no rows for sluice")
