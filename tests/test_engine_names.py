"""What differs between engines is the engines wing's to say (docs/architecture.md, "The
wings of the data plane"): outside ``spark_jobs/engines/`` no module compares an engine's
name (``dialect == "postgresql"``, ``name in ("mysql", "mariadb")``,
``url.startswith("sqlite")``, a ``case "mysql":``); it asks the engine
(:func:`spark_jobs.engines.dialect_engine` and the attributes and methods of
:class:`spark_jobs.engines.base.Engine`).

``NAMED`` listed the modules that still compared names when this test was written, each
with how many comparisons it could not grow past; none is left. It stays for a new
exception, which the test takes off as soon as the module compares fewer (lower its
number) or none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("scheduler", "sources", "sinks", "config", "spark_jobs")
ENGINES_WING = ROOT / "spark_jobs" / "engines"
NAMES = frozenset({"postgresql", "postgres", "mysql", "mariadb", "sqlite", "parquet"})
"""Engine names as SQLAlchemy's backends, sluice's catalogue and its targets spell them."""

NAMED: dict[str, int] = {}


def _names_in(node: ast.AST, prefix: bool = False) -> bool:
    """Whether ``node`` is an engine's name (``prefix``: or begins with one, as a URL's
    scheme does), or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and (node.value in NAMES or prefix and any(
            node.value.startswith(name) for name in NAMES))  # fmt: skip
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_in(element, prefix) for element in node.elts)
    return False


def _comparisons(tree: ast.Module) -> Iterator[int]:
    """The lines of ``tree`` that compare something with an engine's name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(_names_in(operand) for operand in (node.left, *node.comparators)):
                yield node.lineno
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith")
              and any(_names_in(arg, prefix=True) for arg in node.args)):  # fmt: skip
            yield node.lineno
        elif isinstance(node, ast.match_case):
            patterns = [node.pattern, *getattr(node.pattern, "patterns", [])]
            if any(isinstance(p, ast.MatchValue) and _names_in(p.value) for p in patterns):
                yield node.pattern.lineno


def _found() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            if path.is_relative_to(ENGINES_WING):
                continue
            lines = sorted(_comparisons(ast.parse(path.read_text(), str(path))))
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_no_module_outside_the_engines_wing_compares_an_engines_name() -> None:
    found = _found()
    grown = {where: lines for where, lines in found.items() if len(lines) > NAMED.get(where, 0)}
    assert not grown, ("engine names compared outside spark_jobs/engines/: ask the engine "
                       f"(an attribute or method of its class) instead: {grown}")  # fmt: skip
    healed = {where: len(found.get(where, [])) for where, most in NAMED.items()
              if len(found.get(where, [])) < most}  # fmt: skip
    assert not healed, f"fewer names compared now: lower or remove them in NAMED: {healed}"


def test_the_search_sees_every_form_of_comparison() -> None:
    tree = ast.parse(
        'a = dialect == "postgresql"\n'
        'b = name in ("mysql", "mariadb")\n'
        'c = url.startswith(("sqlite:///", "x"))\n'
        'match kind:\n    case "parquet":\n        pass\n'
        'd = name == "other"\n'
    )  # fmt: skip
    assert sorted(_comparisons(tree)) == [1, 2, 3, 5]
