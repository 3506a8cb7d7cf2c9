"""Word pydantic's validation errors for a person editing the YAML, at its key paths and lines.

Unknown keys get the nearest valid name; a union's errors are cut down to
the member the user meant; values are shown short and secrets never.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from config.models import SluiceConfig
from config.problems import KeyPath, Problem, line_at
from config.secrets import MASK, is_secret_key, redact_url


def validation_problems(
    error: ValidationError, data: Any, lines: dict[KeyPath, int]
) -> list[Problem]:
    """Turn pydantic's errors into problems at the user's key paths and lines."""
    details = _prune_unions([_detail(e, data) for e in error.errors(include_url=False)])
    return [_problem(d, data, lines) for d in details]


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
                field = _field(annotation, part) if isinstance(part, str) else None
                following += [field.annotation] if field else []
            elif origin is dict:
                following.append(get_args(annotation)[1])
            elif origin is list and isinstance(part, int):
                following.append(get_args(annotation)[0])
        candidates = following
        node = _child(node, part)
    members = _members(candidates, node)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _field(model: type[BaseModel], key: str) -> Any:
    """The field of ``model`` that the YAML's ``key`` is (a field written under an alias:
    ``schema:``, which pydantic's own ``schema`` would otherwise shadow)."""
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info
    return None


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


def _problem(detail: _Detail, data: Any, lines: dict[KeyPath, int]) -> Problem:
    """Word one pydantic error for a person editing the YAML, and find its line."""
    kind, path, ctx = detail.error["type"], detail.path, detail.error.get("ctx") or {}
    if kind == "missing":  # the key is not there: point at the mapping that lacks it
        return Problem(path, "field required", line_at(lines, path[:-1]))
    if kind == "extra_forbidden":
        fields = sorted({info.alias or f for model in _models_at(path[:-1], data)
                         for f, info in model.model_fields.items()})  # fmt: skip
        close = difflib.get_close_matches(str(path[-1]), fields, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(fields)}"
        return Problem(path, f"unknown key; {hint}", line_at(lines, path))
    if kind == "union_tag_not_found":
        kinds = ", ".join(k for model in _models_at(path, data) for k in _kinds(model))
        return Problem((*path, "kind"), f"field required (one of: {kinds})", line_at(lines, path))
    if kind == "union_tag_invalid":
        tags = re.findall(r"'([^']*)'", ctx.get("expected_tags", ""))
        close = difflib.get_close_matches(str(ctx.get("tag")), tags, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        message = f"unknown kind {_show(ctx.get('tag'), path)}; {hint}(one of: {', '.join(tags)})"
        return Problem((*path, "kind"), message, line_at(lines, (*path, "kind")))
    message = detail.error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind not in ("value_error", "assertion_error", "reference"):
        # Built-in checks do not quote the value; ours (model validators) already do.
        message = f"{_expected(message)}; got {_show(detail.error.get('input'), path)}"
    return Problem(path, message, line_at(lines, path))


def _show(value: Any, path: KeyPath) -> str:
    """The offending value as the user wrote it, short, and redacted if it is a secret."""
    name = next((part for part in reversed(path) if isinstance(part, str)), None)
    if is_secret_key(name):
        return MASK
    text = repr(redact_url(value) if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."
