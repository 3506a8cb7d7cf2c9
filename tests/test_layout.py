"""The house rules of the code (docs/architecture.md, "Layout"), checked on every run.

In the rooms that ship (``scheduler``, ``sources``, ``sinks``, ``config``,
``spark_jobs``): no module over 400 lines, no class over 250, no import
circle (imports inside functions count: a lazy import still ties two rooms
together), each room importing only the rooms before it, and only the
ledger wing imports the ledger's tables.

``OVERSIZED`` listed the modules and classes that were over the limits when
this test was written, each with the size it could not grow past; every
one has been split since. It stays for a new exception, which the test
removes from the list as soon as it is no longer needed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("scheduler", "sources", "sinks", "config", "spark_jobs")
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 250
ROOM_ORDER = ("config", "spark_jobs", "sources", "sinks", "scheduler")
"""Each room imports only itself and the rooms before it."""
ROOM_ORDER_EXCEPTIONS: set[tuple[str, str]] = set()
"""None left: the SparkSession is built in spark_jobs/tasks/session.py, which the sinks use too."""
LEDGER_WING = "scheduler.ledger"
LEDGER_TABLES = "scheduler.ledger.schema"

OVERSIZED: dict[str, int] = {}


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path, ast.parse(path.read_text(), str(path))


def _imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, anywhere but under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for child in ast.walk(stmt)
    }
    package = name if (ROOT / name.replace(".", "/") / "__init__.py").exists() else (
        name.rpartition(".")[0])  # fmt: skip
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1],
                                 *([base] if base else [])])  # fmt: skip
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {module for module in found if module in known and module != name}


def test_no_module_or_class_grows_past_its_limit() -> None:
    too_big: dict[str, int] = {}
    for _, path, tree in _modules():
        where = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_big[where] = lines
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big[f"{where}::{node.name}"] = size
    grown = {k: v for k, v in too_big.items() if v > OVERSIZED.get(k, 0)}
    assert not grown, f"over the limits ({MAX_MODULE_LINES} lines a module, " \
        f"{MAX_CLASS_LINES} a class): split them into objects of their own: {grown}"
    healed = sorted(set(OVERSIZED) - set(too_big))
    assert not healed, f"within the limits now: take them off OVERSIZED: {healed}"


def test_no_import_circle() -> None:
    trees = {name: tree for name, _, tree in _modules()}
    graph = {name: _imports(name, tree, set(trees)) for name, tree in trees.items()}
    circles: list[list[str]] = []
    # Tarjan's strongly connected components: any of two or more modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, f"import circles: {circles}"


def test_each_room_imports_only_the_rooms_before_it() -> None:
    trees = {name: tree for name, _, tree in _modules()}
    rank = {room: i for i, room in enumerate(ROOM_ORDER)}
    backwards = sorted(
        (name, module)
        for name, tree in trees.items()
        for module in _imports(name, tree, set(trees))
        if rank[module.split(".")[0]] > rank[name.split(".")[0]]
        and (name, module) not in ROOM_ORDER_EXCEPTIONS
    )
    assert not backwards, f"imports against the rooms' order {ROOM_ORDER}: {backwards}"


def test_only_the_ledger_wing_imports_the_ledger_tables() -> None:
    trees = {name: tree for name, _, tree in _modules()}
    intruders = {
        name for name, tree in trees.items()
        if not (name == LEDGER_WING or name.startswith(LEDGER_WING + "."))
        and LEDGER_TABLES in _imports(name, tree, set(trees))
    }  # fmt: skip
    assert not intruders, f"read the ledger through scheduler.ledger.LedgerReads: {intruders}"


def test_the_layout_rules_see_what_they_check() -> None:
    """The checks above find something to check: the rooms and an import between them."""
    trees = {name: tree for name, _, tree in _modules()}
    assert {"scheduler.ledger", "scheduler.ledger.schema", "sources.sql"} <= set(trees)
    assert LEDGER_TABLES in _imports("scheduler.ledger.store", trees["scheduler.ledger.store"],
                                     set(trees))  # fmt: skip


def test_every_path_the_architecture_page_names_exists() -> None:
    """docs/architecture.md is read first: a path it names that moved would mislead."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([a-z_]+/[\w./]*)", page))
    missing = []
    for text in named:
        path = text.rstrip("/.")
        # `spark_jobs/jobs/import_group.run_imports`: a module's file and a name in it.
        module = re.sub(r"\.\w+$", "", path) + ".py" if not path.endswith(".py") else path
        if not (ROOT / path).exists() and not (ROOT / module).exists():
            missing.append(text)
    assert named and not missing, f"docs/architecture.md names paths that do not exist: {missing}"
