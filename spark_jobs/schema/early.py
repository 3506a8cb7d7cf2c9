"""The objects each plan marks ``early``, kept for the imports that make their tables:
the load that creates a table builds them in the same transaction
(:mod:`spark_jobs.load.early`, which says why); and the tables whose primary keys follow
their first passes, which those imports make without it (:mod:`spark_jobs.load.late_keys`)."""

from __future__ import annotations

from collections.abc import Iterable

from spark_jobs.engines.objects import ObjectKind, Stage
from spark_jobs.load import late_keys
from spark_jobs.load.early import Objects, keep
from spark_jobs.load.late_keys import LateKey
from spark_jobs.schema.plan import TablePlan


def remember(plans: Iterable[TablePlan]) -> None:
    """Keep the early objects of the tables ``plans`` build, and the tables whose primary
    keys follow their first passes (replacing what was kept)."""
    found: list[tuple[str, str | None, str, Objects]] = []
    late: list[tuple[str, LateKey]] = []
    for plan in plans:
        if not plan.builds:
            continue
        late += [(plan.target_url, LateKey(plan.source, *plan.target_table, item.statements))
                 for item in plan.due(Stage.LOADED)
                 if item.source.kind == ObjectKind.PRIMARY_KEY]  # fmt: skip
        items = [(item.label, item.statements) for item in plan.planned
                 if item.early and item.skipped is None and item.problem is None
                 and item.statements]  # fmt: skip
        if items:
            found.append((plan.target_url, *plan.target_table, items))
    keep(found)
    late_keys.keep(late)
