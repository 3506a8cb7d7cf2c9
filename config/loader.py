"""Load a sluice config file: YAML, then ``${ENV}`` interpolation, then validation.

Every problem in a file is reported at once, in one :class:`ConfigError`, one
per line, each with its key path, file and line::

    sources.orders.tabel: unknown key; did you mean 'table'? (prod.yaml line 9)

Secrets (URL passwords, ``*secret*``/``*password*`` values) are never echoed.
Each step has a module of its own: ``config.yaml_lines`` (parsing, with the
line of every key), ``config.interpolation`` (``${VAR}``),
``config.validation`` (pydantic's errors in the user's words) and
``config.problems`` (key paths, lines and the error they make); a database
driver that is not installed is a problem too (``config.drivers``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from config.catalog import TableCatalog
from config.drivers import missing_drivers
from config.errors import ConfigError
from config.interpolation import interpolate
from config.models import SluiceConfig
from config.problems import KeyPath, Problem, config_error, format_path, line_at
from config.secrets import find_secrets
from config.tables import Expansion, expand_tables
from config.validation import validation_problems
from config.yaml_lines import LineLoader, read_yaml

__all__ = [
    "ConfigError",
    "KeyPath",
    "LineLoader",
    "Problem",
    "SluiceConfig",
    "format_path",
    "load_config",
    "load_config_text",
]


def load_config(
    path: str | Path, env: Mapping[str, str] | None = None, tables: TableCatalog | None = None
) -> SluiceConfig:
    """Read, interpolate and validate the config file at ``path``.

    Relative paths in it resolve against the file's folder. ``env`` replaces
    ``os.environ`` for ``${VAR}`` (tests). ``tables:`` sources are expanded
    by inspecting their databases, or from ``tables`` (what an earlier load
    found: a reload, an import job) without connecting. Raises
    :class:`ConfigError`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from None
    return load_config_text(text, str(path), env, tables)


def load_config_text(
    text: str,
    path: str = "<string>",
    env: Mapping[str, str] | None = None,
    tables: TableCatalog | None = None,
) -> SluiceConfig:
    """Like :func:`load_config` for YAML already in memory; ``path`` names it in errors."""
    data, lines, problems = read_yaml(text, path)
    unset: list[Problem] = []
    data = interpolate(data, os.environ if env is None else env, (), unset)
    problems += [replace(p, line=line_at(lines, p.path)) for p in unset]
    unresolved = [p.path for p in unset]
    # With a ${VAR} unset the databases cannot be reached: say that alone.
    expansion = expand_tables(data if not unset else {}, Path(path).parent, tables)
    if expansion.problems:
        # The sources it would have made are missing: what else is found is noise.
        problems += [replace(p, line=line_at(lines, p.path)) for p in expansion.problems]
        raise config_error(problems, path, find_secrets(data))
    data = expansion.data
    try:
        cfg = SluiceConfig.model_validate(data)
    except ValidationError as error:
        problems += [
            _as_written(problem, expansion, lines)
            for problem in validation_problems(error, data, lines)
            # A value whose ${VAR} is unset is already reported; its type error would be noise.
            if not any(problem.path[: len(p)] == p for p in unresolved)
        ]
    else:
        problems += [
            _as_written(replace(p, line=line_at(lines, p.path)), expansion, lines)
            for p in missing_drivers(cfg)
        ]
    if problems:
        raise config_error(problems, path, find_secrets(data))
    if expansion.members:
        cfg = cfg.with_tables(expansion.catalog, expansion.members)
    cfg = cfg.resolve_paths(Path(path).parent)
    tls = None if cfg.http is None else cfg.http.tls_problem()
    if tls is not None:  # read only now: a relative path is next to the config file
        key: KeyPath = ("http", *tls[0])
        raise config_error([Problem(key, tls[1], line_at(lines, key))], path, find_secrets(data))
    return cfg


def _as_written(problem: Problem, expansion: Expansion, lines: dict[KeyPath, int]) -> Problem:
    """A problem in a source a ``tables:`` entry made, at the key the user wrote."""
    path = expansion.written_at(problem.path)
    if path == problem.path:
        return problem
    if path[-1:] == ("tables",):  # the table's own key, target or order: say which table
        message = f"table {str(problem.path[1]).split('.', 1)[1]!r}: {problem.message}"
        return Problem(path, message, line_at(lines, path))
    return Problem(path, problem.message, line_at(lines, path))
