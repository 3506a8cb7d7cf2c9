"""The type matrix: a table with a column of every type of a source engine's catalogue,
its values the type's extremes and special values (and NULL), migrated by a daemon, then
compared column by column by the databases themselves (``col::text``, ``CAST(col AS
CHAR)``), never through sluice's read path.

Each spec is ``(type as DDL, [values as SQL literals])``; each value is a row of its
own, NULL in every other column (so that a value another engine refuses takes only its
own row with it), and one more row is NULL in every column.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

Spec = tuple[str, list[str]]

PG_PREAMBLE = (
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'it''s \"odd\"')",
    "CREATE DOMAIN posint AS integer CHECK (VALUE > 0)",
    "CREATE DOMAIN email AS text CHECK (VALUE LIKE '%@%')",
)

PG_TYPES: list[Spec] = [
    ("smallint", ["-32768", "32767", "0"]),
    ("integer", ["-2147483648", "2147483647"]),
    ("bigint", ["-9223372036854775808", "9223372036854775807"]),
    ("numeric", ["'NaN'", "'123456789012345678901234567890.123456789012345678901'",
                 "'-0.000000000000000000000000000001'", "'0'", "'Infinity'"]),
    ("numeric(12,2)", ["'-9999999999.99'", "'0.10'", "'NaN'"]),
    ("numeric(38,0)", ["'99999999999999999999999999999999999999'", "'-1'"]),
    ("real", ["'NaN'", "'Infinity'", "'-Infinity'", "'1.17549435e-38'", "'3.4028235e+38'",
              "'-0'", "'0.1'"]),
    ("double precision", ["'NaN'", "'-Infinity'", "'4.9e-324'", "'1.7976931348623157e308'",
                          "'0.1'", "'-0'"]),
    ("money", ["'-92233720368547758.08'", "'92233720368547758.07'", "'0.01'"]),
    ("boolean", ["true", "false"]),
    ("text", ["E'tab\\there\\nnew line\\\\back\\\\slash \"q\" ''s'' \\r'", "''",
              "'ünïcødé 日本語 😀'", "'\\N'"]),
    ("varchar(10)", ["'abc'", "''", "'0123456789'"]),
    ("char(5)", ["'ab'", "'abcde'", "''"]),
    ("bytea", ["'\\x00ff5c0a09'", "''", "'\\x5c4e'"]),
    ("uuid", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
              "'ffffffff-ffff-ffff-ffff-ffffffffffff'"]),
    ("json", ["'{\"b\":1,  \"a\":[1,2,null]}'", "'[]'", "'\"x\\\\ty\"'"]),
    ("jsonb", ["'{\"b\":1,  \"a\":[1,2,null], \"c\": {\"d\": \"\\u00e9\"}}'", "'null'",
               "'12345678901234567890.123'"]),
    ("date", ["'infinity'", "'-infinity'", "'4713-01-01 BC'", "'5874897-12-31'",
              "'2024-02-29'"]),
    ("timestamp", ["'infinity'", "'-infinity'", "'4713-01-01 00:00:00 BC'",
                   "'294276-12-31 23:59:59.999999'", "'2024-01-01 00:00:00.000001'"]),
    ("timestamp(3)", ["'2024-01-01 00:00:00.123'", "'1999-12-31 23:59:59.999'"]),
    ("timestamptz", ["'infinity'", "'-infinity'", "'2024-10-27 01:30:00.123456+02'",
                     "'1900-01-01 00:00:00+00'", "'0044-03-15 12:00:00+00 BC'"]),
    ("time", ["'00:00:01.000001'", "'24:00:00'", "'23:59:59.999999'"]),
    ("timetz", ["'12:00:00.000001+01'", "'00:00:00-15:59'", "'24:00:00+15:59'"]),
    ("interval", ["'1 year 2 mons -3 days 04:05:06.000007'", "'-178000000 years'", "'0'",
                  "'-00:00:00.000001'"]),
    ("bit(8)", ["B'00000001'", "B'10101010'"]),
    ("varbit", ["B''", "B'101'"]),
    ("inet", ["'10.1.2.3/8'", "'::ffff:1.2.3.4/128'", "'192.168.0.1'"]),
    ("cidr", ["'10.0.0.0/8'", "'2001:db8::/32'"]),
    ("macaddr", ["'08:00:2b:01:02:03'"]),
    ("macaddr8", ["'08:00:2b:01:02:03:04:05'"]),
    ("point", ["'(1.5,-2)'", "'(NaN,Infinity)'"]),
    ("line", ["'{1,2,3}'"]),
    ("lseg", ["'[(0,0),(1,1)]'"]),
    ("box", ["'(1,1),(0,0)'"]),
    ("path", ["'[(0,0),(1,1),(2,0)]'", "'((0,0),(1,1))'"]),
    ("polygon", ["'((0,0),(1,1),(1,0))'"]),
    ("circle", ["'<(0,0),1.5>'"]),
    ("int4range", ["'[1,5)'", "'empty'", "'(,)'"]),
    ("numrange", ["'[1.5,2.25)'", "'(,0]'"]),
    ("tstzrange", ["'[2024-01-01 00:00:00+00,infinity)'"]),
    ("int4multirange", ["'{[1,3), [5,8)}'", "'{}'"]),
    ("text[]", ["'{\"a b\",NULL,\"q\\\"x\",\"\",\"NULL\"}'", "'{}'", "'{{a,b},{c,d}}'"]),
    ("integer[]", ["'{1,NULL,-3}'", "'{}'", "'[0:1]={7,8}'"]),
    ("numeric[]", ["'{NaN,1.50}'"]),
    ("timestamptz[]", ["'{infinity,\"2024-01-01 00:00:00+00\"}'"]),
    ("mood", ["'sad'", "'it''s \"odd\"'"]),
    ("mood[]", ["'{sad,happy}'", "'{}'"]),
    ("posint", ["1", "2147483647"]),
    ("email", ["'a@b'"]),
    ("tsvector", ["'a fat:1 cat'"]),
    ("tsquery", ["'fat & (rat | cat)'"]),
    ("xml", ["'<a x=\"1\">t</a>'"]),
    ("pg_lsn", ["'16/B374D848'"]),
]


def column_name(ddl: str) -> str:
    """A column name for a type: ``c_`` and the type's letters and digits."""
    name = re.sub(r"[^a-z0-9]+", "_", ddl.lower().replace("[]", " array")).strip("_")
    return f"c_{name}"


