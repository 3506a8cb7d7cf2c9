"""``sluice init --source URL --target URL [--schema S] > sluice.yaml``: a starter config.

The source database is inspected once (:func:`config.tables.inspect_tables`,
read-only) and a config for the whole of it is printed: one ``tables:``
source in foreign-key order, the target, and comments that say what each
part does and what to check. It is meant to pass ``sluice validate`` as it
is (given the ``${ENV}`` placeholders its passwords became):

- a table without a primary key is left out (``"!table"`` in ``tables:``)
  with a commented-out override naming its columns, to be filled in;
- a cycle of foreign keys is broken with ``depends_on: []`` on one of its
  tables, with a comment saying so.

The typer command is defined here and registered by :mod:`scheduler.cli`
with the CLI's error path (``init_command(_fail)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, NoReturn

import typer

from config.errors import ConfigError, SluiceError

SourceUrl = Annotated[
    str,
    typer.Option(
        "--source", show_default=False, help="The SQLAlchemy URL of the database to migrate."
    ),
]
TargetUrl = Annotated[str, typer.Option("--target", show_default=False,
                                        help="The target: a SQLAlchemy URL, or a folder "
                                             "for Parquet.")]  # fmt: skip
Schema = Annotated[str | None, typer.Option("--schema", show_default=False,
                                            help="The source schema (default: the "
                                                 "database's default schema).")]  # fmt: skip


def init_command(fail: Callable[[SluiceError], NoReturn]) -> Callable[..., None]:
    """The ``init`` command, reporting errors through the CLI's ``fail``."""

    def init(source: SourceUrl, target: TargetUrl, schema: Schema = None) -> None:
        """Print a starter config for a whole database: every table of the source
        (or of --schema), keyed by its primary key, parents before children.

        Passwords become ${SOURCE_PASSWORD} / ${TARGET_PASSWORD}. Exit 2 when
        the source cannot be read or has no table.
        """
        try:
            typer.echo(starter_config(source, target, schema))
        except SluiceError as error:
            fail(error)

    return init


def starter_config(source: str, target: str, schema: str | None = None) -> str:
    """The YAML text of a starter config for every table of ``source`` (or of ``schema``)."""
    from config.catalog import inspect_tables
    from config.secrets import redact_url
    from config.tables import find_cycle

    pattern = f"{schema}.*" if schema else "*"
    try:
        tables = inspect_tables(source, [pattern], foreign_keys=True)
    except Exception as error:  # a dead database, a bad URL
        reason = (str(error).strip().splitlines() or [""])[0]
        raise ConfigError(f"cannot list the tables of {redact_url(source)}: "
                          f"{type(error).__name__}: {reason}") from None  # fmt: skip
    if not tables:
        where = f"schema {schema!r}" if schema else "its default schema"
        raise ConfigError(f"{redact_url(source)} has no table in {where}")
    keyless = [t for t in tables if not t.key]
    kept = {t.name for t in tables if t.key}
    parents = {t.name: [r for r in t.refers_to if r in kept and r != t.name]
               for t in tables if t.key}  # fmt: skip
    unordered: list[str] = []  # tables whose depends_on is emptied to break a cycle
    while cycle := find_cycle(parents):
        unordered.append(cycle[0])
        parents[cycle[0]] = []
    prefix = f"{schema}." if schema else ""
    patterns = [f"{prefix}*", *(f"!{prefix}{t.name}" for t in keyless)]
    group = _name(source)
    links = sum(len(p) for p in parents.values())
    out = [
        f"# sluice: every table of {redact_url(_with_placeholder(source, 'SOURCE_PASSWORD'))}"
        f"{f' (schema {schema})' if schema else ''},",
        "# one source per table, parents before children. Next:",
        "#   sluice validate sluice.yaml   # every problem, with its line",
        "#   sluice plan sluice.yaml       # each table's backlog, the order, its schema objects",
        "#   sluice run sluice.yaml --until-drained",
        "ledger: sqlite:///sluice-ledger.db",
        "sources:",
        f"  {group}:",
        "    kind: sql",
        f"    url: {_quoted(_with_placeholder(source, 'SOURCE_PASSWORD'))}",
        f"    # {len(tables) - len(keyless)} of {len(tables)} tables; \"!name\" leaves one out.",
        f"    tables: [{', '.join(_quoted(p) for p in patterns)}]",
        f"    # A table waits for the tables its foreign keys refer to ({links} found).",
        "    order: foreign_keys",
        "    target: target",
        "    # Everything sluice opens to this database, together; max_rows_per_s caps its reads.",
        "    limits: {max_connections: 2, max_rows_per_s: null}",
        "    # Each table's indexes, constraints, defaults, sequences… follow its rows into the",
        "    # target; sluice plan lists them. skip: [NAME] leaves one out.",
        "    schema: {skip: []}",
    ]  # fmt: skip
    if keyless:
        out.append(
            "    # Tables without a primary key: to migrate one, name a unique key of its columns"
        )
        out.append('    # under overrides: and remove its "!name" from tables: above.')
        out.append("    #" + (" overrides:" if not unordered else ""))
        out += [f"    #   {t.name}: {{key: [{', '.join(_columns_of(source, t.name))}]}}"
                for t in keyless]  # fmt: skip
    if unordered:
        out.append("    overrides:")
    for name in unordered:
        out += [
            f"      # {name} is in a cycle of foreign keys: it does not wait for its parents.",
            f"      {name}: {{depends_on: []}}",
        ]
    out += ["targets:", "  target:", *_target(target)]
    return "\n".join(out)


def _target(target: str) -> list[str]:
    if "://" not in target:
        return ["    kind: parquet", f"    path: {_quoted(target)}      # one folder per table"]
    return [
        "    kind: jdbc",
        f"    url: {_quoted(_with_placeholder(target, 'TARGET_PASSWORD'))}",
        "    # Missing tables are created as the source defines them: columns and primary key",
        "    # first, the rest after their rows; tables that exist are compared, not changed.",
    ]


def _columns_of(url: str, name: str) -> list[str]:
    """The columns of table ``name`` (``schema.table`` outside the default schema)."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    schema, _, bare = name.rpartition(".")
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        return [c["name"] for c in sa.inspect(engine).get_columns(bare, schema=schema or None)]
    finally:
        engine.dispose()


def _name(url: str) -> str:
    """The group's name: the database's, as a YAML key and source name allow."""
    import sqlalchemy as sa

    database = sa.make_url(url).database or "source"
    name = re.sub(r"[^A-Za-z0-9_]+", "_", database.rsplit("/", 1)[-1].removesuffix(".db"))
    return name.strip("_") or "source"


def _with_placeholder(url: str, variable: str) -> str:
    """``url`` with its password (if any) replaced by ``${variable}``."""
    import sqlalchemy as sa

    if "://" not in url:
        return url
    parsed = sa.make_url(url)
    if parsed.password is None:
        return url
    rendered = parsed.set(password="PASSWORD_PLACEHOLDER").render_as_string(hide_password=False)
    return rendered.replace("PASSWORD_PLACEHOLDER", "${" + variable + "}")


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
