"""The daemon's side of a target's schema objects: each table's built as soon as it may be.

A table sluice made holds its columns and key while its rows go in. Once its
first pass is done (its source found at its end, keyset or sweep or
incremental or a stream's full load, and no batch of it unfinished in the
ledger), its indexes and constraints are built (:data:`Stage.LOADED`); once
both ends of a foreign key are done, the key (:data:`Stage.PARENTS`). The
builds run on a thread of their own, one table group at a time, each with the
target's ``schema_jobs`` connections; the loop never waits for them, and a
batch that writes into a table while one of its indexes is built waits for
the build's lock only.

A run ``--until-drained`` ends once its builds are done (:meth:`SchemaBuilds.finish`);
an object that cannot be built is logged with the server's reason and makes
the run exit 1, as a dead batch does. Triggers and the foreign keys of
streamed tables wait for ``sluice cutover``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping

import sqlalchemy as sa

from config.errors import ConfigError
from config.models import SluiceConfig
from scheduler.ledger import UNFINISHED, Ledger
from sources.queueing import QueueingLimitedSource
from spark_jobs.engines.objects import ObjectKind, Stage
from spark_jobs.schema import early
from spark_jobs.schema.build import BuildReport, build_first, build_stage
from spark_jobs.schema.plan import TablePlan, plan_schema

log = logging.getLogger("sluice.daemon")


class SchemaError(ConfigError):
    """Source objects with no way into their targets: the run does not start."""


def plan_for_run(cfg: SluiceConfig, away: Mapping[str, str] | None = None) -> list[TablePlan]:
    """Every source table's objects; raises :class:`SchemaError` naming each object that has
    no translation, with the fix, before any batch. ``away``: source databases that did not
    answer at start (URL → why): their tables' objects are left to the cutover."""
    try:
        plans = plan_schema(cfg, away=away)
    except sa.exc.DBAPIError as error:
        # A database away: its source's check says so next; the cutover builds what is left.
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        log.warning("schema objects: not read (%s); nothing is built by this run", reason)
        early.remember([])
        return []
    problems = [problem for plan in plans for problem in plan.problems]
    problems += build_first(plans)
    if problems:
        raise SchemaError(
            "schema objects with no way into their target (skip them under the source's "
            "schema: {skip: [NAME]}, or give their definition under schema: {define: "
            "{NAME: SQL}}):\n  " + "\n  ".join(problems)
        )
    early.remember(plans)  # the imports that make the tables build these with them
    return plans


class SchemaBuilds:
    """Builds each table's objects once its first pass, and its parents', are done."""

    def __init__(
        self,
        plans: list[TablePlan],
        queues: Mapping[str, QueueingLimitedSource],
        ledger: Ledger,
        build: Callable[[list[TablePlan], tuple[Stage, ...]], BuildReport] = build_stage,
    ) -> None:
        self.plans = {p.source: p for p in plans if p.builds and p.due(Stage.LOADED, Stage.PARENTS)}
        self.queues = queues
        self.ledger = ledger
        self._build = build
        self.done: set[str] = set()  # sources whose first pass is done, for good
        self._loaded: set[str] = set()  # sources whose LOADED objects were asked for
        self._keyed: set[str] = set()  # sources whose foreign keys were asked for
        self._parents = _parents(plans)
        # Whose first pass is looked for: the tables built here, and their parents.
        self._watched = set(self.plans) | {p for ps in self._parents.values() for p in ps}
        self.report = BuildReport()
        self._work: queue.Queue[tuple[list[TablePlan], tuple[Stage, ...]] | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._lock = threading.Lock()
        self._asking = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the builder's thread (only where there is something to build)."""
        if self.plans and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="schema-builds", daemon=True)
            self._thread.start()

    def poll(self) -> None:
        """Look for tables whose first pass is done (a background job, every second)."""
        waiting = sorted(self._watched - self.done)
        # Settled, not only exhausted: a batch the loop took from the buffer may not be in
        # the ledger yet.
        at_end = [s for s in waiting if s in self.queues and self.queues[s].settled]
        done = set()
        if at_end:
            unfinished = {m.source for m in self.ledger.reads.batches(
                (*UNFINISHED, "failed"), at_end)}  # fmt: skip
            done = {source for source in at_end if source not in unfinished}
        self._ask(done)

    def _ask(self, done: set[str]) -> None:
        """Mark ``done`` and ask for the builds that makes due (one asker at a time: the poll
        and :meth:`finish` may ask at once)."""
        with self._asking:
            self.done |= done
            loaded = [self.plans[s] for s in sorted(self.done & set(self.plans) - self._loaded)]
            if loaded:
                self._loaded.update(p.source for p in loaded)
                self._submit(loaded, (Stage.LOADED,))
            keyed = [p for s, p in sorted(self.plans.items())
                     if s not in self._keyed and p.due(Stage.PARENTS)
                     and {s, *self._parents.get(s, ())} <= self.done]  # fmt: skip
            if keyed:
                self._keyed.update(p.source for p in keyed)
                self._submit(keyed, (Stage.PARENTS,))

    def finish(self, timeout: float | None = None) -> BuildReport:
        """Build what is left of every table (the run is drained: every first pass is done)
        and wait for the builds; what they built and what failed."""
        self._ask(set(self._watched))
        self.start()
        self._idle.wait(timeout)
        return self.report

    def stop(self) -> None:
        """End the builder's thread after the build running now, if any."""
        if self._thread is not None:
            self._work.put(None)

    def _submit(self, plans: list[TablePlan], stages: tuple[Stage, ...]) -> None:
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._work.put((plans, stages))

    def _run(self) -> None:
        while True:
            items = [self._work.get()]
            # What was asked meanwhile goes in the same builds: the catalogues are read once
            # for all of its tables (1,000 small tables end their first pass within seconds).
            while not self._work.empty():
                items.append(self._work.get_nowait())
            work = [item for item in items if item is not None]
            for stage in (Stage.LOADED, Stage.PARENTS):
                plans = [p for plans, stages in work if stage in stages for p in plans]
                if plans:
                    self._build_now(plans, stage)
            with self._lock:
                self._pending -= len(work)
                if self._pending == 0:
                    self._idle.set()
            if len(work) < len(items):
                return

    def _build_now(self, plans: list[TablePlan], stage: Stage) -> None:
        try:
            self.report.add(self._build(plans, (stage,)))
        except Exception as error:  # noqa: BLE001 - a target away: the cutover builds it
            text = f"{', '.join(p.source for p in plans)}: schema objects not built: {error}"
            log.error("%s (the cutover builds what is missing)", text)
            self.report.failed.append(text)


def _parents(plans: list[TablePlan]) -> dict[str, set[str]]:
    """Per source, the sources of the tables its foreign keys refer to (sluice's ones)."""
    by_table = {(p.source_url, p.source_table): p.source for p in plans}
    found: dict[str, set[str]] = {}
    for plan in plans:
        for item in plan.planned:
            fk = item.source.foreign
            if item.source.kind == ObjectKind.FOREIGN_KEY and fk is not None:
                parent = by_table.get((plan.source_url, fk.refers_to))
                if parent is not None and parent != plan.source:
                    found.setdefault(plan.source, set()).add(parent)
    return found
