"""A scenario: one migration of the shared sources into a fresh target.

A :class:`Migration` is ``sluice run`` processes on one config, with a
PostgreSQL ledger and target of their own: :meth:`Migration.start` runs
``sluice run CONFIG --until-drained`` as a real process
(:mod:`tests.chaos.procs`) and :meth:`Migration.record` adds the scenario's
line to the chaos table. A :class:`Scenario` is the migration of the world:
an SQS queue filled with the world's bodies, and the YAML config that ties
them to the shared SQL sources (directly, or through TCP proxies the
scenario cuts; the ledger too); :meth:`Scenario.verify` checks the target
against the sources (:mod:`tests.chaos.checks`).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import sqlalchemy as sa

from tests.chaos.checks import Check, verify
from tests.chaos.procs import SLUICE, Proc, base_env, sluice
from tests.chaos.world import World


@dataclass
class Outcome:
    """One scenario's line in the chaos table."""

    scenario: str
    injected: int  # kills and faults
    rows_checked: int
    duplicates: int
    missing: int
    seconds: float
    notes: list[str] = field(default_factory=list)


RESULTS: list[Outcome] = []
"""Every verified scenario of this session, for :mod:`tests.chaos.report`."""


# -- a scenario ------------------------------------------------------------------------


def sqs_client(endpoint: str) -> Any:
    """A boto3 SQS client for moto."""
    return boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


class Migration:
    """``sluice run`` processes on one config, with the ledger and target they write.

    ``ledger_url`` and ``target_url`` are PostgreSQL databases the harness
    reads directly (never through a proxy the daemons may be given). The
    subclass writes :attr:`config` before the first :meth:`start`.
    """

    def __init__(self, name: str, folder: Path, ledger_url: str, target_url: str) -> None:
        self.name = name
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ledger_url = ledger_url
        self.target_url = target_url
        self.config = folder / "sluice.yaml"
        self.procs: list[Proc] = []
        self.started = time.monotonic()

    def close(self) -> None:
        """Kill every daemon still running; the databases go with the session's factory."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()

    # -- running -------------------------------------------------------------------

    def start(self, label: str = "run", fault: str | None = None, *,
              until_drained: bool = True, **env: str) -> Proc:
        """Start ``sluice run CONFIG --until-drained`` (with ``SLUICE_FAULT=fault``);
        without ``until_drained``, as a daemon that runs until a signal."""
        extra = dict(env)
        if fault:
            extra["SLUICE_FAULT"] = fault
        log_path = self.folder / f"{len(self.procs) + 1:02d}-{label}.log"
        drained = ["--until-drained"] if until_drained else []
        proc = Proc([SLUICE, "run", str(self.config), *drained], base_env(**extra), log_path)
        self.procs.append(proc)
        return proc

    def run_to_end(self, label: str = "final", timeout: float = 1200) -> Proc:
        """Run once more, with no fault, and require exit 0."""
        proc = self.start(label)
        code = proc.wait(timeout)
        if code is None:
            proc.kill()
            raise AssertionError(f"{self.name}: sluice run did not end in {timeout} s\n"
                                 f"{proc.tail()}")
        assert code == 0, f"{self.name}: sluice run exited {code}\n{proc.tail()}"
        return proc

    def sluice(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``sluice ARGS…`` on this scenario's config."""
        command, *rest = args
        return sluice(command, str(self.config), *rest)

    # -- looking at the ledger and the target --------------------------------------

    @contextmanager
    def ledger(self) -> Iterator[sa.Connection]:
        """A connection to the ledger database."""
        engine = sa.create_engine(self.ledger_url)
        try:
            with engine.connect() as conn:
                yield conn
        finally:
            engine.dispose()

    @contextmanager
    def target(self) -> Iterator[sa.Connection]:
        """A connection to the target database, in UTC."""
        engine = sa.create_engine(self.target_url)
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("SET TIME ZONE 'UTC'")
                yield conn
        finally:
            engine.dispose()

    def ledger_count(self, sql: str, **params: Any) -> int:
        """A count from the ledger; 0 before the daemon created its tables."""
        try:
            with self.ledger() as conn:
                return int(conn.scalar(sa.text(sql), params) or 0)
        except sa.exc.ProgrammingError:
            return 0

    def states(self) -> Counter[str]:
        """Batches per state in the ledger (empty before the ledger exists)."""
        try:
            with self.ledger() as conn:
                rows = conn.execute(
                    sa.text("SELECT state, count(*) FROM sluice_batches GROUP BY state")
                ).all()
        except sa.exc.ProgrammingError:
            return Counter()
        return Counter({state: int(n) for state, n in rows})

    def wait_for(self, what: str, condition: Callable[[], bool], proc: Proc | None = None,
                 timeout: float = 180) -> None:
        """Poll ``condition`` (another process's progress) until true; fail if ``proc`` exits."""
        deadline = time.monotonic() + timeout
        while not condition():
            if proc is not None and proc.wait(0.25) is not None:
                raise AssertionError(f"{self.name}: sluice exited ({proc.poll()}) before "
                                     f"{what}\n{proc.tail()}")
            if proc is None:
                threading.Event().wait(0.25)
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out waiting until {what}")

    def record(self, injected: int, check: Check, notes: list[str] | None = None) -> Outcome:
        """Add this scenario's line to the chaos table."""
        outcome = Outcome(
            self.name, injected, check.rows_checked, check.duplicates, check.missing,
            time.monotonic() - self.started, [*check.notes, *(notes or [])],
        )
        RESULTS.append(outcome)
        return outcome


