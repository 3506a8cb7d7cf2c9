"""Helpers shared by the end-to-end tests: seed sources, compare targets."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from botocore.exceptions import ClientError

from config.loader import load_config_text
from config.models import SluiceConfig
from sinks.abc import MemorySink
from spark_jobs.common.manifest import Manifest


def run_sql(url: str, *statements: str) -> None:
    """Run ``statements`` on the database at ``url``, each committed at once."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def scalar(url: str, query: str) -> Any:
    """The one value ``query`` gives on the database at ``url``."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(query)).scalar()
    finally:
        engine.dispose()


def stream_leftovers(url: str) -> list[str]:
    """The replication slots and publications of the PostgreSQL database at ``url``: what a
    stream keeps there."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.scalars(sa.text(
                "SELECT slot_name FROM pg_replication_slots WHERE database = current_database() "
                "UNION ALL SELECT pubname FROM pg_publication"
            )))  # fmt: skip
    finally:
        engine.dispose()


def seed_orders(url: str, rows: int, table: str = "orders") -> None:
    """Create ``table`` with a mix of types (and NULLs) and fill it."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    tbl = sa.Table(
        table,
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("customer", sa.String(60), nullable=True),
        sa.Column("amount", sa.Numeric(12, 2), nullable=False),
        sa.Column("flag", sa.SmallInteger, nullable=False),
        sa.Column("placed_at", sa.DateTime, nullable=True),
    )
    meta.create_all(engine)
    base = dt.datetime(2024, 3, 1, 12, 0, 0)
    with engine.begin() as conn:
        conn.execute(
            tbl.insert(),
            [
                {
                    "id": i * 3,  # gaps between keys, as in real tables
                    "customer": None if i % 17 == 0 else f"cust-{i % 97} 'quoted' ü",
                    "amount": decimal.Decimal(i % 1000) / 4,
                    "flag": i % 2,
                    "placed_at": None if i % 23 == 0 else base + dt.timedelta(seconds=37 * i),
                }
                for i in range(1, rows + 1)
            ],
        )
    engine.dispose()


def fetch_rows(url: str, table: str, key: str = "id") -> dict[Any, tuple[str, ...]]:
    """Every row of a table, keyed by its key, each value normalised to text."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        result = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {key}"))
        columns = list(result.keys())
        rows = {}
        for row in result:
            values = dict(zip(columns, row, strict=True))
            rows[values[key]] = tuple(_text(values[c]) for c in sorted(columns))
    engine.dispose()
    return rows


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, decimal.Decimal):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def assert_same_rows(source_url: str, source_table: str, target_url: str, target_table: str) -> int:
    """The target holds exactly the source's rows, column by column; returns the count."""
    source = fetch_rows(source_url, source_table)
    target = fetch_rows(target_url, target_table)
    assert len(target) == len(source), f"{len(target)} rows in target, {len(source)} in source"
    missing = source.keys() - target.keys()
    assert not missing, f"{len(missing)} keys missing, e.g. {sorted(missing)[:5]}"
    different = [k for k in source if source[k] != target[k]]
    assert not different, f"row {different[0]}: {source[different[0]]} != {target[different[0]]}"
    return len(source)


def write_config(folder: Path, text: str) -> tuple[Path, SluiceConfig]:
    """Write a config file and load it as sluice would."""
    path = folder / "sluice.yaml"
    path.write_text(text)
    return path, load_config_text(text, str(path))


class FakeClock:
    """A clock the test moves (``clock.now += 5``), for code that takes ``clock=``."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_until(
    condition: Callable[[], object],
    what: str,
    *,
    event: threading.Event | None = None,
    timeout: float = 30.0,
    poll: float = 0.05,
) -> None:
    """Wait until ``condition()`` holds; fail naming ``what`` if it has not after ``timeout`` s.

    With ``event`` (one the test owns, set by whatever may make the condition
    true) each look waits for it; without one the condition is polled every
    ``poll`` s: for state that has no hook (another process, a database, a
    periodic job). The timeout only bounds a test that fails: nothing is timed.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event() if event is None else event
    while True:
        if event is not None:
            event.clear()  # before the look: a change after it sets it again
        if condition():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain")
        pause.wait(left if event is not None else min(left, poll))


class WatchedSink(MemorySink):
    """A :class:`MemorySink` that sets :attr:`arrived` whenever a batch is submitted."""

    def __init__(self, auto_complete: bool = True) -> None:
        super().__init__(auto_complete)
        self.arrived = threading.Event()

    def submit(self, manifest: Manifest) -> Any:
        future = super().submit(manifest)
        self.arrived.set()
        return future


