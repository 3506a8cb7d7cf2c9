"""The cutover's schema step: the target made ready to take the application's writes.

After the final pass (the application's writes stopped), :func:`make_ready`
builds what the tables sluice made still lack (every stage: the foreign keys
of streamed tables, triggers and their functions, whatever a run left), sets
every target sequence after its source's, and compares every target table
with its source, object by object. The target may take over only when
nothing is lacking: each object the source has is there, or skipped by the
config (listed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from config.models import SluiceConfig
from spark_jobs.engines.objects import Stage
from spark_jobs.schema.build import build_stage
from spark_jobs.schema.compare import lacking
from spark_jobs.schema.plan import plan_schema
from spark_jobs.schema.sequences import set_sequences


@dataclass
class Readiness:
    """What the schema step did and found: lines to show, and what stops READY."""

    built: list[str] = field(default_factory=list)
    sequences: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        """The findings as one JSON object."""
        return {"built": self.built, "sequences": self.sequences, "skipped": self.skipped,
                "problems": self.problems}  # fmt: skip


def make_ready(cfg: SluiceConfig, sources: Iterable[str] | None = None) -> Readiness:
    """Build what is left, set the sequences, and say what any target table still lacks."""
    plans = plan_schema(cfg, sources)
    found = Readiness()
    found.problems += [p for plan in plans for p in plan.problems]
    report = build_stage(plans, tuple(Stage))
    found.built = report.built
    found.problems += report.failures
    sequences = set_sequences(plans)
    found.sequences, found.problems = sequences.lines, found.problems + sequences.problems
    for source, missing in lacking(plans).items():
        if missing:
            whose = "sluice's" if next(p for p in plans if p.source == source).made else (
                "the operator's")  # fmt: skip
            found.problems.append(
                f"{source}: the target table ({whose}) lacks "
                + ", ".join(f"{m.label} ({m.source.definition})" for m in missing)
            )
    found.skipped = [f"{plan.source}: {item.label} skipped ({item.skipped})"
                     for plan in plans for item in plan.planned if item.skipped]  # fmt: skip
    return found
