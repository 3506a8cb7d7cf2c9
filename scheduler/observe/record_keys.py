"""A record's key as an operator types it, read the way its source keys records.

- A SQL source's key is one value per key column, in key order, parsed by
  the column's type as the database reflects it: integers, decimals (to the
  column's scale), floats, booleans, dates and times (ISO 8601), UUIDs, bytes
  (hex); text as it is. Sweep and incremental batches hold keys as the
  source's rows gave them (``sluice_keys``): the typed value first, and, if
  the ledger has no such key, the row's own values read back from the source
  (a SQLite timestamp stored as text, a case-insensitive match).
- A keyset batch holds a range: whether a key is at or below a range's end
  is asked in the source's own order. Numbers, times, UUIDs and bytes sort
  alike in Python and in every database; text sorts by the column's
  collation ('a' before 'B'), so a key with a text column is compared by the
  source database, with that collation.
- An SQS key is the key field's value: a JSON number if the text reads as
  one (as ``{"id": 42}`` was queued), the text otherwise (``{"id": "42"}``);
  ``"42"`` with the quotes means the text only.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from config.errors import ConfigError, SourceError
from config.models import SqlSourceConfig
from config.secrets import redact_url
from spark_jobs.engines import dialect_traits

_ORDERED_ALIKE = (bool, int, float, decimal.Decimal, dt.date, dt.time, dt.timedelta, uuid.UUID,
                  bytes)  # fmt: skip
"""Python types whose order is every database's order (text's is its collation's)."""
_TRUE, _FALSE = ("true", "t", "yes", "y", "1"), ("false", "f", "no", "n", "0")


@dataclass(frozen=True)
class KeyColumn:
    """A key column: its name, its type as reflected, and (text) the collation it sorts by."""

    name: str
    sql_type: sa.types.TypeEngine[Any]
    collation: str | None = None  # None: the database's default, which a bound value has too
    shown: str = ""  # the type as the database names it, for messages

    @property
    def python_type(self) -> type | None:
        """The Python type of its values; None when the dialect does not say."""
        try:
            return self.sql_type.python_type
        except NotImplementedError:
            return None