def rows_of(specs: Sequence[Spec]) -> int:
    """Rows the matrix table holds: one per value, and a NULL row."""
    return sum(len(values) for _, values in specs) + 1


def cells(specs: Sequence[Spec]) -> list[tuple[int, int, str]]:
    """``(row key, column index, value)`` of each value of the matrix, in row order."""
    found, key = [], 1
    for index, (_, values) in enumerate(specs):
        for value in values:
            found.append((key, index, value))
            key += 3
    return found


@dataclass
class Matrix:
    """A type matrix's outcome: per type, what the migration did to its values."""

    pair: str
    results: dict[str, str] = field(default_factory=dict)

    def table(self) -> str:
        """The matrix as a table (engine pair, type, result)."""
        width = max(len(t) for t in self.results)
        lines = [f"{'pair':<20} {'type':<{width}} result"]
        lines += [f"{self.pair:<20} {t:<{width}} {r}" for t, r in self.results.items()]
        return "\n".join(lines)


def pg_create_source(url: str, table: str, specs: Sequence[Spec], key: str = "id") -> int:
    """Create and fill the PostgreSQL matrix ``table`` (with an identity and a generated
    column); return its rows."""
    columns = ", ".join(f"{column_name(t)} {t}" for t, _ in specs)
    count = rows_of(specs)
    selects = []
    for row_key, index, value in [*cells(specs), (len(cells(specs)) * 3 + 1, -1, "")]:
        values = [f"({value})::{t}" if i == index else "NULL" for i, (t, _) in enumerate(specs)]
        selects.append(f"SELECT {row_key}, {', '.join(values)}")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in PG_PREAMBLE:
            conn.execute(sa.text(statement))
        conn.execute(sa.text(
            f"CREATE TABLE {table} ({key} bigint PRIMARY KEY, {columns}, "
            "n_identity integer GENERATED ALWAYS AS IDENTITY, "
            f"n_generated bigint GENERATED ALWAYS AS ({key} * 2) STORED)"
        ))  # fmt: skip
        names = ", ".join([key, *[column_name(t) for t, _ in specs]])
        for select in selects:
            conn.exec_driver_sql(f"INSERT INTO {table} ({names}) {select}".replace("%", "%%"))
    engine.dispose()
    return count


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq's tools take it."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def pg_schema_copy(source: str, target: str) -> None:
    """The source database's DDL into the target, as ``pg_dump --schema-only | psql`` does."""
    dump = subprocess.run(["pg_dump", "--schema-only", "--no-owner", libpq_url(source)],
                          check=True, capture_output=True, text=True).stdout  # fmt: skip
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", libpq_url(target)], input=dump,
                   check=True, capture_output=True, text=True)  # fmt: skip


def pg_texts(url: str, table: str, columns: Sequence[str], key: str = "id") -> dict[Any, tuple]:
    """Every row's columns as PostgreSQL prints them (``col::text``), by key, in UTC."""
    listed = ", ".join(f"{c}::text" for c in columns)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.execute(sa.text("SET TimeZone = 'UTC'"))
        rows = conn.execute(sa.text(f"SELECT {key}, {listed} FROM {table} ORDER BY {key}"))
        found = {row[0]: tuple(row[1:]) for row in rows}
    engine.dispose()
    return found


