"""The README's type mapping is the catalogue's own (``python -m spark_jobs.engines.mapping``)."""

from __future__ import annotations

import re
from pathlib import Path

from spark_jobs.engines.mapping import mapping_table
from spark_jobs.engines.objects_mapping import objects_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_holds_the_mapping_the_catalogue_makes() -> None:
    text = README.read_text()
    found = re.search(r"<!-- mapping:start -->\n(.*?)\n<!-- mapping:end -->", text, re.S)
    assert found is not None, "README.md lost its mapping markers"
    assert found.group(1).strip() == mapping_table().strip(), (
        "README.md's mapping is not the catalogue's: paste `python -m "
        "spark_jobs.engines.mapping` between its markers"
    )


def test_the_readme_holds_the_schema_objects_translation_the_code_makes() -> None:
    text = README.read_text()
    found = re.search(r"<!-- objects:start -->\n(.*?)\n<!-- objects:end -->", text, re.S)
    assert found is not None, "README.md lost its objects markers"
    assert found.group(1).strip() == objects_table().strip(), (
        "README.md's schema objects are not the translation's: paste `python -m "
        "spark_jobs.engines.objects_mapping` between its markers"
    )
