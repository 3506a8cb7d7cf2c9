"""The docs' type mapping is the catalogue's own: the pages ask the build for it.

The tables themselves are made at each ``make docs`` by ``docs/gen/type_tables.py``
from the catalogue (``python -m spark_jobs.engines.mapping`` prints the
overview); ``tests/test_docs.py`` checks every catalogue type is in the built
pages. Here: the pages still ask for them, and nothing pasted stands in their place.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_types_page_asks_for_the_catalogue_tables() -> None:
    text = (DOCS / "reference" / "types.md").read_text()
    for part in ("types-overview", "types-postgresql", "types-mysql"):
        assert f"<!-- generated: {part} -->" in text, f"docs/reference/types.md lost {part}"
    assert "<!-- mapping:start -->" not in text, "a pasted mapping would drift: use the marker"


def test_the_schema_objects_page_asks_for_the_translation_table() -> None:
    text = (DOCS / "reference" / "schema-objects.md").read_text()
    assert "<!-- generated: schema-objects -->" in text
