"""Verify's neutral text (:mod:`.canonical`) written in each server's own SQL, so that a
MySQL/MariaDB server and a PostgreSQL server can each hash their side of a table.

:func:`~spark_jobs.engines.canonical.neutral` puts each side's text of a value
(``col::text``, ``CAST(col AS CHAR)``) into a form equal values of two engines
share, as Spark expressions. Here the same forms are SQL of PostgreSQL
(:data:`POSTGRESQL`) or MySQL/MariaDB (:data:`MYSQL`): :func:`neutral_sql` gives
a column's expression, the same text Spark's would give for every value the
column can hold, or None for a kind whose form a server cannot print in SQL
(floating point: each engine prints digits its own way; JSON: parsed and
sorted; sets and arrays, intervals, network addresses). A table with such a
column is compared in Spark, as before.

:func:`row_hash_sql` hashes a row's neutral texts the same way on both
engines: each value as ``<characters>:<text>`` (NULL as ``-``), joined, as
UTF-8, ``md5``, its first 60 bits as a number. Sums of those over a table's
rows (:func:`sums_sql`) are equal on both sides when the rows are, whichever
order a server reads them in. A row a server could not print whole (MySQL
gives NULL for a text past its ``max_allowed_packet``) is counted apart, and
the table is then compared in Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_jobs.engines.base import Column, Kind

_TIMES = (Kind.DATE, Kind.TIME, Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
_AS_PRINTED = (Kind.TEXT, Kind.ENUM, Kind.BIT, Kind.CHAR)
PROVABLE = frozenset(
    {Kind.BOOL, Kind.INT, Kind.UINT, Kind.YEAR, Kind.DECIMAL, Kind.MONEY, Kind.BYTES, Kind.UUID,
     *_TIMES, *_AS_PRINTED}
)  # fmt: skip
"""The kinds whose neutral form :func:`neutral_sql` writes in SQL."""


@dataclass(frozen=True)
class Dialect:
    """How one engine's SQL spells what the neutral forms need."""

    name: str
    length: str  # characters of a text
    regexp_replace: str  # (text, pattern, replacement): every match, \\1 for a group
    matches: str  # (text, pattern): a boolean
    md5: str  # the hex digest of a text's UTF-8 bytes
    hash60: str  # a hex digest's first 15 digits as a number
    join: str  # " || " or ", " between a record's parts
    record: str  # the parts, joined

    def literal(self, text: str) -> str:
        """``text`` as a string literal of this engine (no backslash in one of MySQL's: it
        reads them as escapes or not by the session's ``sql_mode``)."""
        assert self.name != "mysql" or "\\" not in text, text
        return "'" + text.replace("'", "''") + "'"

    def groups(self, *numbers: int) -> str:
        """A regular expression's replacement by its groups ``numbers``, in order."""
        if self.name == "mysql":  # \N, the backslash spelt so that no sql_mode reads it
            parts = [f"CHAR(92 USING utf8mb4), '{n}'" for n in numbers]
            return f"CONCAT({', '.join(parts)})"
        return self.literal("".join(f"\\{n}" for n in numbers))


POSTGRESQL = Dialect(
    name="postgresql", length="length({})", regexp_replace="regexp_replace({}, {}, {}, 'g')",
    matches="({} ~ {})", md5="md5({})", hash60="('x' || substr({}, 1, 15))::bit(60)::bigint",
    join=" || ", record="({})",
)  # fmt: skip
MYSQL = Dialect(
    name="mysql", length="CHAR_LENGTH({})", regexp_replace="REGEXP_REPLACE({}, {}, {})",
    matches="({} REGEXP {})", md5="MD5(CONVERT({} USING utf8mb4))",
    hash60="CAST(CONV(SUBSTR({}, 1, 15), 16, 10) AS UNSIGNED)", join=", ", record="CONCAT({})",
)  # fmt: skip
DIALECTS = {"postgresql": POSTGRESQL, "mysql": MYSQL}


def provable(column: Column) -> bool:
    """Whether :func:`neutral_sql` can write ``column``'s neutral form."""
    return column.kind in PROVABLE