def pg_types(url: str, table: str) -> dict[str, str]:
    """Each column's type as ``format_type`` shows it."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(:t) AND attnum > 0 AND NOT attisdropped"
        ), {"t": table}).all()  # fmt: skip
    engine.dispose()
    return dict(rows)


REJECTED = "<rejected>"
"""What an expectation gives for a value the target refuses (its row is a reject)."""


def compare(source: dict[Any, tuple], target: dict[Any, tuple], columns: Sequence[str],
            types: Sequence[str], pair: str,
            expect: dict[str, Callable[[Any], Any]] | None = None,
            canonical: dict[str, Callable[[Any], Any]] | None = None) -> Matrix:  # fmt: skip
    """Per type: ``same`` when every value of its column is equal on both sides (or, by
    ``expect[type](source text)``, as the mapping says), else the first value that is not.

    A row missing from the target is :data:`REJECTED` there.
    """
    matrix = Matrix(pair)
    expect, canonical = expect or {}, canonical or {}
    refused = {  # rows the mapping refuses for some column's value
        key for key, row in source.items()
        for value, shown in zip(row, types, strict=True)
        if value is not None and shown in expect and expect[shown](value) == REJECTED
    }  # fmt: skip
    for index, (name, shown) in enumerate(zip(columns, types, strict=True)):
        mapping = expect.get(shown)
        differing, rejected = [], 0
        for key, row in source.items():
            was = row[index]
            wanted = was if mapping is None or was is None else mapping(was)
            mapped = None if mapping is None or was is None else mapping(was)
            if key in refused and mapped != REJECTED:
                continue  # a row refused for another column's value
            now = target[key][index] if key in target else REJECTED
            if now not in (None, REJECTED) and shown in canonical:
                now = canonical[shown](now)
            if now == REJECTED and wanted == REJECTED and was is not None:
                rejected += 1
            if now != wanted:
                differing.append((key, was, wanted, now))
        if differing:
            key, was, wanted, now = differing[0]
            matrix.results[shown] = (
                f"DIFFERENT at {key}: {was!r} -> {now!r}, expected {wanted!r} ({name})"
            )
        else:
            mapped = "same" if mapping is None else "as mapped"
            matrix.results[shown] = mapped + (f", {rejected} refused" if rejected else "")
    return matrix


MARIADB_TYPES: list[Spec] = [
    ("tinyint", ["-128", "127"]),
    ("tinyint(1)", ["0", "1", "5", "-1"]),
    ("tinyint unsigned", ["0", "255"]),
    ("smallint", ["-32768", "32767"]),
    ("smallint unsigned", ["65535"]),
    ("mediumint", ["-8388608", "8388607"]),
    ("mediumint unsigned", ["16777215"]),
    ("int", ["-2147483648", "2147483647"]),
    ("int unsigned", ["4294967295", "0"]),
    ("bigint", ["-9223372036854775808", "9223372036854775807"]),
    ("bigint unsigned", ["18446744073709551615", "0", "9223372036854775808"]),
    ("decimal(65,30)", ["'12345678901234567890123456789012345.123456789012345678901234567890'",
                        "-0.000000000000000000000000000001"]),
    ("decimal(12,2)", ["-9999999999.99", "0.10"]),
    ("float", ["-3.40282e38", "1.17549e-38", "0.1", "0"]),
    ("double", ["1.7976931348623157e308", "4.9e-324", "0.1", "-0.0"]),
    ("bit(1)", ["b'0'", "b'1'"]),
    ("bit(8)", ["b'00000001'", "b'10101010'"]),
    ("bit(64)", ["b'" + "1" * 64 + "'", "b'0'"]),
    ("char(5)", ["'ab'", "''", "'abcde'"]),
    ("varchar(20)", ["'tab\\there\\nnl\\\\'", "''", "'ünï 日本 😀'"]),
    ("text", ["'\"q\" ''s'' \\\\N'", "''"]),
    ("mediumtext", ["'ünï 日本 😀'", "''"]),
    ("longtext", ["REPEAT('long ', 5000)", "''"]),
    ("binary(4)", ["x'00ff'", "x'5c4e0a09'"]),
    ("varbinary(8)", ["x'00ff5c0a'", "''"]),
    ("blob", ["x'0009'"]),
    ("date", ["'0000-00-00'", "'1000-01-01'", "'9999-12-31'", "'2024-02-29'"]),
    ("datetime(6)", ["'0000-00-00 00:00:00'", "'1000-01-01 00:00:00.000000'",
                     "'9999-12-31 23:59:59.999999'"]),
    ("datetime", ["'2024-01-01 10:00:00'"]),
    ("timestamp(6)", ["'1970-01-01 00:00:01.000000'", "'2038-01-19 03:14:07.999999'"]),
    ("time(6)", ["'838:59:59.000000'", "'-838:59:59.000000'", "'00:00:00.000001'"]),
    ("year", ["0", "1901", "2155"]),
    ("enum('paid','new','it''s')", ["'paid'", "'it''s'"]),
    ("set('red','green','blue')", ["'red,blue'", "''"]),
    ("json", ["'{\"b\": 1,  \"a\":2}'", "'[]'"]),
    ("uuid", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"]),
    ("inet4", ["'10.1.2.3'"]),
    ("inet6", ["'::1'"]),
]
MARIADB_SESSION = "SET time_zone = '+00:00', sql_mode = 'STRICT_TRANS_TABLES'"


def mariadb_create_source(url: str, table: str, specs: Sequence[Spec], key: str = "id") -> int:
    """Create and fill the MariaDB matrix ``table`` (with a generated column)."""
    count = rows_of(specs)
    columns = ", ".join(f"`{column_name(t)}` {t} NULL" for t, _ in specs)
    names = ", ".join([key, *[f"`{column_name(t)}`" for t, _ in specs]])
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(MARIADB_SESSION)
        conn.exec_driver_sql(
            f"CREATE TABLE {table} ({key} bigint unsigned PRIMARY KEY, {columns}, "
            f"n_generated bigint AS ({key} * 2) PERSISTENT) CHARACTER SET utf8mb4"
        )
        for row_key, index, value in [*cells(specs), (len(cells(specs)) * 3 + 1, -1, "")]:
            values = [value if i == index else "NULL" for i in range(len(specs))]
            conn.exec_driver_sql(
                f"INSERT INTO {table} ({names}) VALUES ({row_key}, {', '.join(values)})"
                .replace("%", "%%")
            )
    engine.dispose()
    return count


def mariadb_text(column: str, ddl: str) -> str:
    """How MariaDB prints a value of ``ddl`` (its bits as digits, its bytes in hex)."""
    if ddl.startswith("bit"):
        return f"BIN(`{column}`)"
    if ddl in ("float", "real"):
        return f"CAST(`{column}` AS DOUBLE)"  # CAST(… AS CHAR) prints 6 digits of a float
    if "binary" in ddl or "blob" in ddl:
        return f"HEX(`{column}`)"
    return f"CAST(`{column}` AS CHAR)"


def mariadb_texts(url: str, table: str, columns: Sequence[str], ddls: Sequence[str],
                  key: str = "id") -> dict[Any, tuple]:  # fmt: skip
    """Every row's columns as MariaDB prints them, by key, in UTC."""
    listed = ", ".join(mariadb_text(c, d) for c, d in zip(columns, ddls, strict=True))
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql(MARIADB_SESSION)
        rows = conn.exec_driver_sql(f"SELECT {key}, {listed} FROM {table} ORDER BY {key}")
        found = {row[0]: tuple(row[1:]) for row in rows}
    engine.dispose()
    return found


