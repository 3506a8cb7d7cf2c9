"""The wings of the data plane (docs/architecture.md, "The wings of the data plane"), checked
on every run.

``spark_jobs/`` is a house of wings, one folder each, on the floors of
:data:`FLOORS`: a module imports modules of its own wing and of the floors
beneath it, never of a floor above or of a sibling wing on its own floor
(imports inside functions and under ``if TYPE_CHECKING:`` count: either ties
the two wings together), and never a name another wing keeps to itself
(``_name``). Every module lives in a wing, and
each wing's ``__init__`` says what it does. The room order of the whole
project (``config`` < ``spark_jobs`` < ``sources`` …) is tests/test_layout.py's.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOUSE = ROOT / "spark_jobs"
FLOORS = (("engines",), ("common",), ("tasks",), ("read",), ("load",),
          ("changes", "verify", "schema"), ("jobs",))  # fmt: skip
"""Beneath to top: each wing imports only itself and the wings of the floors before it."""
WINGS = tuple(wing for floor in FLOORS for wing in floor)


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(HOUSE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path, ast.parse(path.read_text(), str(path))


def _wing(module: str) -> str | None:
    """The wing of a module of ``spark_jobs`` (None for the house's own ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _uses(tree: ast.Module) -> Iterator[tuple[str, str | None, int]]:
    """Each module of ``spark_jobs`` ``tree`` imports (anywhere: at its top, in a function,
    for its types), with the name it takes from it (None: the module itself), and the line;
    and each ``_name`` it reads off a module it imported as a whole (``mod._name``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spark_jobs"):
                    yield alias.name, None, node.lineno
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spark_jobs"):
            assert node.level == 0, "spark_jobs imports absolutely"
            base = node.module or ""
            for alias in node.names:
                if _is_module(f"{base}.{alias.name}"):
                    yield f"{base}.{alias.name}", None, node.lineno
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                else:
                    yield base, alias.name, node.lineno
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):  # fmt: skip
            yield aliases[node.value.id], node.attr, node.lineno


@functools.cache
def _crossings() -> tuple[list[str], list[str]]:
    """Imports of a wing not beneath, and of another wing's private names: ``where: what``."""
    rank = {wing: i for i, floor in enumerate(FLOORS) for wing in floor}
    upward: list[str] = []
    private: list[str] = []
    for name, path, tree in _modules():
        mine = _wing(name)
        if mine is None:
            continue
        where = path.relative_to(ROOT).as_posix()
        for module, taken, line in _uses(tree):
            theirs = _wing(module)
            if theirs is None or theirs == mine:
                continue
            if rank[theirs] >= rank[mine]:
                upward.append(f"{where}:{line}: {module} ({mine}, not beneath {theirs})")
            if taken is not None and taken.startswith("_") and not taken.startswith("__"):
                private.append(f"{where}:{line}: {module}.{taken}")
    return upward, private


def test_every_module_lives_in_a_wing_that_says_what_it_does() -> None:
    folders = {p.name for p in HOUSE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(WINGS), f"wings not in WINGS, or gone: {folders ^ set(WINGS)}"
    loose = sorted(p.name for p in HOUSE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside any wing of spark_jobs/: put each in its wing: {loose}"
    silent = [w for w in WINGS if not ast.get_docstring(ast.parse((HOUSE / w / "__init__.py")
                                                                  .read_text()))]  # fmt: skip
    assert not silent, f"wings whose __init__ does not say what they do: {silent}"


def test_each_wing_imports_only_the_floors_beneath_it() -> None:
    upward, _ = _crossings()
    floors = " < ".join("/".join(floor) for floor in FLOORS)
    assert not upward, (f"imports of a wing above or beside ({floors}): move the function "
                        f"to the wing where it belongs: {upward}")  # fmt: skip


def test_no_wing_takes_another_wings_private_names() -> None:
    _, private = _crossings()
    assert not private, f"private names taken from another wing: make them public: {private}"


def test_the_wing_rules_see_what_they_check() -> None:
    """The checks find the imports they judge: the import job's of the load wing, and one
    reached by a module alias; and they would flag one that went up or took a private name."""
    uses = {name: set(_uses(tree)) for name, _, tree in _modules()}
    assert any(m == "spark_jobs.load.write" for m, _, _ in uses["spark_jobs.jobs.import_job"])
    assert any(m.startswith("spark_jobs.engines") for m, _, _ in uses["spark_jobs.load.upsert"])
    tree = ast.parse("from spark_jobs.jobs.import_job import run_import\n"
                     "from spark_jobs.load import staging\n"
                     "def f():\n    return staging._staging_parts\n")  # fmt: skip
    found = set(_uses(tree))
    assert ("spark_jobs.jobs.import_job", "run_import", 1) in found
    assert ("spark_jobs.load.staging", "_staging_parts", 4) in found