class SqsClock(FakeClock):
    """SQS visibility timeouts on a fake clock, over a real queue (moto_server).

    Wrap each boto3 client whose receives matter in :meth:`watch`: every
    message it receives is counted invisible until ``now`` plus its visibility
    timeout, on this clock; its visibility changes and deletes are followed the
    same way. :meth:`advance` moves the clock and makes each message whose
    timeout ran out on it visible again (``ChangeMessageVisibility`` 0, with
    its newest receipt handle), as SQS would have. For this to be the only way
    a timeout runs out, the timeouts asked of the queue must outlast the test
    (a minute or more). Share the clock with the code under test (``clock=``)
    so that both see the same time. Move it with :meth:`advance`, not ``now``.
    """

    def __init__(self, now: float = 100.0) -> None:
        super().__init__(now)
        self._lock = threading.Lock()
        # message id -> (invisible until, queue url, newest receipt handle, client)
        self._invisible: dict[str, tuple[float, str, str, Any]] = {}
        self._ids: dict[str, str] = {}  # receipt handle -> message id

    def watch(self, client: Any) -> Any:
        """``client``, with the visibility of what it receives kept on this clock."""
        return _WatchedSqs(client, self)

    def advance(self, seconds: float) -> None:
        """Move the clock; messages whose visibility ran out become visible again."""
        with self._lock:
            self.now += seconds
            due = [mid for mid, (until, *_) in self._invisible.items() if until <= self.now]
            lapsed = [self._invisible.pop(mid) for mid in due]
        for _, url, handle, client in lapsed:
            with contextlib.suppress(ClientError):  # deleted meanwhile by a client not watched
                client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0
                )

    def _received(
        self, client: Any, url: str, messages: list[dict[str, Any]], seconds: int
    ) -> None:
        with self._lock:
            for message in messages:
                handle = message["ReceiptHandle"]
                self._ids[handle] = message["MessageId"]
                self._invisible[message["MessageId"]] = (self.now + seconds, url, handle, client)

    def _changed(self, handle: str, seconds: int | None) -> None:
        """``seconds`` None: deleted."""
        with self._lock:
            mid = self._ids.get(handle)
            if mid is None or mid not in self._invisible:
                return
            if seconds is None or seconds == 0:
                del self._invisible[mid]
            else:
                _, url, newest, client = self._invisible[mid]
                self._invisible[mid] = (self.now + seconds, url, newest, client)


class _WatchedSqs:
    """A boto3 SQS client whose receives, visibility changes and deletes an
    :class:`SqsClock` follows; everything else goes to the client as it is."""

    def __init__(self, client: Any, clock: SqsClock) -> None:
        self._client = client
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def receive_message(self, **params: Any) -> Any:
        answer = self._client.receive_message(**params)
        seconds = params.get("VisibilityTimeout")
        if seconds is None:  # the queue's own
            attrs = self._client.get_queue_attributes(
                QueueUrl=params["QueueUrl"], AttributeNames=["VisibilityTimeout"]
            )["Attributes"]
            seconds = attrs["VisibilityTimeout"]
        self._clock._received(
            self._client, params["QueueUrl"], answer.get("Messages", []), int(seconds)
        )
        return answer

    def change_message_visibility(self, **params: Any) -> Any:
        answer = self._client.change_message_visibility(**params)
        self._clock._changed(params["ReceiptHandle"], int(params["VisibilityTimeout"]))
        return answer

    def change_message_visibility_batch(self, **params: Any) -> Any:
        answer = self._client.change_message_visibility_batch(**params)
        for entry in _succeeded(params, answer):
            self._clock._changed(entry["ReceiptHandle"], int(entry["VisibilityTimeout"]))
        return answer

    def delete_message(self, **params: Any) -> Any:
        answer = self._client.delete_message(**params)
        self._clock._changed(params["ReceiptHandle"], None)
        return answer

    def delete_message_batch(self, **params: Any) -> Any:
        answer = self._client.delete_message_batch(**params)
        for entry in _succeeded(params, answer):
            self._clock._changed(entry["ReceiptHandle"], None)
        return answer


def _succeeded(params: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a ``*_batch`` request that SQS carried out."""
    done = {entry["Id"] for entry in answer.get("Successful", [])}
    return [entry for entry in params["Entries"] if entry["Id"] in done]


def drain(
    cfg: SluiceConfig, path: Path, spark: Any, timeout: float = 240.0, *, spark_jobs: bool = False
) -> Any:
    """Run a daemon on ``cfg`` in-process until drained, as ``sluice run`` runs it; its summary.

    On a local master (the tests' configs) the loads that need no Spark go to
    local worker processes (:mod:`spark_jobs.tasks.local_tasks`), as in
    ``sluice run``; the rest run on ``spark``, the tests' shared session,
    standing in for the one ``sluice run`` would start. ``spark_jobs``: every
    batch by a Spark job on ``spark`` instead, its direct loads in Spark tasks
    (what a cluster master's executors run). A run that has not drained after
    ``timeout`` s is stopped (the test then fails on it).
    """
    from scheduler.daemon import Daemon
    from sinks.spark import SparkSink

    sink = SparkSink(cfg, spark=spark, warm_up=True, local_tasks=not spark_jobs)
    daemon = Daemon(cfg, config_path=str(path), sink=sink)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.update(summary=daemon.run(until_drained=True)))
    runner.start()
    try:
        runner.join(timeout)
    finally:
        if runner.is_alive() and daemon.loop is not None:
            daemon.loop.request_stop()
        runner.join(30)
        daemon.close()
    assert "summary" in outcome, f"the run did not drain within {timeout:.0f} s"
    return outcome["summary"]


def count_rows(url: str, table: str) -> int:
    """Rows of ``table`` at ``url``; 0 while it does not exist."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(sa.text(f"SELECT count(*) FROM {table}")) or 0)
    except sa.exc.DBAPIError:
        return 0  # not made yet
    finally:
        engine.dispose()


def run_until_then_stop(
    config: Path, seen: str, stop: signal.Signals, **env: str
) -> tuple[int, str]:
    """``sluice run --until-drained`` on ``config`` (in its folder), stopped by ``stop`` once
    its output shows ``seen``; its exit code and output. Fails if it ended before."""
    log = config.parent / "run.log"
    sluice = str(Path(sys.executable).parent / "sluice")
    with log.open("w") as out:
        run = subprocess.Popen(
            [sluice, "run", str(config), "--until-drained"], cwd=config.parent, stdout=out,
            stderr=subprocess.STDOUT, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **env},
        )
    try:
        wait_until(lambda: seen in log.read_text() or run.poll() is not None,
                   f"{seen!r} in the run's output", timeout=60, poll=0.2)  # fmt: skip
        assert run.poll() is None, log.read_text()
        run.send_signal(stop)
        run.wait(60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return run.returncode, log.read_text()