def mariadb_schema_copy(source: str, target: str) -> None:
    """The source database's DDL into the target, as ``mariadb-dump --no-data | mariadb``."""
    src, dst = sa.make_url(source), sa.make_url(target)

    def args(url: sa.URL) -> list[str]:
        return [f"-h{url.host}", f"-P{url.port or 3306}", f"-u{url.username}"]

    dump = subprocess.run(["mariadb-dump", "--no-data", *args(src), str(src.database)],
                          check=True, capture_output=True, text=True).stdout  # fmt: skip
    subprocess.run(["mariadb", *args(dst), str(dst.database)], input=dump, check=True,
                   capture_output=True, text=True)  # fmt: skip


def _number(text: str) -> str:
    """A float's text as a canonical double's."""
    return repr(float(text))


def _float32(text: str) -> str:
    import struct

    return repr(struct.unpack("f", struct.pack("f", float(text)))[0])


def _timestamp(text: str) -> str:
    """A timestamp's text without trailing zero fractions (how PostgreSQL prints it)."""
    head, dot, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return head + ("." + fraction if fraction else "")


def _json(text: str) -> str:
    import json

    return json.dumps(json.loads(text), sort_keys=True)


def _pg_bool(text: str) -> str:
    return {"0": "false", "1": "true"}.get(text, REJECTED)


MARIADB_TO_PG: dict[str, Callable[[Any], Any]] = {
    "tinyint(1)": _pg_bool,
    "bit(1)": _pg_bool,
    "bit(8)": lambda t: t.zfill(8),
    "bit(64)": lambda t: t.zfill(64),
    "float": _float32,
    "double": _number,
    "binary(4)": lambda t: "\\x" + t.lower(),
    "varbinary(8)": lambda t: "\\x" + t.lower(),
    "blob": lambda t: "\\x" + t.lower(),
    "date": lambda t: None if t.startswith("0000") else t,
    "datetime(6)": lambda t: None if t.startswith("0000") else _timestamp(t),
    "timestamp(6)": lambda t: _timestamp(t) + "+00",
    "time(6)": _timestamp,
    "year": lambda t: str(int(t)),
    "set('red','green','blue')": lambda t: "{" + t + "}",
    "json": _json,
    "inet4": lambda t: t + "/32",  # inet::text shows the prefix length
    "inet6": lambda t: t + "/128",
}
"""The documented mapping, MariaDB's text of a value → PostgreSQL's (``::text``)."""
PG_CANONICAL: dict[str, Callable[[Any], Any]] = {
    "float": _float32, "double": _number, "json": _json,
}
"""How the PostgreSQL side's text is read for the types whose text differs in form only."""


def _pg_float_to_mariadb(text: str) -> str:
    if text in ("NaN", "Infinity", "-Infinity"):
        return REJECTED
    return _float32(text.removeprefix("-") if text == "-0" else text)  # MySQL keeps no -0


def _pg_double_to_mariadb(text: str) -> str:
    if text in ("NaN", "Infinity", "-Infinity"):
        return REJECTED
    return _number(text.removeprefix("-") if text == "-0" else text)


def _pg_date_to_mariadb(text: str) -> str:
    if "infinity" in text or text.endswith(" BC") or len(text.split("-")[0]) > 4:
        return REJECTED
    return text


def _pg_timestamp_to_mariadb(text: str) -> str:
    text = text.removesuffix("+00")
    return _pg_date_to_mariadb(_timestamp(text))


PG_TO_MARIADB: dict[str, Callable[[Any], Any]] = {
    "numeric(12,2)": lambda t: REJECTED if t == "NaN" else t,
    "real": _pg_float_to_mariadb,
    "double precision": _pg_double_to_mariadb,
    "boolean": lambda t: {"true": "1", "false": "0"}[t],
    "bytea": lambda t: t.removeprefix("\\x").upper(),
    "date": _pg_date_to_mariadb,
    "timestamp": _pg_timestamp_to_mariadb,
    "timestamp(3)": _pg_timestamp_to_mariadb,
    "timestamptz": _pg_timestamp_to_mariadb,
    "time": _timestamp,
    "bit(8)": lambda t: t.lstrip("0") or "0",
    "money": lambda t: t.replace("$", "").replace(",", ""),
    # inet::text shows a host's full prefix length, which inet's own output leaves out
    "inet": lambda t: re.sub(r"/(32|128)$", "", t),
}
"""The documented mapping, PostgreSQL's text of a value (``::text``) → MariaDB's."""
MARIADB_CANONICAL: dict[str, Callable[[Any], Any]] = {
    "real": _float32, "double precision": _number, "timestamp": _timestamp,
    "timestamp(3)": _timestamp, "timestamptz": _timestamp, "time": _timestamp,
}
"""How the MariaDB side's text is read for the types whose text differs in form only."""
PG_ON_MARIADB = {"bit(8)": "bit(8)", "bytea": "longblob", "real": "real"}
"""The MariaDB type of a PostgreSQL column whose text MariaDB prints its own way."""


