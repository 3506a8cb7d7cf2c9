"""Tables by pattern: one ``tables:`` source becomes a source per table of its database.

A SQL source may name many tables instead of one::

    shop:
      kind: sql
      url: postgresql+psycopg://app@db1/shop
      tables: ["public.*", "!public.audit_*"]   # globs; "!" excludes
      target: warehouse                          # or warehouse.schema
      overrides: {events: {key: [day, seq], where: "day > '2024-01-01'"}}

At load time (:func:`expand_tables`, before the config is validated) the
database is inspected once: every table the patterns select becomes a plain
source named ``shop.<table>``, keyed by its primary key, going to the
same-named table of the target, with the group's other keys (limits, buffer,
mode…) and its override merged in. Everything after loading sees only plain
sources: the budget is per database URL, so the tables share the group's
``limits:``; a strategy that names the group gets a ``fair`` node over its
tables in its place (tables the strategy names on their own are left out
of it).

What the inspection found (each table's name and primary key, and with
``order: foreign_keys`` the tables it refers to) is kept as a
:class:`TableCatalog`: a reload or a ``spark-submit`` import job expands
from it without connecting again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.base import sqlite_url_at
from config.catalog import FoundTable, TableCatalog, inspect_tables, selected
from config.problems import KeyPath, Problem
from config.secrets import redact_url

GROUP_ONLY = ("tables", "overrides", "order")
"""Keys of a ``tables:`` source that are not keys of the sources it becomes."""
NOT_OVERRIDABLE = ("kind", "url", "table", "tables", "overrides", "order")
ORDERS = ("none", "foreign_keys")


class Problems(list[Problem]):
    """The problems an expansion found, each at its key path (lines come later)."""

    def add(self, path: KeyPath, message: str) -> None:
        """One more problem at ``path``."""
        self.append(Problem(path, message, None))


@dataclass
class Expansion:
    """The config data with every group expanded, and what it took."""

    data: Any
    catalog: TableCatalog
    members: dict[str, list[str]]  # group → its sources' names, in table order
    problems: Problems
    # Where each new source's keys were written: the group's key or the override's.
    origins: dict[KeyPath, KeyPath] = field(default_factory=dict)

    def written_at(self, path: KeyPath) -> KeyPath:
        """``path`` in a new source as the user wrote it (``sources.shop.overrides.t.key``)."""
        for end in range(min(len(path), 3), 1, -1):
            if path[:end] in self.origins:
                return (*self.origins[path[:end]], *path[end:])
        return path


def expand_tables(data: Any, base_dir: Path, catalog: TableCatalog | None = None) -> Expansion:
    """Replace each ``tables:`` source of ``data`` by one source per table it selects.

    :meth:`Expansion.written_at` maps a key of a new source back to the key
    the user wrote (the group's, or the override's), so that a problem in
    one points into the file once, not once per table. With ``catalog``
    (what an earlier expansion found), no database is inspected. Problems
    (a dead database, a table without a key, an override naming no
    selected table…) are returned, each at its key path.
    """
    found = TableCatalog()
    result = Expansion(data, found, {}, Problems())
    sources = data.get("sources") if isinstance(data, Mapping) else None
    if not isinstance(sources, Mapping) or not any(_is_group(s) for s in sources.values()):
        return result
    expanded: dict[str, Any] = {}
    for name, raw in sources.items():
        if not _is_group(raw):
            expanded[name] = raw
            continue
        known = catalog.groups.get(name) if catalog is not None else None
        before = len(result.problems)
        tables = _group_tables(name, raw, base_dir, known, result.problems)
        if tables is None or len(result.problems) > before:
            continue
        found.groups[name] = tables
        for member, entry in _members(name, raw, tables, result):
            if member in sources or member in expanded:
                result.problems.add(
                    ("sources", name, "tables"),
                    f"table {member.split('.', 1)[1]!r} would be source {member!r}, "
                    "which the file already defines",
                )
                continue
            expanded[member] = entry
            result.members.setdefault(name, []).append(member)
    result.data = {**data, "sources": expanded}
    strategy = data.get("strategy")
    if isinstance(strategy, Mapping):
        result.data["strategy"] = _strategy_with_groups(strategy, result.members, result.problems)
    return result


def _is_group(raw: Any) -> bool:
    return isinstance(raw, Mapping) and raw.get("kind") == "sql" and "tables" in raw


def _group_tables(
    name: str,
    raw: Mapping[str, Any],
    base_dir: Path,
    known: list[FoundTable] | None,
    problems: Problems,
) -> list[FoundTable] | None:
    """The tables ``raw``'s patterns select, in name order; None after a problem."""
    at: KeyPath = ("sources", name)
    patterns = raw.get("tables")
    patterns = [patterns] if isinstance(patterns, str) else patterns
    if not (isinstance(patterns, list) and patterns and all(_pattern(p) for p in patterns)):
        problems.add(
            (*at, "tables"), 'expected table patterns such as ["public.*", "!public.audit_*"]'
        )
        return None
    if "table" in raw:
        problems.add((*at, "table"), "give table: (one table) or tables: (patterns), not both")
    if "key" in raw:
        problems.add(
            (*at, "key"),
            "with tables:, each table is keyed by its primary key; "
            "give another key under overrides: {TABLE: {key: …}}",
        )
    if raw.get("order", "none") not in ORDERS:
        problems.add((*at, "order"), f"expected one of: {', '.join(ORDERS)}")
    target = raw.get("target")
    if not isinstance(target, str) or not 1 <= len(target.split(".")) <= 2:
        problems.add(
            (*at, "target"),
            "with tables:, target names a target (TARGET) or a schema "
            "of one (TARGET.schema): each table goes to the "
            "same-named table there",
        )
    overrides = raw.get("overrides") or {}
    if not isinstance(overrides, Mapping) or not all(
        isinstance(v, Mapping) for v in overrides.values()
    ):
        problems.add((*at, "overrides"), "expected a mapping of TABLE: {key: …, where: …}")
        return None
    url = redact_url(str(raw.get("url")))
    if known is None:
        try:
            known = inspect_tables(
                sqlite_url_at(str(raw.get("url")), base_dir),
                patterns,
                foreign_keys=raw.get("order") == "foreign_keys",
            )
        except Exception as error:  # a dead database, a bad URL: the user's to fix
            reason = (str(error).strip().splitlines() or [""])[0]
            problems.add(
                (*at, "url"), f"cannot list the tables of {url}: {type(error).__name__}: {reason}"
            )
            return None
    chosen = [t for t in known if selected(t, patterns)]
    names = [t.name for t in chosen]
    if not chosen:
        problems.add((*at, "tables"), f"no table matches {patterns} in {url}")
    for table in overrides:
        if table not in names:
            problems.add(
                (*at, "overrides", table),
                f"names table {table!r}, which tables: "
                f"does not select (selected: {', '.join(names)})",
            )
    for t in chosen:
        if not t.key and "key" not in overrides.get(t.name, {}):
            problems.add(
                (*at, "tables"),
                f"table {t.name!r} has no primary key: give its key "
                f"under overrides: {{{t.name}: {{key: [COLUMN, …]}}}}, "
                f'or leave it out with "!{t.name}" in tables:',
            )
    return chosen


