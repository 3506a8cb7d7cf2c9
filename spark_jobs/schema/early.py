"""The objects each plan marks ``early``, kept for the imports that make their tables:
the load that creates a table builds them in the same transaction
(:mod:`spark_jobs.load.early`, which says why)."""

from __future__ import annotations

from collections.abc import Iterable

from spark_jobs.load.early import Objects, keep
from spark_jobs.schema.plan import TablePlan


def remember(plans: Iterable[TablePlan]) -> None:
    """Keep the early objects of the tables ``plans`` build (replacing what was kept)."""
    found: list[tuple[str, str | None, str, Objects]] = []
    for plan in plans:
        if not plan.builds:
            continue
        items = [(item.label, item.statements) for item in plan.planned
                 if item.early and item.skipped is None and item.problem is None
                 and item.statements]  # fmt: skip
        if items:
            found.append((plan.target_url, *plan.target_table, items))
    keep(found)