PG_TAMPER: dict[str, tuple[int, str]] = {
    "smallint": (0, "{c} + 1"), "integer": (0, "{c} + 1"), "bigint": (0, "{c} + 1"),
    "numeric": (1, "{c} + 0.000000000000000000001"), "numeric(12,2)": (1, "{c} + 0.01"),
    "numeric(38,0)": (1, "{c} + 1"), "real": (6, "{c} + 1e-8"),
    "double precision": (4, "{c} + 1.5e-17"), "money": (2, "{c} + 0.01::money"),
    "boolean": (0, "NOT {c}"), "text": (1, "{c} || 'x'"), "varchar(10)": (0, "{c} || 'd'"),
    "char(5)": (0, "'ac'"), "bytea": (0, "{c} || '\\x00'::bytea"),
    "uuid": (1, "'00000000-0000-0000-0000-000000000001'"),
    "json": (0, "'{\"b\":1,  \"a\":[1,2,null], \"z\":0}'"), "jsonb": (0, "{c} || '{\"z\": 0}'"),
    "date": (4, "{c} + 1"), "timestamp": (4, "{c} + interval '1 microsecond'"),
    "timestamp(3)": (0, "{c} + interval '1 millisecond'"),
    "timestamptz": (2, "{c} + interval '1 microsecond'"),
    "time": (0, "{c} + interval '1 microsecond'"), "timetz": (0, "{c} + interval '1 microsecond'"),
    "interval": (0, "{c} + interval '1 microsecond'"), "bit(8)": (0, "B'00000011'"),
    "varbit": (1, "B'100'"), "inet": (0, "'10.1.2.4/8'"), "cidr": (0, "'11.0.0.0/8'"),
    "macaddr": (0, "'08:00:2b:01:02:04'"), "macaddr8": (0, "'08:00:2b:01:02:03:04:06'"),
    "point": (0, "'(1.5,-2.5)'"), "line": (0, "'{1,2,4}'"), "lseg": (0, "'[(0,0),(1,2)]'"),
    "box": (0, "'(1,2),(0,0)'"), "path": (0, "'[(0,0),(1,1),(2,1)]'"),
    "polygon": (0, "'((0,0),(1,1),(1,2))'"), "circle": (0, "'<(0,0),1.6>'"),
    "int4range": (0, "'[1,6)'"), "numrange": (0, "'[1.5,2.26)'"),
    "tstzrange": (0, "'[2024-01-01 00:00:00.000001+00,infinity)'"),
    "int4multirange": (0, "'{[1,3), [5,9)}'"), "text[]": (0, "{c} || 'x'::text"),
    "integer[]": (0, "{c} || 4"), "numeric[]": (0, "'{NaN,1.51}'"),
    "timestamptz[]": (0, "'{infinity,\"2024-01-01 00:00:00.000001+00\"}'"),
    "mood": (0, "'ok'"), "mood[]": (0, "'{sad,ok}'"), "posint": (0, "2"), "email": (0, "'a@c'"),
    "tsvector": (0, "'a fat:2 cat'"), "tsquery": (0, "'fat & rat'"),
    "xml": (0, "'<a x=\"2\">t</a>'"), "pg_lsn": (0, "'16/B374D849'"),
}
"""Per PostgreSQL type, the value (by index) changed behind sluice's back, and how: by the
smallest step its type has (a microsecond, a unit in the last place, one array element, one
JSON key, one character)."""

MARIADB_TAMPER: dict[str, tuple[int, str]] = {
    "tinyint": (0, "{c} + 1"), "tinyint(1)": (0, "1"), "tinyint unsigned": (0, "{c} + 1"),
    "smallint": (0, "{c} + 1"), "smallint unsigned": (0, "{c} - 1"), "mediumint": (0, "{c} + 1"),
    "mediumint unsigned": (0, "{c} - 1"), "int": (0, "{c} + 1"), "int unsigned": (0, "{c} - 1"),
    "bigint": (0, "{c} + 1"), "bigint unsigned": (0, "{c} - 1"),
    "decimal(65,30)": (1, "{c} + 0.000000000000000000000000000001"),
    "decimal(12,2)": (1, "{c} + 0.01"), "float": (2, "0.10000001"),
    "double": (2, "0.10000000000000002"), "bit(1)": (0, "b'1'"), "bit(8)": (0, "b'00000011'"),
    "bit(64)": (1, "b'1'"), "char(5)": (0, "'ac'"), "varchar(20)": (1, "'x'"),
    "text": (1, "'x'"), "binary(4)": (0, "x'00fe'"), "varbinary(8)": (1, "x'00'"),
    "blob": (0, "x'0008'"), "date": (3, "'2024-03-01'"),
    "datetime(6)": (1, "'1000-01-01 00:00:00.000001'"), "datetime": (0, "'2024-01-01 10:00:01'"),
    "timestamp(6)": (0, "'1970-01-01 00:00:01.000001'"), "time(6)": (2, "'00:00:00.000002'"),
    "year": (1, "1902"), "enum('paid','new','it''s')": (0, "'new'"),
    "set('red','green','blue')": (0, "'red'"), "json": (0, "'{\"b\": 1,  \"a\":2, \"z\":0}'"),
    "uuid": (0, "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'"), "inet4": (0, "'10.1.2.4'"),
    "inet6": (0, "'::2'"),
}
"""Per MariaDB type, as :data:`PG_TAMPER`."""


