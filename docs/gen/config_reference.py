"""The configuration reference, made from the config models' JSON Schema (``sluice schema``).

Every key of every section is a row: its type, its default and its description
(the field's docstring). A key without a description is an error that names
it, so that a key added without words fails the docs build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from config.base import Model, parse_bytes, parse_duration
from config.models import editor_schema

ROOT = "SluiceConfig"


class MissingDescription(ValueError):
    """Config keys whose JSON Schema has no description."""


def config_reference() -> str:
    """The reference as Markdown: one section per model, its keys in a table."""
    schema = editor_schema()
    defs: dict[str, dict[str, Any]] = schema["$defs"]
    models = {ROOT: schema, **defs}
    missing = undescribed(schema)
    if missing:
        raise MissingDescription(
            "these config keys have no description (write a docstring under the field in "
            "config/): " + ", ".join(missing)
        )
    paths = _paths(models)
    kinds = _special_kinds()
    out: list[str] = []
    for name in _order(models):
        model = models[name]
        where = ", ".join(f"`{p}`" for p in paths.get(name, [])) or "the top of the file"
        out += [f"## {_title(name, paths)} {{#{_anchor(name)}}}", ""]
        if name != ROOT:
            out += [f"At {where}. {_text(model.get('description', ''))}".rstrip(), ""]
        required = set(model.get("required", []))
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for key, prop in model.get("properties", {}).items():
            kind = _type(prop)
            if (name, key) in kinds:  # a number in the schema, written 5m or 10GiB
                nullable = any(o.get("type") == "null" for o in prop.get("anyOf", []))
                kind = kinds[(name, key)] + (" or null" if nullable else "")
            default = "required" if key in required else _default(prop)
            out.append(f"| `{key}` | {kind} | {default} | {_cell(prop['description'])} |")
        if "oneOf" in model:
            ways = " or ".join(", ".join(f"`{k}`" for k in o["required"]) for o in model["oneOf"])
            out += ["", f"Give {ways}."]
        out.append("")
    return "\n".join(out)


def undescribed(schema: dict[str, Any]) -> list[str]:
    """``Model.key`` of every property in ``schema`` (and its ``$defs``) with no description."""
    models = {ROOT: schema, **schema.get("$defs", {})}
    return [
        f"{name}.{key}"
        for name, model in models.items()
        for key, prop in model.get("properties", {}).items()
        if not str(prop.get("description", "")).strip()
    ]


def schema_keys() -> set[str]:
    """Every key name of the config's JSON Schema (for the docs test)."""
    schema = editor_schema()
    models = [schema, *schema["$defs"].values()]
    return {key for model in models for key in model.get("properties", {})}


def _order(models: dict[str, dict[str, Any]]) -> list[str]:
    """The models as a reader meets them: the file's top first, then breadth first."""
    seen, queue = [ROOT], [ROOT]
    while queue:
        for ref in _refs(models[queue.pop(0)]):
            if ref not in seen:
                seen.append(ref)
                queue.append(ref)
    return seen + sorted(set(models) - set(seen))


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"].rsplit("/", 1)[-1]
        for key, value in node.items():
            if key != "$defs":
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _paths(models: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Each model → the YAML paths it is written at (``sources.NAME.buffer``)."""
    found: dict[str, list[str]] = {}
    queue = [(ROOT, "")]
    while queue:
        name, at = queue.pop(0)
        for key, prop in models[name].get("properties", {}).items():
            path = f"{at}.{key}" if at else key
            for ref, more in _reached(prop):
                target = path + more
                if ref not in found:
                    found[ref] = []
                    queue.append((ref, target))
                if target not in found[ref] and len(found[ref]) < 4:
                    found[ref].append(target)
    return found


def _reached(prop: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The models a property holds, with what the path gains on the way (``.NAME``)."""
    if "$ref" in prop:
        yield prop["$ref"].rsplit("/", 1)[-1], ""
    for option in prop.get("anyOf", []) + prop.get("oneOf", []):
        yield from _reached(option)
    if isinstance(prop.get("additionalProperties"), dict):
        for ref, more in _reached(prop["additionalProperties"]):
            yield ref, ".NAME" + more
    if isinstance(prop.get("items"), dict):
        for ref, more in _reached(prop["items"]):
            yield ref, "[]" + more


def _title(name: str, paths: dict[str, list[str]]) -> str:
    if name == ROOT:
        return "The file"
    first = paths.get(name, [name])[0]
    return f"`{first}`" + (" (and more)" if len(paths.get(name, [])) > 1 else "")


def _anchor(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    for union in ("anyOf", "oneOf"):
        if union in prop:
            return " or ".join(_type(option) for option in prop[union])
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object":
        values = prop.get("additionalProperties")
        return f"map of name → {_type(values)}" if isinstance(values, dict) and values else "map"
    return str(kind or "any")


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return "—"
    value = prop["default"]
    if isinstance(value, dict) and value and ("$ref" in prop or "anyOf" in prop):
        return "its section's defaults"
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


def _text(text: str) -> str:
    """A docstring as one line of Markdown (reST's double backticks made single)."""
    return re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


def _special_kinds() -> dict[tuple[str, str], str]:
    """(model, key) → ``duration`` or ``size`` for fields the YAML writes as ``5m`` or
    ``10GiB`` (in the JSON Schema they are plain numbers)."""
    found: dict[tuple[str, str], str] = {}
    for model in _models(Model):
        for key, field in model.model_fields.items():
            funcs = {getattr(m, "func", None) for m in field.metadata}
            name = field.alias or key
            if parse_duration in funcs:
                found[(model.__name__, name)] = "duration"
            elif parse_bytes in funcs:
                found[(model.__name__, name)] = "size"
    return found


def _models(base: type[Model]) -> Iterator[type[Model]]:
    for sub in base.__subclasses__():
        yield sub
        yield from _models(sub)
