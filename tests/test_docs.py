"""The docs site builds, strictly, and says everything the code knows (``make docs``).

The strict build fails on a broken link, a page left out of the navigation,
and a config key or CLI option without words (the generators refuse them).
Then the built pages are read as a reader gets them: every key of the
config's JSON Schema, every command and option of the CLI and every type of
each engine's catalogue must appear in them. The README stays short, and its
links resolve.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from config.models import editor_schema
from scheduler.cli import app
from spark_jobs.engines.mysql.types import RULES as MYSQL_RULES
from spark_jobs.engines.postgresql.types import RULES as POSTGRESQL_RULES

ROOT = Path(__file__).resolve().parent.parent
README_LINES = 200

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="the docs extra is not installed (pip install -e '.[docs]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The strictly built site: each page's path → its HTML."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                            str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert built.returncode == 0, f"make docs fails:\n{built.stderr[-4000:]}"
    return {str(p.relative_to(out)): p.read_text() for p in out.rglob("*.html")}


def _page(site: dict[str, str], name: str) -> str:
    """A page's article, as HTML."""
    return site[f"{name}/index.html"].split("<article", 1)[-1].split("</article>", 1)[0]


def _code(name: str) -> str:
    """``name`` as the pages show it in a code span."""
    return f"<code>{html.escape(name, quote=False)}</code>"


def _schema_keys() -> set[str]:
    schema = editor_schema()
    return {key for model in [schema, *schema["$defs"].values()]
            for key in model.get("properties", {})}  # fmt: skip


def test_every_config_key_is_in_the_configuration_reference(site: dict[str, str]) -> None:
    page = _page(site, "reference/configuration")
    missing = sorted(k for k in _schema_keys() if _code(k) not in page)
    assert not missing, f"config keys missing from the configuration reference: {missing}"


def test_every_cli_command_and_option_is_in_the_cli_reference(site: dict[str, str]) -> None:
    import typer.main

    page = _page(site, "reference/cli")
    group = typer.main.get_command(app)
    names = [f">sluice {name}<" for name in group.commands]  # a heading each
    for command in [group, *group.commands.values()]:
        for param in command.params:
            option = getattr(param, "param_type_name", "") == "option"
            shown = [*param.opts, *param.secondary_opts] if option else [param.name.upper()]
            names += [_code(name) for name in shown]
    missing = [name for name in names if name not in page]
    assert not missing, f"CLI commands or options missing from the CLI reference: {missing}"


def test_every_catalogue_type_is_in_the_types_page(site: dict[str, str]) -> None:
    page = _page(site, "reference/types")
    for engine, rules in (("PostgreSQL", POSTGRESQL_RULES), ("MySQL", MYSQL_RULES)):
        missing = [t for t in rules if _code(t) not in page]
        assert not missing, f"{engine} catalogue types missing from the types page: {missing}"


def test_every_grafana_panel_and_query_is_on_the_metrics_page(site: dict[str, str]) -> None:
    import json

    page = _page(site, "operations/metrics")
    board = json.loads((ROOT / "examples" / "grafana" / "sluice.json").read_text())
    panels = [p for p in board["panels"] if p.get("type") != "row"]
    missing = [panel["title"] for panel in panels
               if html.escape(panel["title"], quote=False) not in page
               or not all(_code(t["expr"]) in page for t in panel["targets"])]  # fmt: skip
    assert panels and not missing, f"Grafana panels missing from the metrics page: {missing}"


def test_every_page_is_built(site: dict[str, str]) -> None:
    pages = {p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")}
    for page in pages:
        if page.name == "index" or page.parts[0] == "gen":
            continue
        assert f"{page}/index.html" in site, f"docs/{page}.md was not built"


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES, "README.md is too long: move it into docs/"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md links to {target}, which is not there"


def test_the_two_commands_are_as_they_were() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make demo    # generate two SQLite databases" in text
    assert "make test    # the test suite" in text


def test_a_key_without_words_fails_the_build_by_name() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "gen"))
    try:
        from config_reference import undescribed
    finally:
        sys.path.remove(str(ROOT / "docs" / "gen"))
    schema = {"properties": {"ledger": {"type": "string", "description": "Where."}},
              "$defs": {"BufferConfig": {"properties": {"capacity": {"type": "integer"}}}}}
    assert undescribed(schema) == ["BufferConfig.capacity"]
    assert undescribed(editor_schema()) == [], "config keys without a description"