def tamper(url: str, table: str, specs: Sequence[Spec], changes: dict[str, tuple[int, str]],
           mariadb: bool = False) -> set[int]:  # fmt: skip
    """Change one value of each type in ``changes`` in ``url``'s ``table``; the rows' keys."""
    keys = {(index, k) for k, index, _ in cells(specs)}
    by_type = {t: i for i, (t, _) in enumerate(specs)}
    changed: set[int] = set()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for ddl, (nth, expression) in changes.items():
            index = by_type[ddl]
            key = sorted(k for i, k in keys if i == index)[nth]
            column = column_name(ddl)
            quoted = f"`{column}`" if mariadb else column
            value = expression.replace("{c}", quoted)
            sql = f"UPDATE {table} SET {quoted} = {value} WHERE id = {key}"
            conn.exec_driver_sql(sql.replace("%", "%%"))
            changed.add(key)
    engine.dispose()
    return changed


MARIADB_TO_PG_TAMPER: dict[str, tuple[int, str]] = {
    "decimal(12,2)": (1, "{c} + 0.01"), "datetime(6)": (1, "{c} + interval '1 microsecond'"),
    "varchar(20)": (1, "{c} || 'x'"), "json": (0, "{c} || '{\"z\": 0}'"),
    "tinyint(1)": (0, "NOT {c}"), "double": (2, "{c} + 1.5e-17"),
    "blob": (0, "{c} || '\\x00'::bytea"), "set('red','green','blue')": (0, "{c} || 'x'::text"),
    "time(6)": (2, "{c} + interval '1 microsecond'"), "bigint unsigned": (0, "{c} - 1"),
    "bit(8)": (0, "B'00000011'"), "year": (1, "{c} + 1"),
    "tinyint": (0, "{c} + 1"), "tinyint unsigned": (0, "{c} + 1"), "smallint": (0, "{c} + 1"),
    "smallint unsigned": (0, "{c} - 1"), "mediumint": (0, "{c} + 1"),
    "mediumint unsigned": (0, "{c} - 1"), "int": (0, "{c} + 1"), "int unsigned": (0, "{c} - 1"),
    "bigint": (0, "{c} + 1"), "decimal(65,30)": (1, "{c} + 0.000000000000000000000000000001"),
    "float": (2, "{c} + 1e-8"), "bit(1)": (0, "NOT {c}"),
    "bit(64)": (0, "set_bit({c}, 63, 1 - get_bit({c}, 63))"), "char(5)": (0, "'ac'"),
    "text": (0, "{c} || 'x'"), "binary(4)": (0, "{c} || '\\x00'::bytea"),
    "varbinary(8)": (0, "{c} || '\\x00'::bytea"), "date": (1, "{c} + 1"),
    "datetime": (0, "{c} + interval '1 second'"),
    "timestamp(6)": (0, "{c} + interval '1 microsecond'"),
    "enum('paid','new','it''s')": (0, "'new'"),
    "uuid": (0, "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'"), "inet4": (0, "'10.1.2.4'"),
    "inet6": (0, "'::2'"),
}
"""Changes in a PostgreSQL target of the MariaDB matrix, by the source's type: every type."""
PG_TO_MARIADB_TAMPER: dict[str, tuple[int, str]] = {
    "numeric(12,2)": (1, "{c} + 0.01"),
    "timestamptz": (2, "{c} + INTERVAL 1 MICROSECOND"), "text": (1, "CONCAT({c}, 'x')"),
    "jsonb": (0, "JSON_SET({c}, '$.z', 0)"), "boolean": (0, "1 - {c}"),
    "double precision": (4, "0.10000000000000002"), "bytea": (0, "CONCAT({c}, x'00')"),
    "uuid": (1, "'00000000-0000-0000-0000-000000000001'"), "numeric": (1, "CONCAT({c}, '1')"),
    "interval": (0, "CONCAT({c}, '1')"), "real": (6, "0.10000001"),
    "smallint": (0, "{c} + 1"), "integer": (0, "{c} + 1"), "bigint": (0, "{c} + 1"),
    "numeric(38,0)": (1, "{c} + 1"), "money": (2, "{c} + 0.01"),
    "varchar(10)": (0, "CONCAT({c}, 'd')"), "char(5)": (0, "'ac'"),
    "json": (0, "JSON_SET({c}, '$.z', 0)"), "date": (4, "{c} + INTERVAL 1 DAY"),
    "timestamp": (4, "{c} + INTERVAL 1 MICROSECOND"),
    "timestamp(3)": (0, "{c} + INTERVAL 1000 MICROSECOND"),
    "time": (0, "ADDTIME({c}, '00:00:00.000001')"), "bit(8)": (0, "b'00000011'"),
    "mood": (0, "'ok'"), "posint": (0, "{c} + 1"),
    # Kept as text in MariaDB (longtext): one character more.
    **{t: (0, "CONCAT({c}, 'x')") for t in (
        "timetz", "varbit", "inet", "cidr", "macaddr", "macaddr8", "point", "line", "lseg",
        "box", "path", "polygon", "circle", "int4range", "numrange", "tstzrange",
        "int4multirange", "text[]", "integer[]", "numeric[]", "timestamptz[]", "mood[]",
        "email", "tsvector", "tsquery", "xml", "pg_lsn")},
}
"""Changes in a MariaDB target of the PostgreSQL matrix, by the source's type: every type."""


