"""Database drivers as users install them: optional extras, and a clear word when one is missing.

sluice itself needs no database driver: SQLite comes with Python, and
PostgreSQL (``psycopg``) and MySQL/MariaDB (``PyMySQL``) are the extras
``sluice[postgres]`` and ``sluice[mysql]``. A URL whose driver is not
installed is a problem of the config that names it, found when the config
is loaded (``sluice validate`` included), not a traceback from the first
connection.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from config.models import JdbcTargetConfig, SluiceConfig
from config.problems import KeyPath, Problem

EXTRAS = {"psycopg": "postgres", "pymysql": "mysql"}
"""The driver modules sluice's extras install, by the extra's name."""


def missing_drivers(cfg: SluiceConfig) -> list[Problem]:
    """A problem for each database URL of ``cfg`` whose Python driver is not installed."""
    problems = []
    for path, url in _database_urls(cfg):
        reason = driver_missing(url)
        if reason is not None:
            problems.append(Problem(path, reason, None))
    return problems


def driver_missing(url: str) -> str | None:
    """Why ``url``'s driver cannot be loaded, with the fix; None when it can.

    An unknown dialect or a malformed URL is left to whoever connects: the
    config's own checks, or the database's error, say more about those.
    """
    try:
        dialect = make_url(url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError):
        return None
    try:
        dialect.import_dbapi()
    except ImportError as error:
        module = (error.name or str(error)).split(".")[0]
        return f"{url.split('://', 1)[0]}:// needs the Python driver {module!r}: {_fix(module)}"
    return None


def _fix(module: str) -> str:
    if module in EXTRAS:
        return f"install it with pip install 'sluice[{EXTRAS[module]}]'"
    if module == "psycopg2":
        return "use postgresql+psycopg:// (pip install 'sluice[postgres]'), or install psycopg2"
    if module == "MySQLdb":
        return "use mysql+pymysql:// (pip install 'sluice[mysql]'), or install mysqlclient"
    return "install it"


def _database_urls(cfg: SluiceConfig) -> Iterator[tuple[KeyPath, str]]:
    yield ("ledger",), cfg.ledger
    for name, source in cfg.sources.items():
        if source.kind == "sql":
            yield ("sources", name, "url"), source.url
    for name, target in cfg.targets.items():
        if isinstance(target, JdbcTargetConfig):  # a Parquet target is a folder: no driver
            yield ("targets", name, "url"), target.url