class Scenario(Migration):
    """One migration of the world into a fresh target, with a fresh ledger and queue.

    ``make_db(name)`` creates a throwaway PostgreSQL database and returns its
    URL. ``legacy_url`` and ``sqs_endpoint`` replace the MariaDB URL and the
    SQS endpoint (a proxy's); ``ledger_via(url)`` gives the ledger URL the
    daemons use (a proxy's, ``TcpProxy.url_for``) from the ledger's own.
    """

    def __init__(
        self,
        name: str,
        world: World,
        folder: Path,
        make_db: Callable[[str], str],
        moto_url: str,
        *,
        legacy_url: str | None = None,
        sqs_endpoint: str | None = None,
        ledger_via: Callable[[str], str] | None = None,
        retry: str = "{max_attempts: 8, backoff: 1s, max_backoff: 4s}",
        lease_ttl: str = "20s",
    ) -> None:
        super().__init__(name, folder, make_db("ledger"), make_db("target"))
        self.world = world
        self.client = sqs_client(moto_url)
        self.queue_url = self.client.create_queue(
            QueueName=f"chaos-{re.sub(r'[^A-Za-z0-9_-]', '-', name)}-{uuid.uuid4().hex[:8]}"[:80]
        )["QueueUrl"]
        self._send(world.bodies)
        endpoint = sqs_endpoint or moto_url
        # The queue URL names the endpoint too (a proxy's, when there is one).
        queue = endpoint + "/" + self.queue_url.split("/", 3)[3]
        self.config.write_text(
            CONFIG.format(
                ledger=ledger_via(self.ledger_url) if ledger_via else self.ledger_url,
                shop=world.shop_url, legacy=legacy_url or world.legacy_url,
                target=self.target_url, queue=queue, endpoint=endpoint, retry=retry,
                ttl=lease_ttl, spark_conf=short_jvm(world.sizes.label), batch=BATCH_ITEMS,
            )
        )

    def _send(self, bodies: list[str]) -> None:
        for start in range(0, len(bodies), 10):
            entries = [
                {"Id": str(n), "MessageBody": body}
                for n, body in enumerate(bodies[start : start + 10])
            ]
            failed = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            assert not failed.get("Failed"), failed

    def close(self) -> None:
        """Kill the daemons and delete the queue; the databases go with the session's factory."""
        super().close()
        try:
            self.client.delete_queue(QueueUrl=self.queue_url)
        finally:
            self.client.close()

    # -- the checks -------------------------------------------------------------------

    def verify(self) -> Check:
        """Compare the target with the sources (see :mod:`tests.chaos.checks`)."""
        return verify(self)


# Each short run is mostly a JVM starting: without the C2 compiler the Spark
# driver comes up and runs small batches ~7 s sooner (measured here: 20-27 s a
# run instead of 28-33 s). The long form keeps the default, for throughput.
BATCH_ITEMS = 2500
"""``batch.max_items`` of every scenario: 8 orders batches in the short form, 80 in the long."""

_SHORT_JVM = ', spark.driver.extraJavaOptions: "-XX:TieredStopAtLevel=1"'


def short_jvm(label: str) -> str:
    """The ``spark.conf`` entry the short form adds (``label``: ``short`` or ``long``)."""
    return _SHORT_JVM if label == "short" else ""


# Six batches may be in flight with two import threads: orders ranges wait
# for a thread together and share Spark jobs, the path crashes must hit.
CONFIG = """\
ledger: {ledger}
work_dir: ./work
spark:
  master: local[2]
  max_concurrent_imports: 2
  conf: {{spark.sql.shuffle.partitions: "2"{spark_conf}}}
sources:
  orders:
    kind: sql
    url: {shop}
    table: orders
    key: id
    mode: keyset
    page_size: 4000
    buffer: {{capacity: 20000, replenish_below: 15000}}
    target: warehouse.orders
  customers:
    kind: sql
    url: {legacy}
    table: customers
    key: id
    mode: sweep
    where: "status = 'active'"
    sweep_pause: 1s
    page_size: 2000
    buffer: {{capacity: 4000, replenish_below: 1500}}
    target: warehouse.customers
  events:
    kind: sqs
    queue_url: {queue}
    endpoint_url: {endpoint}
    access_key_id: testing
    secret_access_key: testing
    key: id
    wait_time: 1s
    visibility_timeout: 10s
    max_receives: 50
    buffer: {{capacity: 300, replenish_below: 100}}
    target: warehouse.events
targets:
  warehouse:
    kind: jdbc
    url: {target}
strategy:
  fair: {{orders: 2, customers: 1, events: 1}}
batch: {{max_items: {batch}, max_wait: 500ms}}
backpressure: {{max_pending: 20000, resume_below: 10000, max_importing_batches: 6}}
retry: {retry}
lease: {{ttl: {ttl}}}
"""