class SqlKey:
    """The key of one SQL source's table, its column types read once from the database.

    Reading the types, and every comparison or look-up in the source, blocks
    on the source database; a database error is a :class:`SourceError`, a
    missing table or column a :class:`ConfigError`, each naming the source.
    """

    def __init__(self, name: str, cfg: SqlSourceConfig, engine: sa.Engine) -> None:
        self.name = name
        self.cfg = cfg
        self.engine = engine
        self.columns = self._guard("cannot read the key's column types", self._reflect)

    def parse(self, texts: Sequence[str]) -> list[Any]:
        """One typed value per key column; a :class:`ConfigError` names what does not fit."""
        names = ", ".join(c.name for c in self.columns)
        if len(texts) != len(self.columns):
            raise ConfigError(
                f"source {self.name} has a key of {len(self.columns)} column(s) ({names}): "
                f"give one value per column, in that order; got {len(texts)}"
            )
        return [_parse_text(self.name, c, t) for c, t in zip(self.columns, texts, strict=True)]

    def stored(self, values: list[Any]) -> list[Any] | None:
        """The key as the source's row gives it (what its batches hold); None: no such row."""
        schema, _, table = self.cfg.table.rpartition(".")
        cols: list[sa.ColumnClause[Any]] = [sa.column(c.name) for c in self.columns]
        query = sa.select(*cols).select_from(sa.table(table, *cols, schema=schema or None)).where(
            *(col == sa.literal(v, c.sql_type) for col, c, v in zip(cols, self.columns, values,
                                                                 strict=True))
        ).limit(1)  # fmt: skip

        def read() -> list[Any] | None:
            with self.engine.connect() as conn:
                row = conn.execute(query).first()  # untyped columns: the driver's own values
            return None if row is None else list(row)

        return self._guard("cannot read the key's row", read)

    def at_or_below(self, values: list[Any]) -> RangeOrder:
        """Compares ``values`` with range ends in the source's order; close it after use."""
        if all(isinstance(v, _ORDERED_ALIKE) for v in values):
            return RangeOrder(lambda hi: _sortable(values) <= _sortable(self._typed(hi)))
        return _DatabaseOrder(self, values)

    def _typed(self, hi: list[Any]) -> list[Any]:
        """A range end from a manifest (JSON: text for anything but numbers) back in its types."""
        return [_parse_stored(c, v) for c, v in zip(self.columns, hi, strict=True)]

    def _reflect(self) -> list[KeyColumn]:
        schema, _, table = self.cfg.table.rpartition(".")
        with self.engine.connect() as conn:
            inspector = sa.inspect(conn)
            if not inspector.has_table(table, schema=schema or None):
                raise ConfigError(
                    f"source {self.name}: no table {self.cfg.table!r} at {redact_url(self.cfg.url)}"
                )
            found = {c["name"]: c["type"] for c in inspector.get_columns(table, schema or None)}
            missing = [n for n in self.cfg.key_columns if n not in found]
            if missing:
                raise ConfigError(
                    f"source {self.name}: table {self.cfg.table!r} has no key "
                    f"column {', '.join(map(repr, missing))}"
                )
            collations = _collations(conn, table, schema or None, self.cfg.key_columns, found)
        return [KeyColumn(n, found[n], collations.get(n), _shown(found[n], conn.dialect))
                for n in self.cfg.key_columns]  # fmt: skip

    def _guard(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except sa.exc.DBAPIError as error:
            cause = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
            raise SourceError(
                f"source {self.name} (table {self.cfg.table!r} at "
                f"{redact_url(self.cfg.url)}): {what}: {cause}"
            ) from error


class RangeOrder:
    """``order(hi)``: whether the key is at or below the range end ``hi``. A context
    manager; the database comparer holds one connection while it is open."""

    def __init__(self, at_or_below: Callable[[list[Any]], bool]) -> None:
        self._at_or_below = at_or_below

    def __call__(self, hi: list[Any]) -> bool:
        return self._at_or_below(hi)

    def close(self) -> None:
        """Release what the comparisons held."""

    def __enter__(self) -> RangeOrder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _DatabaseOrder(RangeOrder):
    """Asks the source database ``(key) <= (hi)``, each text value under its column's collation."""

    def __init__(self, key: SqlKey, values: list[Any]) -> None:
        super().__init__(self._ask)
        self._key = key
        self._values = values
        self._conn: sa.Connection | None = None

    def _ask(self, hi: list[Any]) -> bool:
        columns = self._key.columns
        dialect = self._key.engine.dialect.name
        left = [
            _bound(c, v, dialect, collate=True) for c, v in zip(columns, self._values, strict=True)
        ]
        right = [_bound(c, v, dialect) for c, v in zip(columns, self._key._typed(hi), strict=True)]
        test = left[0] <= right[0] if len(left) == 1 else sa.tuple_(*left) <= sa.tuple_(*right)

        def ask() -> bool:
            if self._conn is None:
                self._conn = self._key.engine.connect()
            return bool(self._conn.scalar(sa.select(sa.case((test, 1), else_=0))))

        return bool(self._key._guard("cannot compare the key in the source's order", ask))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def sqs_keys(name: str, texts: Sequence[str]) -> list[list[Any]]:
    """The keys an SQS key field's text may have been queued as, likeliest first."""
    if len(texts) != 1:
        raise ConfigError(
            f"source {name} (SQS) has a key of one field: give one value, got {len(texts)}"
        )
    text = texts[0]
    try:
        value = json.loads(text)
    except ValueError:
        return [[text]]
    if isinstance(value, str):  # quoted: the text, and only it
        return [[value]]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [[value], [text]]
    return [[text]]


def _parse_text(source: str, column: KeyColumn, text: str) -> Any:
    kind = column.python_type
    try:
        return _parse(kind, column, text.strip() if kind is not str else text)
    except (ValueError, ArithmeticError) as error:
        raise ConfigError(
            f"source {source}: key column {column.name} is {column.shown}: "
            f"{text!r} is not one ({error})"
        ) from error


def _parse(kind: type | None, column: KeyColumn, text: str) -> Any:
    if kind is bool:
        if text.lower() not in (*_TRUE, *_FALSE):
            raise ValueError("a boolean is true or false")
        return text.lower() in _TRUE
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is decimal.Decimal:
        value = decimal.Decimal(text)
        if not value.is_finite():
            raise ValueError("not a finite number")
        scale = getattr(column.sql_type, "scale", None)
        if scale is not None:  # the row's value has the column's scale: 12.5 is 12.50
            exact = value.quantize(decimal.Decimal(1).scaleb(-scale))
            if exact != value:
                raise ValueError(f"more than {scale} decimals")
            value = exact
        return value
    if kind is dt.datetime:
        return dt.datetime.fromisoformat(text)
    if kind is dt.date:
        return dt.date.fromisoformat(text)
    if kind is dt.time:
        return dt.time.fromisoformat(text)
    if kind is uuid.UUID:
        return uuid.UUID(text)
    if kind is bytes:
        return bytes.fromhex(re.sub(r"^(0x|\\x)", "", text))
    return text  # text, and types the dialect does not name: as typed


def _parse_stored(column: KeyColumn, value: Any) -> Any:
    """A value from a manifest's JSON (written with ``default=str``) in its column's type."""
    kind = column.python_type
    if isinstance(value, str) and kind is bytes and value[:2] in ("b'", 'b"'):
        return ast.literal_eval(value)
    if kind is bool or value is None or (kind in (int, float) and not isinstance(value, str)):
        return value
    if kind is decimal.Decimal:
        return decimal.Decimal(str(value))
    if kind in (dt.datetime, dt.date, dt.time, uuid.UUID, int, float) and isinstance(value, str):
        return _parse(kind, column, value)
    return value


def _shown(type_: sa.types.TypeEngine[Any], dialect: sa.Dialect) -> str:
    try:
        return str(type_.compile(dialect=dialect))
    except sa.exc.SQLAlchemyError:
        return type(type_).__name__


def _sortable(values: list[Any]) -> tuple[Any, ...]:
    """Values that compare as the database compares them: a naive time taken as UTC
    (a key typed without a zone against a ``timestamptz`` column's ends)."""
    return tuple(
        v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v
        for v in values
    )


def _bound(column: KeyColumn, value: Any, dialect: str, *, collate: bool = False) -> Any:
    """``value`` as a bound parameter of ``column``'s type (text: under its collation)."""
    if not isinstance(value, str):
        return sa.literal(value, column.sql_type)
    text = dialect_traits(dialect).bound_text(value, column.collation)
    return sa.collate(text, column.collation) if collate and column.collation else text


def _collations(
    conn: sa.Connection, table: str, schema: str | None, names: Sequence[str],
    found: dict[str, Any],
) -> dict[str, str]:  # fmt: skip
    """The collation each text key column sorts by, where a bound value's would differ."""
    return dialect_traits(conn.dialect).key_collations(conn, table, schema, names, found)
