"""The backpressure probe: how much work the downstream itself says it has pending.

``backpressure.probe`` is a SQL count (``{sql: "SELECT count(*) FROM staging",
url: …}``) or an HTTP endpoint answering a number (``{http: URL}``). The read
runs every ``ttl`` as a job of the daemon's APScheduler (:meth:`Probe.schedule`);
the main loop only ever calls :meth:`Probe.value`, which returns the cached
number and never does I/O, so a slow or dead downstream cannot stall feeding.
A failed read, or one older than ``max_age`` (a read stuck in I/O), makes the
value unknown: the gate then counts only the batches it knows are pending, as
if there were no probe.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import sqlalchemy as sa
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.base import BaseScheduler

from config.errors import ConfigError
from config.models import ProbeConfig
from config.secrets import redact_text, redact_url, url_passwords
from spark_jobs.engines import url_traits

log = logging.getLogger("sluice.probe")


@dataclass(frozen=True)
class ProbeReading:
    """The cached result: a number, or None when unknown (and why)."""

    value: int | None
    at: float | None  # clock() of the last successful read
    error: str | None  # the last failure, secrets masked; None after a success


class Probe:
    """Reads the downstream's pending work every ``ttl`` seconds in the background.

    ``read`` does the I/O and returns a number (it may raise; it runs on the
    scheduler's job or in :meth:`refresh`). ``on_change`` is called, on that
    thread, when the value changes: the daemon passes ``loop.notify`` so a
    closed gate re-opens as soon as the downstream catches up.
    """

    def __init__(
        self,
        read: Callable[[], object],
        ttl: float,
        *,
        name: str = "probe",
        clock: Callable[[], float] = time.monotonic,
        max_age: float | None = None,
        on_change: Callable[[], None] | None = None,
        close: Callable[[], None] | None = None,
        secrets: list[str] | None = None,
    ) -> None:
        self.name = name
        self.ttl = max(ttl, 0.01)
        self.max_age = 3 * self.ttl if max_age is None else max_age
        self.on_change = on_change
        self._read = read
        self._clock = clock
        self._close = close
        self._secrets = secrets or []
        self._lock = threading.Lock()
        self._reading = ProbeReading(None, None, None)
        self._job: Job | None = None
        self._idle = threading.Event()  # clear while a read is in flight
        self._idle.set()

    def value(self) -> int:
        """The downstream's pending items, or 0 when unknown. Never does I/O."""
        return self.reading().value or 0

    def reading(self) -> ProbeReading:
        """The cached reading; its value is None when the last one is older than ``max_age``."""
        with self._lock:
            reading = self._reading
        if reading.at is not None and self._clock() - reading.at > self.max_age:
            return ProbeReading(None, reading.at, reading.error or "stale: no fresh reading")
        return reading

    def refresh(self) -> ProbeReading:
        """Read now, on the caller's thread (the scheduler's job, a test)."""
        self._idle.clear()
        try:
            value = _count(self._read())
        except Exception as exc:
            error = redact_text(f"{type(exc).__name__}: {exc}", self._secrets)
            with self._lock:
                before, self._reading = self._reading, ProbeReading(None, None, error)
            # The first failure of a streak is a warning; its repeats would only be noise.
            level = logging.WARNING if before.error != error else logging.DEBUG
            log.log(level, "%s failed, counting only sluice's own pending batches: %s",
                    self.name, error)
        else:
            with self._lock:
                before, self._reading = self._reading, ProbeReading(value, self._clock(), None)
            if before.error is not None:
                log.info("%s answers again: %d pending", self.name, value)
        finally:
            self._idle.set()
        with self._lock:
            after = self._reading
        if after.value != before.value and self.on_change is not None:
            self.on_change()
        return after

    def schedule(self, scheduler: BaseScheduler) -> None:
        """Read at once, then every ``ttl`` seconds, as a job of ``scheduler``.

        One read at a time: a read stuck in I/O delays the next (APScheduler
        skips runs while one is in flight) and ages the value into unknown.
        """
        self._job = scheduler.add_job(
            self.refresh, "interval", seconds=self.ttl, id=self.name,
            next_run_time=datetime.now(), max_instances=1, coalesce=True,
        )  # fmt: skip

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop reading; True when no read is still in flight after ``timeout`` seconds."""
        job, self._job = self._job, None
        if job is not None:
            with contextlib.suppress(JobLookupError):  # its scheduler already shut down
                job.remove()
        ended = self._idle.wait(timeout)
        if ended and self._close is not None:
            self._close()
        return ended


def _count(value: object) -> int:
    """A probe's answer as a count of items: a finite number, not negative."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        value = value.strip()
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise ValueError(f"expected a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a count of pending items, got {value!r}")
    return int(number)


def sql_count(
    url: str, sql: str, *, timeout: float = 10.0
) -> tuple[Callable[[], object], sa.Engine]:
    """A reader running ``sql`` (trusted operator SQL returning one number) on ``url``."""
    # A fresh connection per read (every ttl): nothing stale to ping, nothing held between.
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool,
                              connect_args=_timeouts(url, timeout))
    query = sa.text(sql)

    def read() -> object:
        with engine.connect() as conn:
            return conn.execute(query).scalar()

    return read, engine


def _timeouts(url: str, timeout: float) -> dict[str, object]:
    # A probe stuck in I/O only goes stale, but a bounded one recovers sooner.
    return url_traits(url).timed_connect_args(max(1, math.ceil(timeout)))


def http_number(url: str, *, timeout: float = 10.0) -> Callable[[], object]:
    """A reader GETting ``url``, whose body is a number."""

    def read() -> object:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read(256)

    return read


def check_sql(url: str, sql: str) -> None:
    """Run the probe's SQL wrapped to return no rows: raise ConfigError if refused.

    A database that cannot be reached is only logged: the downstream may come
    up later, and until then the probe is simply unknown.
    """
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=_timeouts(url, 10))
    query = sa.text(f"SELECT * FROM ({sql.strip().rstrip(';')}) AS sluice_probe WHERE 1 = 0")
    try:
        conn = engine.connect()
    except sa.exc.DBAPIError as exc:
        log.warning("probe database %s unreachable at start: %s", redact_url(url), exc.orig)
        return
    try:
        with conn:
            conn.execute(query).all()
    except sa.exc.DBAPIError as exc:
        reason = redact_text(str(exc.orig), url_passwords(url))
        raise ConfigError(f"backpressure.probe.sql: the query fails on {redact_url(url)}: "
                          f"{reason}") from None
    finally:
        engine.dispose()


def build_probe(
    cfg: ProbeConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    on_change: Callable[[], None] | None = None,
) -> Probe:
    """The probe a config describes (not started). Reads time out after ``ttl`` (at least 1 s)."""
    timeout = max(1.0, cfg.ttl)
    if cfg.sql is not None:
        assert cfg.url is not None  # the config model insists on it
        read, engine = sql_count(cfg.url, cfg.sql, timeout=timeout)
        return Probe(read, cfg.ttl, name=f"probe {redact_url(cfg.url)}", clock=clock,
                     on_change=on_change, close=engine.dispose,
                     secrets=url_passwords(cfg.url))
    assert cfg.http is not None
    return Probe(http_number(cfg.http, timeout=timeout), cfg.ttl,
                 name=f"probe {redact_url(cfg.http)}", clock=clock, on_change=on_change,
                 secrets=url_passwords(cfg.http))