def neutral_sql(
    d: Dialect, column: Column, text: str, other: str, raw: bool = False
) -> str | None:  # fmt: skip
    """SQL of engine ``d`` giving the neutral text (:func:`.canonical.neutral`) of ``column``
    from ``text``, the SQL printing it (:meth:`~.base.Engine.text_sql`); ``other``: the other
    side's engine. ``raw``: the text as printed (a non-key column between two tables of
    one engine). None: a kind this cannot write."""
    if raw:
        return text
    kind = column.kind
    if kind not in PROVABLE:
        return None
    value = text
    if d is MYSQL and other != "mysql" and kind in (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ):
        zero = d.matches.format(value, d.literal("^[0-9]{4}-(00-|[0-9]{2}-00)"))
        value = f"CASE WHEN {zero} THEN NULL ELSE {value} END"
    if kind == Kind.BOOL or (kind == Kind.BIT and column.length == 1):
        return (f"CASE WHEN {value} IN ('t', 'true', '1') THEN '1' "
                f"WHEN {value} IN ('f', 'false', '0') THEN '0' ELSE {value} END")  # fmt: skip
    if kind in (Kind.INT, Kind.UINT, Kind.YEAR):
        if d is POSTGRESQL or (kind != Kind.YEAR and "zerofill" not in column.type.lower()):
            return value  # printed without leading zeros
        return d.regexp_replace.format(value, d.literal("^(-?)0+([0-9])"), d.groups(1, 2))
    if kind in (Kind.DECIMAL, Kind.MONEY):
        trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {value}))"
        cut = f"CASE WHEN {value} LIKE '%.%' THEN {trimmed} ELSE {value} END"
        return f"CASE WHEN {cut} = '-0' THEN '0' ELSE {cut} END"
    if kind == Kind.BYTES:
        if d is POSTGRESQL:  # bytea's \x
            value = f"CASE WHEN left({value}, 2) = '\\x' THEN substr({value}, 3) ELSE {value} END"
        return f"LOWER({value})"
    if kind in _TIMES:
        if d is POSTGRESQL:
            value = d.regexp_replace.format(value, d.literal("[+]00$"), "''")
        # Trailing zeros of a fraction, then a fraction of zeros, before the end or a space.
        value = d.regexp_replace.format(value, d.literal("([.][0-9]*[1-9])0+( |$)"),
                                        d.groups(1, 2))  # fmt: skip
        return d.regexp_replace.format(value, d.literal("[.]0*( |$)"), d.groups(1))
    if kind == Kind.UUID:
        return f"LOWER({value})"
    if kind == Kind.CHAR:
        return f"RTRIM({value})"
    return value


def row_hash_sql(d: Dialect, values: Sequence[str]) -> str:
    """SQL of engine ``d`` hashing a row of neutral texts ``values`` (expressions) to 60 bits;
    NULL when the server could not make the row's text (past MySQL's ``max_allowed_packet``,
    its ``CONCAT`` gives NULL)."""
    parts = [f"CASE WHEN {v} IS NULL THEN '-' ELSE {_prefixed(d, v)} END" for v in values]
    return d.hash60.format(d.md5.format(d.record.format(d.join.join(parts))))


def sums_sql(
    d: Dialect, table_sql: str, values: Sequence[str], where: str,
    printed: Sequence[tuple[str, str]] = (),
) -> str:  # fmt: skip
    """The query counting ``table_sql``'s rows matching ``where``, summing their
    :func:`row_hash_sql` hashes (a whole number on both engines), and counting the rows
    the server could not print whole: a hash it could not make, or a value of ``printed``
    (its column, the SQL printing it) printed as NULL (MySQL: past ``max_allowed_packet``)."""
    lost = " OR ".join(f"({c} IS NOT NULL AND {t} IS NULL)" for c, t in printed) or "1 = 0"
    return (f"SELECT COUNT(*), COALESCE(SUM(h), 0), "
            f"COALESCE(SUM(CASE WHEN h IS NULL OR lost THEN 1 ELSE 0 END), 0) "
            f"FROM (SELECT {row_hash_sql(d, values)} AS h, ({lost}) AS lost "
            f"FROM {table_sql} WHERE {where}) AS hashed")  # fmt: skip


def _prefixed(d: Dialect, value: str) -> str:
    length = d.length.format(value)
    if d is POSTGRESQL:  # NULL || text is NULL, as CONCAT with a NULL is
        return f"({length}::text || ':' || {value})"
    return f"CONCAT({length}, ':', {value})"
