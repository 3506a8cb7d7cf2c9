"""Load a sluice config file: YAML, then ``${ENV}`` interpolation, then validation.

Every problem in a file is reported at once, in one :class:`ConfigError`, one
per line, each with its key path, file and line::

    sources.orders.tabel: unknown key; did you mean 'table'? (prod.yaml line 9)

Secrets (URL passwords, ``*secret*``/``*password*`` values) are never echoed.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from config.errors import ConfigError
from config.models import SluiceConfig
from config.secrets import MASK, find_secrets, is_secret_key, redact_text, redact_url

KeyPath = tuple[str | int, ...]
"""Where a value sits in the YAML: mapping keys and sequence indexes."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config file, at a key path and line."""

    path: KeyPath
    message: str
    line: int | None

    def render(self, file: str) -> str:
        """``key.path: message (file line N)``."""
        where = f"{file} line {self.line}" if self.line else file
        return f"{format_path(self.path)}: {self.message} ({where})"


def format_path(path: KeyPath) -> str:
    """``('strategy', 'prefer', 1)`` → ``strategy.prefer[1]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


class LineLoader(yaml.SafeLoader):
    """A SafeLoader that remembers the line of every key and item, by key path.

    It also collects duplicate keys, which plain YAML loading silently resolves
    by keeping the last one: in a config that hides a mistake.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.lines: dict[KeyPath, int] = {}
        self.duplicates: list[Problem] = []

    def record(
        self, node: yaml.Node, path: KeyPath = (), parents: frozenset[int] = frozenset()
    ) -> None:
        """Record lines and duplicate keys of ``node`` (found at ``path``) and below."""
        if id(node) in parents:  # an alias of one of its own ancestors
            return
        parents |= {id(node)}
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.lines.setdefault((*path, index), item.start_mark.line + 1)
                self.record(item, (*path, index), parents)
        if not isinstance(node, yaml.MappingNode):
            return
        seen: dict[Any, int] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged.append(value_node)  # ``<<: *defaults``: explicit keys win, on purpose
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # SafeLoader itself rejects a list or mapping as a key
            value = self.construct_object(key_node)
            key: str | int = value if isinstance(value, str | int) else str(value)
            line = key_node.start_mark.line + 1
            if key in seen:
                message = f"duplicate key, first set at line {seen[key]}; keep one"
                self.duplicates.append(Problem((*path, key), message, line))
                continue
            seen[key] = line
            self.lines.setdefault((*path, key), line)
            self.record(value_node, (*path, key), parents)
        for source in merged:  # after the explicit keys, so those keep their own lines
            for mapping in source.value if isinstance(source, yaml.SequenceNode) else [source]:
                self.record(mapping, path, parents)


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> SluiceConfig:
    """Read, interpolate and validate the config file at ``path``.

    Relative paths in it resolve against the file's folder. ``env`` replaces
    ``os.environ`` for ``${VAR}`` (tests). Raises :class:`ConfigError`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from None
    return load_config_text(text, str(path), env)


def load_config_text(
    text: str, path: str = "<string>", env: Mapping[str, str] | None = None
) -> SluiceConfig:
    """Like :func:`load_config` for YAML already in memory; ``path`` names it in errors."""
    data, lines, problems = _read_yaml(text, path)
    unset: list[Problem] = []
    data = _interpolate(data, os.environ if env is None else env, (), unset)
    problems += [replace(p, line=_line(lines, p.path)) for p in unset]
    unresolved = [p.path for p in unset]
    try:
        cfg = SluiceConfig.model_validate(data)
    except ValidationError as error:
        problems += [
            problem
            for problem in _validation_problems(error, data, lines)
            # A value whose ${VAR} is unset is already reported; its type error would be noise.
            if not any(problem.path[: len(p)] == p for p in unresolved)
        ]
    if problems:
        raise _config_error(problems, path, find_secrets(data))
    return cfg.resolve_paths(Path(path).parent)


def _read_yaml(text: str, path: str) -> tuple[Any, dict[KeyPath, int], list[Problem]]:
    """Parse one YAML document that must be a mapping; return it, its lines, its duplicates."""
    loader = LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError(f"{path}: the file is empty; expected a mapping of settings")
        if not isinstance(node, yaml.MappingNode):
            found = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
            raise ConfigError(
                f"(top level): expected a mapping of settings (key: value), found {found} "
                f"({path} line {node.start_mark.line + 1})"
            )
        loader.lines[()] = node.start_mark.line + 1
        loader.record(node)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path} line {mark.line + 1}, column {mark.column + 1}" if mark else path
        # "but found another document" only makes sense after its context.
        what = error.problem or ""
        if what.startswith("but ") or not what:
            what = f"{error.context or ''} {what}".strip()
        if mark and "${" in "".join(text.splitlines()[mark.line : mark.line + 1]):
            # ``{a: ${X}}`` reads as a nested flow mapping: the value needs quotes.
            what += '; quote a ${VAR} value inside [ ] or { }: "${VAR}"'
        raise ConfigError(f"invalid YAML: {what} ({where})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML: {error}") from None
    finally:
        loader.dispose()
    return data, loader.lines, list(loader.duplicates)


# ``$${`` is a literal ``${``; ``${`` not followed by NAME or NAME:-default} is malformed.
_VARIABLE = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})?"
)
_MALFORMED = "malformed ${...}: write ${NAME} or ${NAME:-default} ($${ for a literal ${)"


def _interpolate(value: Any, env: Mapping[str, str], path: KeyPath, problems: list[Problem]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string value (keys stay as written).

    A value with an unset variable is kept as written and reported in ``problems``.
    """
    if isinstance(value, dict):
        return {k: _interpolate(v, env, (*path, k), problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, (*path, i), problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        name = match["name"]
        if name is None:
            missing.append(_MALFORMED)
            return match[0]
        if env.get(name):  # like the shell's ${VAR:-default}, an empty value takes the default
            return env[name]
        if match["default"] is not None:
            return match["default"]
        if name in env:
            return ""
        fix = "${" + name + ":-default}"
        missing.append(f"environment variable {name} is not set; set it or write {fix}")
        return match[0]

    result = _VARIABLE.sub(substitute, value)
    problems += [Problem(path, message, None) for message in missing]
    return value if missing else result


@dataclass(frozen=True)
class _Detail:
    """A pydantic error with its location split into the user's key path and union tags."""

    loc: tuple[str | int, ...]
    path: KeyPath
    tags: tuple[int, ...]  # positions in ``loc`` that name a union member, not a key
    error: Mapping[str, Any]


def _detail(error: Mapping[str, Any], data: Any) -> _Detail:
    """Walk the data along ``loc``: a part that is no key there is a union tag (``sql``…)."""
    loc, path, tags, node = tuple(error["loc"]), [], [], data
    for index, part in enumerate(loc):
        child = _child(node, part)
        if child is not _ABSENT:
            node = child
        elif not (index == len(loc) - 1 and error["type"] == "missing"):
            tags.append(index)
            continue
        path.append(part)
    return _Detail(loc, tuple(path), tuple(tags), error)


_ABSENT = object()


def _child(node: Any, part: str | int) -> Any:
    """``node[part]`` for a mapping key or list index that is there, else ``_ABSENT``."""
    if isinstance(node, Mapping):
        return node.get(part, _ABSENT)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return _ABSENT


def _prune_unions(details: list[_Detail], level: int = 0) -> list[_Detail]:
    """Keep, at each union, only the member the user evidently meant.

    Pydantic reports every member's errors (``key`` as a ``str`` and as a
    ``list[str]``). The member whose errors reach deepest into the value is the
    one meant; if none got past the value's own type, say what types fit.
    """
    kept: list[_Detail] = []
    unions: dict[tuple[str | int, ...], dict[str | int, list[_Detail]]] = {}
    for detail in details:
        if len(detail.tags) <= level:
            kept.append(detail)
            continue
        at = detail.tags[level]
        unions.setdefault(detail.loc[:at], {}).setdefault(detail.loc[at], []).append(detail)
    for members in unions.values():
        options = list(members.values())
        at_top = all(len(d.loc) == d.tags[level] + 1 for option in options for d in option)
        if len(options) > 1 and at_top:
            first = options[0][0]
            fits = dict.fromkeys(_expected(d.error["msg"], False) for opt in options for d in opt)
            error = {**first.error, "type": "union_type", "msg": f"should be {' or '.join(fits)}"}
            loc = first.loc[: first.tags[level]]
            kept.append(_Detail(loc, first.path, first.tags[:level], error))
        else:
            best = max(options, key=lambda option: (max(len(d.loc) for d in option), -len(option)))
            kept += _prune_unions(best, level + 1)
    return kept


def _models_at(path: KeyPath, data: Any) -> list[type[BaseModel]]:
    """The config models that can describe the mapping at ``path`` in ``data``.

    Walks SluiceConfig's field annotations; at a union of models (a source, a
    target, a strategy node) the ``kind`` written in the data picks the member.
    """
    candidates: list[Any] = [SluiceConfig]
    node = data
    for part in path:
        following: list[Any] = []
        for annotation in _members(candidates, node):
            origin = get_origin(annotation)
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                field = annotation.model_fields.get(part) if isinstance(part, str) else None
                following += [field.annotation] if field else []
            elif origin is dict:
                following.append(get_args(annotation)[1])
            elif origin is list and isinstance(part, int):
                following.append(get_args(annotation)[0])
        candidates = following
        node = _child(node, part)
    members = _members(candidates, node)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _members(annotations: list[Any], node: Any) -> list[Any]:
    """Unwrap ``Annotated`` and unions; keep the members whose ``kind`` is the data's."""
    flat: list[Any] = []
    for annotation in annotations:
        origin = get_origin(annotation)
        if origin is Annotated:
            flat += _members([get_args(annotation)[0]], None)
        elif origin is Union or origin is types.UnionType:
            flat += _members(list(get_args(annotation)), None)
        else:
            flat.append(annotation)
    kind = node.get("kind") if isinstance(node, Mapping) else None
    return [m for m in flat if kind in _kinds(m)] or flat


def _kinds(annotation: Any) -> tuple[str, ...]:
    """The ``kind`` values a model accepts (``('sql',)``), or () when it has no kind."""
    fields = getattr(annotation, "model_fields", None) if isinstance(annotation, type) else None
    kind = (fields or {}).get("kind")
    if kind is None or get_origin(kind.annotation) is not Literal:
        return ()
    return tuple(str(k) for k in get_args(kind.annotation))


def _expected(message: str, alone: bool = True) -> str:
    """``Input should be a valid dictionary or instance of X`` → ``should be a mapping``.

    With ``alone=False`` only what is expected (``a mapping``), to join alternatives.
    """
    message = re.sub(r"a valid dictionary( or instance of \w+)?", "a mapping", message)
    message = message.replace("Input should be ", "should be " if alone else "", 1)
    return message[:1].lower() + message[1:]


def _validation_problems(
    error: ValidationError, data: Any, lines: dict[KeyPath, int]
) -> list[Problem]:
    """Turn pydantic's errors into problems at the user's key paths and lines."""
    details = _prune_unions([_detail(e, data) for e in error.errors(include_url=False)])
    return [_problem(d, data, lines) for d in details]


def _problem(detail: _Detail, data: Any, lines: dict[KeyPath, int]) -> Problem:
    """Word one pydantic error for a person editing the YAML, and find its line."""
    kind, path, ctx = detail.error["type"], detail.path, detail.error.get("ctx") or {}
    if kind == "missing":  # the key is not there: point at the mapping that lacks it
        return Problem(path, "field required", _line(lines, path[:-1]))
    if kind == "extra_forbidden":
        fields = sorted({f for model in _models_at(path[:-1], data) for f in model.model_fields})
        close = difflib.get_close_matches(str(path[-1]), fields, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(fields)}"
        return Problem(path, f"unknown key; {hint}", _line(lines, path))
    if kind == "union_tag_not_found":
        kinds = ", ".join(k for model in _models_at(path, data) for k in _kinds(model))
        return Problem((*path, "kind"), f"field required (one of: {kinds})", _line(lines, path))
    if kind == "union_tag_invalid":
        tags = re.findall(r"'([^']*)'", ctx.get("expected_tags", ""))
        close = difflib.get_close_matches(str(ctx.get("tag")), tags, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        message = f"unknown kind {_show(ctx.get('tag'), path)}; {hint}(one of: {', '.join(tags)})"
        return Problem((*path, "kind"), message, _line(lines, (*path, "kind")))
    message = detail.error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind not in ("value_error", "assertion_error", "reference"):
        # Built-in checks do not quote the value; ours (model validators) already do.
        message = f"{_expected(message)}; got {_show(detail.error.get('input'), path)}"
    return Problem(path, message, _line(lines, path))


def _show(value: Any, path: KeyPath) -> str:
    """The offending value as the user wrote it, short, and redacted if it is a secret."""
    name = next((part for part in reversed(path) if isinstance(part, str)), None)
    if is_secret_key(name):
        return MASK
    text = repr(redact_url(value) if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _line(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, or of its nearest recorded ancestor."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _config_error(problems: list[Problem], file: str, secrets: list[str]) -> ConfigError:
    """One error listing every problem, in file order, with secrets scrubbed."""
    problems = sorted(set(problems), key=lambda p: (p.line or 0, format_path(p.path), p.message))
    rendered = [p.render(file) for p in problems]
    if len(rendered) == 1:
        text = rendered[0]
    else:
        text = f"{file}: {len(rendered)} problems\n" + "\n".join(f"  {r}" for r in rendered)
    # A very short password may also mask an ordinary word; printing it would be worse.
    return ConfigError(redact_text(text, secrets))