def _pg_to_parquet_date(text: str) -> Any:
    # Parquet's dates hold PostgreSQL's (Spark's reach to year 5874897), not ±infinity or BC.
    return REJECTED if "infinity" in text or text.endswith(" BC") else text


def _pg_to_parquet_time(text: str) -> Any:
    text = _timestamp(text.removesuffix("+00"))
    # Spark's timestamps end in year 294247.
    return REJECTED if "infinity" in text or " BC" in text or len(text.split("-")[0]) > 4 \
        else text  # fmt: skip


PG_TO_PARQUET: dict[str, Callable[[Any], Any]] = {
    "numeric(12,2)": lambda t: REJECTED if t == "NaN" else t,
    "real": _float32, "double precision": _number,
    "money": lambda t: t.replace("$", "").replace(",", ""),
    "date": _pg_to_parquet_date, "timestamp": _pg_to_parquet_time,
    "timestamp(3)": _pg_to_parquet_time, "timestamptz": _pg_to_parquet_time,
}
"""The documented mapping into Parquet, PostgreSQL's text as its output function prints it
(what a column kept as text holds) → the Parquet value's text."""


def _civil(days: int) -> str:
    """A day number (since 1970-01-01) as ISO text, for any year (Hinnant's algorithm)."""
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day, month = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}"


def parquet_texts(folder: str, columns: Sequence[str], key: str = "id") -> dict[Any, tuple]:
    """Every row of a Parquet table, read by pyarrow, each value as text (bytes as bytea's
    hex, floats as their repr, timestamps without trailing zero fractions)."""
    import datetime as dt
    import decimal
    import struct

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder)
    types = {f.name: f.type for f in table.schema}
    for i, column in enumerate(table.schema):  # dates past Python's year 9999, as text
        if str(column.type) == "date32[day]":
            days = table.column(i).cast("int32").to_pylist()
            table = table.set_column(i, column.name, pa.array(
                [None if d is None else _civil(d) for d in days], pa.string()))  # fmt: skip

    def text(value: Any, name: str) -> Any:
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, bytes):
            return "\\x" + value.hex()
        if isinstance(value, float):
            if str(types[name]) == "float":
                return repr(struct.unpack("f", struct.pack("f", value))[0])
            return repr(value)
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return _timestamp(value.isoformat(sep=" "))
        if isinstance(value, dt.date | decimal.Decimal | int):
            return str(value)
        return value

    found = {}
    for row in table.to_pylist():
        found[row[key]] = tuple(text(row.get(c), c) for c in columns)
    return found


PG_TO_SQLITE: dict[str, Callable[[Any], Any]] = {
    # SQLite has no NaN (it would store NULL: the row is refused instead), nor -0.
    "real": _pg_float_to_mariadb, "double precision": _pg_double_to_mariadb,
    "boolean": lambda t: {"true": "1", "false": "0"}[t],
    "money": lambda t: t.replace("$", "").replace(",", ""),
}
"""The documented mapping into SQLite, PostgreSQL's text as its output prints it → the
SQLite value's text (most kept as that text)."""


def sqlite_texts(path: str, columns: Sequence[str], floats: Sequence[str] = (),
                 key: str = "id") -> dict[Any, tuple]:  # fmt: skip
    """Every row of the SQLite matrix, read by sqlite3, each value as text (bytes as bytea's
    hex; ``floats``: columns compared as single precision)."""
    import sqlite3
    import struct

    def text(value: Any, name: str) -> Any:
        if value is None:
            return None
        if isinstance(value, bytes):
            return "\\x" + value.hex()
        if isinstance(value, float):
            if name in floats:
                return repr(struct.unpack("f", struct.pack("f", value))[0])
            return repr(value)
        return str(value)

    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT {key}, {', '.join(columns)} FROM matrix").fetchall()
    return {row[0]: tuple(text(v, c) for v, c in zip(row[1:], columns, strict=True))
            for row in rows}  # fmt: skip


def _zero_date(text: str) -> Any:
    return None if text.startswith("0000") else text


def _bytes_hex(text: str) -> str:
    return "\\x" + text.lower()


MARIADB_TO_SQLITE: dict[str, Callable[[Any], Any]] = {
    "float": _float32, "double": _number,
    # Bit strings as text are their n bits, as MySQL's BIN() without the leading zeros is not.
    "bit(8)": lambda t: t.zfill(8), "bit(64)": lambda t: t.zfill(64),
    "binary(4)": _bytes_hex, "varbinary(8)": _bytes_hex, "blob": _bytes_hex,
    "date": _zero_date, "datetime(6)": _zero_date,
    "year": lambda t: str(int(t)),
}
"""The documented mapping into SQLite, MariaDB's text of a value → the SQLite value's text
(most kept as that text; zero dates NULL)."""

