"""Parse a config's YAML and remember the line of every key, for errors that name it."""

from __future__ import annotations

from typing import Any

import yaml

from config.errors import ConfigError
from config.problems import KeyPath, Problem


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


def read_yaml(text: str, path: str) -> tuple[Any, dict[KeyPath, int], list[Problem]]:
    """Parse one YAML document that must be a mapping; return it, its lines, its duplicates.

    Raises :class:`ConfigError` for YAML that cannot be read at all (with its
    line and column) or whose top level is not a mapping.
    """
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
