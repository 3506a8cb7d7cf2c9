"""What a database holds, for ``tables:`` sources: its tables, their keys and foreign keys.

:func:`inspect_tables` is the one place that asks (SQLAlchemy's inspector,
one short connection). What it found is a :class:`TableCatalog`, which a
reload or a ``spark-submit`` import job takes instead of asking again.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from config.base import database_file

CATALOG_ENV = "SLUICE_TABLES"
"""Where a ``spark-submit`` import job finds the daemon's catalog (:meth:`TableCatalog.to_json`)."""


@dataclass(frozen=True)
class FoundTable:
    """One table a group's patterns selected, as the database describes it."""

    name: str  # as the source name and the target table take it: ``orders``, ``sales.orders``
    schema: str  # its schema as the database names it (the default schema's too)
    key: tuple[str, ...]  # the primary key; empty when the table has none
    refers_to: tuple[str, ...] = ()  # names of the tables its foreign keys refer to

    @property
    def forms(self) -> tuple[str, str]:
        """The names a pattern may match: ``orders`` and ``public.orders``."""
        return self.name, f"{self.schema}.{self.name.rsplit('.', 1)[-1]}"


@dataclass
class TableCatalog:
    """What each ``tables:`` group found in its database: ``{group: [FoundTable…]}``."""

    groups: dict[str, list[FoundTable]] = field(default_factory=dict)

    def to_json(self) -> str:
        """The catalog as JSON (no URL, no secret: names and keys only)."""
        return json.dumps(
            {
                g: [[t.name, t.schema, list(t.key), list(t.refers_to)] for t in found]
                for g, found in self.groups.items()
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TableCatalog:
        """Read :meth:`to_json`'s output back."""
        return cls(
            {
                g: [FoundTable(n, s, tuple(k), tuple(r)) for n, s, k, r in found]
                for g, found in json.loads(text).items()
            }
        )


OWN_TABLES = frozenset({
    # The ledger's: a ledger may live in a source's database.
    "sluice_sources", "sluice_batches", "sluice_keys", "sluice_poison", "sluice_cutover",
    "sluice_owners", "sluice_schema_version",
    # A target's: the database one migration went into may be the next one's source.
    "_sluice_commits", "_sluice_rejects", "_sluice_streams",
    # A MariaDB stream's watermark messages, in its source's database.
    "sluice_watermarks",
})  # fmt: skip
"""Tables sluice makes: never a table of a ``tables:`` source, whatever its patterns."""


def catalog_from_env(environ: Mapping[str, str]) -> TableCatalog | None:
    """The catalog the daemon handed its import job in ``SLUICE_TABLES``, if any."""
    text = environ.get(CATALOG_ENV)
    return TableCatalog.from_json(text) if text else None


def selected(table: FoundTable, patterns: list[str]) -> bool:
    """Whether ``table`` matches a pattern of ``patterns`` and no ``!`` exclusion.

    A pattern with a dot names a schema (``public.*``, ``sales.order_*``); the
    default schema's tables are written without it, so ``public.orders``
    matches the table named ``orders`` when ``public`` is the default schema.
    """

    def match(pattern: str) -> bool:
        return any(fnmatch.fnmatchcase(form, pattern) for form in table.forms)

    included = any(match(p) for p in patterns if not p.startswith("!"))
    return included and not any(match(p[1:]) for p in patterns if p.startswith("!"))


def inspect_tables(url: str, patterns: list[str], foreign_keys: bool) -> list[FoundTable]:
    """Every table of the schemas ``patterns`` name at ``url``, with its primary key.

    Imported and connected only here: SQLAlchemy's inspector, one short
    connection, before any other work starts.
    """
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    _refuse_missing_file(url)
    engine = sa.create_engine(url, poolclass=NullPool)
    # One connection for every look (an inspector of an engine opens one per call: a
    # schema of 1,200 tables took 2,400 connections and ~20 s), and one query per
    # schema for all its keys and foreign keys where the dialect can.
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            default = inspector.default_schema_name or ""
            wanted = {p.lstrip("!").rsplit(".", 1)[0] for p in patterns if "." in p.lstrip("!")}
            schemas: list[str | None] = [None]
            if wanted:
                schemas += sorted(
                    s
                    for s in inspector.get_schema_names()
                    if s != default and any(fnmatch.fnmatchcase(s, w) for w in wanted)
                )
            tables: list[FoundTable] = []
            for schema in schemas:
                chosen = [
                    table
                    for table in sorted(inspector.get_table_names(schema=schema))
                    if table not in OWN_TABLES
                    and selected(
                        FoundTable(_name(schema, table, default), schema or default, ()), patterns
                    )  # fmt: skip
                ]
                if not chosen:
                    continue
                keys = inspector.get_multi_pk_constraint(schema=schema, filter_names=chosen)
                refs = (inspector.get_multi_foreign_keys(schema=schema, filter_names=chosen)
                        if foreign_keys else {})  # fmt: skip
                for table in chosen:
                    pk = keys.get((schema, table))
                    key = tuple(pk["constrained_columns"] or ()) if pk else ()
                    refers = tuple(sorted({
                        _name(fk.get("referred_schema"), fk["referred_table"], default)
                        for fk in refs.get((schema, table), [])
                    }))  # fmt: skip
                    name = table if schema is None else f"{schema}.{table}"
                    tables.append(FoundTable(name, schema or default, key, refers))
    finally:
        engine.dispose()
    return tables


def _name(schema: str | None, table: str, default: str) -> str:
    return table if schema in (None, "", default) else f"{schema}.{table}"


def _refuse_missing_file(url: str) -> None:
    """Connecting would create an empty database where the user mistyped a path (a relative
    one is where the connection would look: in the working directory)."""
    from sqlalchemy import make_url

    found = database_file(url, Path.cwd())
    if found is not None and not found.is_file():
        raise FileNotFoundError(f"no SQLite database at {make_url(url).database}")
