"""Which source databases answer at start: a run never waits long for one that does not.

Every database of the config's SQL sources is asked ``SELECT 1`` at once, each on a
thread of its own, and the start waits :data:`START_WAIT` seconds at most for them all,
and :data:`LATE` seconds at most past the last one that answered.
A database that answers is checked and planned as before. One that refuses what the
config names (a password, a user, a database, a host name that does not resolve:
:func:`~config.errors.refused_by_config`) stops the start with a :class:`ConfigError`
naming the source and its ``url``. Any other (the server down or refusing connections,
no answer in time) is *unreachable*: its sources start with empty buffers, their
refills ask it again with backoff (their start check runs before their first read),
and the other sources flow meanwhile. A thread still waiting for its database when the
start goes on ends with its connection's timeout (:mod:`config.connections`), its answer
no longer asked for. Mid-run, :class:`Away` asks a source's database again when its
batches fail, so that one whose keys were all read is shown away too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from config.errors import ConfigError, cause_line, refused_by_config
from config.models import SluiceConfig, SqlSourceConfig
from config.secrets import redact_url
from spark_jobs.engines import url_traits

START_WAIT = 2.0
"""Seconds the start waits for the source databases to answer before it goes on without the
ones that did not (a database across the world answers in well under one)."""

LATE = 0.5
"""Seconds the start waits for the databases still silent after the last one answered."""


def unreachable(cfg: SluiceConfig, wait: float = START_WAIT) -> dict[str, str]:
    """The URLs of ``cfg``'s source databases that did not answer within ``wait`` seconds,
    each with why (change streams are left out: they check their slots at start; and
    SQLite files).

    Raises :class:`ConfigError` for the first database that refuses what the config names.
    """
    users: dict[str, list[str]] = {}
    for name, src in cfg.sources.items():
        # A file (SQLite) is never far away; connecting would make a missing one.
        if (isinstance(src, SqlSourceConfig) and src.mode != "stream"
                and not url_traits(src.url).file_database):  # fmt: skip
            users.setdefault(src.url, []).append(name)
    answers: dict[str, BaseException | None] = {}
    answered = threading.Condition()
    answered_at: float | None = None  # when the last answer came

    def ask(url: str) -> None:
        nonlocal answered_at
        outcome = refusal(url)
        with answered:
            answers[url] = outcome
            answered_at = time.monotonic()
            answered.notify_all()

    for url, names in users.items():
        threading.Thread(target=ask, args=(url,), name=f"reach-{names[0]}", daemon=True).start()
    started = time.monotonic()
    deadline = started + wait
    with answered:
        while len(answers) < len(users) and (left := _left(deadline, answered_at)) > 0:
            answered.wait(left)
        found = dict(answers)
    waited = time.monotonic() - started
    away: dict[str, str] = {}
    for url, names in users.items():
        if url not in found:
            away[url] = f"no answer in {waited:.1f} s"
            continue
        error = found[url]
        if error is None:
            continue
        reason = cause_line(error)
        if refused_by_config(error):
            group = next((g for g, members in cfg.groups.items() if names[0] in members),
                         names[0])  # fmt: skip
            raise ConfigError(
                f"source {names[0]} ({redact_url(url)}): cannot connect: {reason} "
                f"(check sources.{group}.url)"
            )
        away[url] = reason
    return away


def refusal(url: str) -> BaseException | None:
    """What keeps ``url``'s database from answering ``SELECT 1`` (on a connection of its
    own, within its connect timeout); None when it answers."""
    try:
        engine = sa.create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as error:  # noqa: BLE001 - whatever it is, it is this database's
        return error
    return None


def _left(deadline: float, answered_at: float | None) -> float:
    """Seconds the start still waits: to ``deadline``, and at most :data:`LATE` past the
    last answer once one came (the others answered; the rest are late)."""
    now = time.monotonic()
    left = deadline - now
    return left if answered_at is None else min(left, answered_at + LATE - now)


class Away:
    """Source databases found away after their batches failed: shown as unreachable.

    A source whose keys were all read has no refills left to find its database gone:
    its batches fail to connect. After such a failure (any transient one: the batch's
    error does not say which end failed) the source's database is asked ``SELECT 1`` on a
    thread of its own, one question per database at a time; when it does not answer, the
    source is away since that failure, with why, until one of its batches succeeds or a
    later question is answered. ``url_of(source)``: its database (None: nothing to ask,
    such as a file or a queue).
    """

    def __init__(self, url_of: Callable[[str], str | None]) -> None:
        self._url_of = url_of
        self._lock = threading.Lock()
        self._away: dict[str, tuple[float, str]] = {}  # source -> (since, why)
        self._asking: set[str] = set()

    def failed(self, source: str) -> None:
        """A batch of ``source`` failed and may be tried again: ask its database."""
        url = self._url_of(source)
        if url is None or url_traits(url).file_database:
            return
        since = time.monotonic()
        with self._lock:
            if url in self._asking:
                return
            self._asking.add(url)
        threading.Thread(target=self._ask, args=(source, url, since), name=f"away-{source}",
                         daemon=True).start()  # fmt: skip

    def succeeded(self, source: str) -> None:
        """A batch of ``source`` succeeded: its database is there."""
        with self._lock:
            self._away.pop(source, None)

    def of(self, source: str) -> tuple[float, str] | None:
        """Seconds ``source``'s database has been away, and why; None: not known away."""
        with self._lock:
            found = self._away.get(source)
        return None if found is None else (time.monotonic() - found[0], found[1])

    def _ask(self, source: str, url: str, since: float) -> None:
        error = refusal(url)
        with self._lock:
            self._asking.discard(url)
            if error is None:
                self._away.pop(source, None)
            else:
                held = self._away.get(source)
                self._away[source] = (held[0] if held else since, cause_line(error))