def _pattern(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip("!"))


def _members(
    group: str,
    raw: Mapping[str, Any],
    tables: list[FoundTable],
    result: Expansion,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each table's source: the group's keys, its own table, key and target, its override."""
    shared = {k: v for k, v in raw.items() if k not in (*GROUP_ONLY, "target")}
    overrides = raw.get("overrides") or {}
    at: KeyPath = ("sources", group)
    names = {t.name for t in tables}
    for t in tables:
        member = f"{group}.{t.name}"
        entry: dict[str, Any] = {
            **shared,
            "table": t.name,
            "key": list(t.key) if len(t.key) != 1 else t.key[0],
            "target": f"{raw['target']}.{t.name}",
        }
        if raw.get("order") == "foreign_keys":
            # Its parents in the group; a self-reference is the table's own order.
            entry["depends_on"] = [
                f"{group}.{r}" for r in t.refers_to if r != t.name and r in names
            ]
        result.origins[("sources", member)] = at
        for key in entry:
            result.origins[("sources", member, key)] = (*at, key)
        for key in ("table", "key", "target", "depends_on"):
            result.origins[("sources", member, key)] = (*at, "tables")
        for key, value in overrides.get(t.name, {}).items():
            if key in NOT_OVERRIDABLE:
                result.problems.add(
                    (*at, "overrides", t.name, key),
                    f"cannot be set per table (it is the group's: one of "
                    f"{', '.join(NOT_OVERRIDABLE)})",
                )
                continue
            entry[key] = value
            result.origins[("sources", member, key)] = (*at, "overrides", t.name, key)
        yield member, entry


def find_cycle(parents: Mapping[str, list[str]]) -> list[str]:
    """One cycle of the graph ``node → parents`` (its nodes in order), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for parent in parents.get(node, []):
            if state.get(parent) == 1:
                return path[path.index(parent) :]
            if parent not in state:
                cycle = visit(parent)
                if cycle:
                    return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(parents):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def _strategy_with_groups(
    strategy: Mapping[str, Any], members: dict[str, list[str]], problems: Problems
) -> dict[str, Any]:
    """``strategy`` with each group's name replaced by a ``fair`` node over its tables.

    Tables the strategy names on their own keep their place and are left out
    of their group's node; a group all of whose tables are named elsewhere
    drops out.
    """
    named = set(_names(strategy))

    def node_of(group: str) -> dict[str, Any] | None:
        left = [m for m in members[group] if m not in named]
        return {"fair": dict.fromkeys(left, 1)} if left else None

    def rewrite(node: Any) -> Any:
        if isinstance(node, str):
            return node_of(node) if node in members else node
        if not isinstance(node, Mapping):
            return node
        out = dict(node)
        if isinstance(node.get("prefer"), list):
            out["prefer"] = [n for n in (rewrite(c) for c in node["prefer"]) if n is not None]
        fair = node.get("fair")
        if isinstance(fair, Mapping) and any(k in members for k in fair):
            out["fair"] = [
                {"node": n, "weight": w}
                for n, w in ((rewrite(k), w) for k, w in fair.items())
                if n is not None
            ]
        elif isinstance(fair, list):
            out["fair"] = [
                {**e, "node": rewrite(e.get("node"))} if isinstance(e, Mapping) else e
                for e in fair
                if not (isinstance(e, Mapping) and rewrite(e.get("node")) is None)
            ]
        return out

    shares = strategy.get("shares")
    if isinstance(shares, Mapping):
        for name in shares:
            if name in members:
                problems.add(
                    ("strategy", "shares", name),
                    f"{name!r} is a group of tables; shares bound single sources: name "
                    f"its tables ({', '.join(members[name][:3])}…)",
                )
    return rewrite(strategy)


def _names(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for child in node:
            yield from _names(child)
    elif isinstance(node, Mapping):
        for key in ("prefer", "node"):
            yield from _names(node.get(key))
        fair = node.get("fair")
        yield from (fair if isinstance(fair, Mapping) else _names(fair))