MARIADB_TO_PARQUET: dict[str, Callable[[Any], Any]] = {
    "float": _float32, "double": _number,
    "bit(8)": lambda t: t.zfill(8), "bit(64)": lambda t: t.zfill(64),
    "binary(4)": _bytes_hex, "varbinary(8)": _bytes_hex, "blob": _bytes_hex,
    "date": _zero_date,
    "datetime(6)": lambda t: None if t.startswith("0000") else _timestamp(t),
    "datetime": _timestamp, "timestamp(6)": _timestamp,
    "year": lambda t: str(int(t)),
    "set('red','green','blue')": lambda t: t.split(",") if t else [],
}
"""The documented mapping into Parquet, MariaDB's text of a value → the Parquet value's
text (pyarrow's, as :func:`parquet_texts` prints it; a set as its list of members)."""


def step(value: Any, float32: bool = False) -> Any:
    """``value`` changed by the smallest step its type has: an integer by one, a float by one
    unit in its last place, a decimal in its last digit, a date by a day, a timestamp by a
    microsecond, a text in its last character, bytes and lists by one more element."""
    import datetime as dt
    import decimal
    import math

    import numpy as np

    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value - 1 if value > 0 else value + 1
    if isinstance(value, float):
        if math.isnan(value):
            return 0.0  # NaN has no neighbour
        if float32:
            return float(np.nextafter(np.float32(value), np.float32(np.inf)))
        return math.nextafter(value, math.inf)
    if isinstance(value, decimal.Decimal):
        unit = decimal.Decimal((0, (1,), value.as_tuple().exponent))
        with decimal.localcontext(prec=100):  # the default 28 digits would round
            return value - unit if value > 0 else value + unit  # toward zero: in precision
    if isinstance(value, dt.datetime):
        return value + dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return value + dt.timedelta(days=1)
    if isinstance(value, bytes):
        return value + b"\x00"
    if isinstance(value, list):
        return [*value, value[-1] if value else "x"]
    if isinstance(value, str):
        last = value[-1:] or "a"
        swapped = str((int(last) + 1) % 10) if last.isdigit() else ("y" if last == "x" else "x")
        return value[:-1] + swapped
    raise TypeError(f"no step for {value!r}")


def _cells_to_change(specs: Sequence[Spec], found: dict[Any, dict[str, Any]]) -> dict[int, str]:
    """Per type, the first of its own rows that the target holds with a value: key → column."""
    chosen = {}
    for key, index, _ in cells(specs):
        column = column_name(specs[index][0])
        row = found.get(key)
        if column not in chosen.values() and row is not None and row.get(column) is not None:
            chosen[key] = column
    return chosen


def tamper_sqlite(path: str, specs: Sequence[Spec], floats: Sequence[str] = ()) -> set[int]:
    """Change one value of every type of the SQLite matrix by its smallest step; the keys."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        rows = {int(r["id"]): dict(r) for r in conn.execute("SELECT * FROM matrix")}
        chosen = _cells_to_change(specs, rows)
        for key, column in chosen.items():
            value = step(rows[key][column], float32=column in floats)
            conn.execute(f"UPDATE matrix SET {column} = ? WHERE CAST(id AS INTEGER) = ?",
                         (value, key))  # fmt: skip
    return set(chosen)


def tamper_parquet(folder: str, specs: Sequence[Spec]) -> set[int]:
    """Change one value of every type of the Parquet matrix by its smallest step, each file
    written again in its own schema; the keys. Dates and timestamps step as their numbers
    (a date of year 5874897 is no Python date)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def read(file: Path) -> pa.Table:
        # Spark's timestamps are INT96: read in microseconds, in UTC, and written back as
        # INT64 microseconds adjusted to UTC, which Spark reads as the same timestamps.
        table = pq.read_table(file, coerce_int96_timestamp_unit="us")
        schema = pq.ParquetFile(file).schema
        for i in range(len(schema)):
            if schema.column(i).physical_type == "INT96":
                name = schema.column(i).name
                index = table.schema.get_field_index(name)
                table = table.set_column(index, pa.field(name, pa.timestamp("us", "UTC")),
                                         table.column(index).cast(pa.timestamp("us", "UTC")))
        return table

    files = sorted(Path(folder).rglob("*.parquet"))
    tables = {f: read(f) for f in files}
    present = {}  # key -> {column: True where it holds a value}
    for table in tables.values():
        valid = {n: table.column(n).is_valid().to_pylist() for n in table.column_names}
        for i, key in enumerate(table.column("id").to_pylist()):
            present[int(key)] = {n: True if v[i] else None for n, v in valid.items()}
    chosen = _cells_to_change(specs, present)
    for file, table in tables.items():
        keys = [int(k) for k in table.column("id").to_pylist()]
        for row, key in enumerate(keys):
            if key not in chosen:
                continue
            name = chosen[key]
            index = table.schema.get_field_index(name)
            array = table.column(index).combine_chunks()
            if pa.types.is_date32(array.type) or pa.types.is_timestamp(array.type):
                number = pa.int32() if pa.types.is_date32(array.type) else pa.int64()
                values = array.cast(number).to_pylist()
                values[row] += 1  # a day, a microsecond
                changed = pa.array(values, number).cast(array.type)
            else:
                values = array.to_pylist()
                values[row] = step(values[row], float32=pa.types.is_float32(array.type))
                changed = pa.array(values, array.type)
            table = table.set_column(index, table.schema.field(index), changed)
        pq.write_table(table, file, coerce_timestamps="us")
    return set(chosen)
