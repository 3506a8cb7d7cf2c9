"""JDBC endpoints derived from the SQLAlchemy URLs of the config.

The config names every database once, as a SQLAlchemy URL; Spark needs a JDBC
URL, a driver class and connection properties. Credentials travel only in the
properties, so the JDBC URL can be logged and shown in the Spark UI.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast

import sqlalchemy as sa
from cachetools import LRUCache
from pyspark.sql import types as T
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import NullPool

from config.errors import ConfigError, TargetError
from config.sqlite import sqlite_engine
from spark_jobs.engines import dialect_engine
from spark_jobs.engines.connections import bound_connections

JdbcDialect = Literal["postgresql", "mysql", "sqlite"]


def dialect_name(url: str | sa.URL) -> JdbcDialect:
    """The database family of a SQLAlchemy URL (``postgresql``, ``mysql``, ``sqlite``)."""
    backend = sa.make_url(url).get_backend_name()
    try:
        return cast(JdbcDialect, dialect_engine(backend).name)
    except ConfigError:
        raise ConfigError(
            f"database {backend!r} is not supported by the Spark import job "
            "(use postgresql+…://, mysql+…://, mariadb+…:// or sqlite:///)"
        ) from None


@dataclass(frozen=True)
class JdbcEndpoint:
    """How Spark reaches one database: JDBC URL, driver class and properties.

    ``properties`` holds ``user`` and ``password`` (never the URL, which may
    carry driver options only); ``repr`` masks the password.
    """

    url: str
    driver: str
    dialect: JdbcDialect
    properties: Mapping[str, str] = field(default_factory=dict)
    sqlalchemy_url: sa.URL | None = field(default=None, compare=False)

    @classmethod
    def from_url(cls, url: str | sa.URL) -> JdbcEndpoint:
        """Derive the JDBC endpoint (URL, driver, properties) from a SQLAlchemy URL."""
        parsed = sa.make_url(url)
        dialect = dialect_name(parsed)
        engine = dialect_engine(dialect)
        props: dict[str, str] = {}
        if engine.file_database:
            if not parsed.database or parsed.database == ":memory:":
                raise ConfigError(f"{parsed!r}: Spark needs an SQLite file, not :memory:")
            jdbc_url = f"jdbc:sqlite:{parsed.database}"
        else:
            if not parsed.database:
                raise ConfigError(f"{parsed!r}: the URL names no database")
            host = parsed.host or "localhost"
            if host.startswith("/"):
                raise ConfigError(f"{parsed!r}: JDBC cannot use a Unix socket; give a host")
            port = parsed.port or engine.jdbc_port
            jdbc_url = f"jdbc:{dialect}://{host}:{port}/{parsed.database}"
            jdbc_url += engine.jdbc_url_options
            if parsed.username:
                props["user"] = parsed.username
            if parsed.password is not None:
                props["password"] = str(parsed.password)
            for name in engine.jdbc_url_properties:
                value = parsed.query.get(name)
                if isinstance(value, str):
                    props[name] = value
        return cls(
            url=jdbc_url,
            driver=engine.jdbc_driver,
            dialect=dialect,
            properties=MappingProxyType(props),
            sqlalchemy_url=parsed,
        )

    @property
    def read_url(self) -> str:
        """The JDBC URL for Spark's reads: :attr:`url` with the dialect's read options."""
        option = dialect_engine(self.dialect).jdbc_read_options
        if not option:
            return self.url
        return f"{self.url}{'&' if '?' in self.url else '?'}{option}"

    def connection_properties(self, **extra: str) -> dict[str, str]:
        """Properties for ``spark.read.jdbc``/``DataFrame.write.jdbc``, driver included."""
        return {**self.properties, "driver": self.driver, **extra}

    def sql_dialect(self) -> Dialect:
        """The SQLAlchemy dialect to render SQL that Spark sends over JDBC.

        ``named`` paramstyle, because the DBAPI drivers' ``pyformat`` makes
        SQLAlchemy double every ``%`` — right for psycopg, wrong over JDBC.
        """
        if self.sqlalchemy_url is None:
            raise ConfigError(f"{self!r} was not built from a SQLAlchemy URL")
        dialect_class: Any = self.sqlalchemy_url.get_dialect()
        return dialect_class(paramstyle="named")

    def __repr__(self) -> str:
        shown = {k: ("***" if k == "password" else v) for k, v in self.properties.items()}
        return f"JdbcEndpoint(url={self.url!r}, driver={self.driver!r}, properties={shown!r})"

    __str__ = __repr__


_MAX_ENGINES = 8
"""Server databases whose connections stay pooled at once (the least used is closed)."""


class _EngineCache(LRUCache[str, sa.Engine]):
    """The engines by URL; the least recently used one is disposed when a new one comes."""

    def popitem(self) -> tuple[str, sa.Engine]:
        url, engine = super().popitem()
        engine.dispose()  # closes its idle connections; busy ones close when returned
        return url, engine


_ENGINES = _EngineCache(maxsize=_MAX_ENGINES)
_ENGINES_LOCK = threading.Lock()


def sql_engine(url: str) -> sa.Engine:
    """The SQLAlchemy engine for the import jobs' driver-side work on ``url``.

    One per database per process, with a small pool: a batch opens a dozen
    short transactions (checks, staging, the commit), and a new PostgreSQL
    connection each time cost ~60 ms per batch. Idle connections stay few:
    2 per database, for at most 8 databases; each is pinged before reuse.
    Callers must not ``dispose()`` it. SQLite engines are not pooled (opening
    a file is cheap) and open transactions with ``BEGIN IMMEDIATE``: it takes
    the write lock up front, SQLite's stand-in for ``SELECT … FOR UPDATE``.
    """
    if dialect_engine(dialect_name(url)).file_database:
        return _sqlite_engine(url)
    bound_connections()  # a load task's process (an executor's too) bounds its connections
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            engine = _ENGINES[url] = sa.create_engine(
                url, pool_size=2, max_overflow=8, pool_pre_ping=True, pool_recycle=600,
                connect_args=_connect_args(url),
            )  # fmt: skip
        return engine


_LOOKERS: LRUCache[str, sa.Engine] = LRUCache(maxsize=64)


def looker_engine(url: str) -> sa.Engine:
    """An engine for catalog look-ups on ``url`` that keeps no connection open.

    Each connection is closed when returned, so that none is held idle
    against the database's connection budget; the engine itself is kept
    per URL, as a new one asks the server for its version and settings on
    its first connection (a tenth of a small batch's import).
    """
    bound_connections()
    with _ENGINES_LOCK:
        engine = _LOOKERS.get(url)
        if engine is None:
            engine = _LOOKERS[url] = sa.create_engine(url, poolclass=NullPool)
        return engine


def _connect_args(url: str) -> dict[str, Any]:
    """What the engine of ``url`` connects with beyond the URL (PyMySQL's ``LOAD DATA
    LOCAL``: :meth:`spark_jobs.engines.mysql.MySQL.connect_args`)."""
    parsed = sa.make_url(url)
    return dialect_engine(dialect_name(parsed)).connect_args(parsed)


def _sqlite_engine(url: str) -> sa.Engine:
    # Every transaction on a target may write: BEGIN IMMEDIATE takes the lock up front.
    return sqlite_engine(url, poolclass=NullPool)


def sql_column_type(
    data_type: T.DataType, dialect: JdbcDialect, key: bool = False, name: str = "?"
) -> sa.types.TypeEngine[Any]:
    """The SQL type a target column gets for a Spark column type.

    Text and binary key columns get a bounded type on MySQL, which cannot
    index TEXT/BLOB without a prefix length. Timestamps keep their kind:
    ``timestamp_ntz`` (DATETIME, PostgreSQL ``timestamp``) stays without a
    time zone, ``timestamp`` becomes ``timestamptz`` on PostgreSQL. ``void``
    (a column null in the whole batch) becomes text.
    """
    bounded = key and dialect_engine(dialect).bounded_keys
    if isinstance(data_type, T.NullType):
        # Null in the whole batch (an SQS field no message of it carries). An
        # existing column keeps its own type (see prepare_target); a table
        # created now gets TEXT, as no value says what the column should be
        # and text is the one type every JSON value has a form in. A later
        # batch carrying numbers there is then refused, naming the column.
        return sa.String(255) if bounded else sa.Text()
    if isinstance(data_type, T.BooleanType):
        return sa.Boolean()
    if isinstance(data_type, T.ByteType):
        return sa.SmallInteger().with_variant(mysql.TINYINT(), "mysql", "mariadb")
    if isinstance(data_type, T.ShortType):
        return sa.SmallInteger()
    if isinstance(data_type, T.IntegerType):
        return sa.Integer()
    if isinstance(data_type, T.LongType):
        return sa.BigInteger()
    if isinstance(data_type, T.FloatType):
        return sa.REAL()
    if isinstance(data_type, T.DoubleType):
        return sa.Double()
    if isinstance(data_type, T.DecimalType):
        return sa.Numeric(data_type.precision, data_type.scale)
    if isinstance(data_type, T.StringType | T.VarcharType | T.CharType):
        return sa.String(255) if bounded else sa.Text()
    if isinstance(data_type, T.BinaryType):
        return sa.VARBINARY(255) if bounded else sa.LargeBinary()
    if isinstance(data_type, T.DateType):
        return sa.Date()
    if isinstance(data_type, T.TimestampNTZType | T.TimestampType):
        # MySQL's DATETIME keeps whole seconds unless asked for microseconds.
        tz = isinstance(data_type, T.TimestampType)
        return sa.DateTime(timezone=tz).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    raise TargetError(
        f"column {name!r} has Spark type {data_type.simpleString()}, which sluice cannot "
        "create in a SQL table; convert it with columns: (for example to_json(...))"
    )
