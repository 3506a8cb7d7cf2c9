"""The ledger goes away under two daemons, for longer than a lease.

:func:`ledger_cuts` runs two ``sluice run`` daemons on one config whose
ledger URL points at a :class:`~tests.tcp_proxy.TcpProxy`, and cuts the
proxy (live connections reset, new ones refused) for each of ``cuts``
seconds in turn, each time mid-run: more batches done since the last cut,
and both daemons holding unfinished batches. Both ride each cut out (their
ledger reads and writes wait, up to ``scheduler.ledger.outage.GRACE``); a
cut longer than the lease and the reaper's liveness bound lets each daemon
take the other's batches over once the ledger is back, and the fencing
tokens must keep every row single.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import sqlalchemy as sa

from tests.chaos.harness import Proc, Scenario
from tests.chaos.scenarios import Injected, owner_prefix
from tests.tcp_proxy import TcpProxy

# A cut that lands on a COMMIT leaves it unknown (scheduler/ledger/outage.py,
# CommitUnknown): the daemon stops by design, so that a restart reads what
# committed. A supervisor restarts it; the scenario does the same.
COMMIT_UNKNOWN = "whether it did is unknown"
# The daemons' own words (scheduler/loop.py, inflight.py, ledger/outage.py).
# The loop says "trying to take it over" before begin()'s compare-and-set
# decides, and a batch may be handed to it by several reaper runs: batch ids,
# counted once.
TRIED = re.compile(r"batch (\w+) of \w+: its owner's lease lapsed .*trying to take it over")
REFUSED = re.compile(r"batch (\w+) taken by another daemon")
LOST = re.compile(r"batch (\w+) was taken over by another daemon")
WAITED = re.compile(r"the ledger is unreachable \(\d+ tries\)")

_pause = threading.Event()  # never set: the daemons' progress is nothing to wait on but time


class Daemons:
    """Named daemons on one scenario, restarted after a :data:`COMMIT_UNKNOWN` stop."""

    def __init__(self, sc: Scenario, injected: Injected, *names: str) -> None:
        self.sc = sc
        self.injected = injected
        self.running = {name: sc.start(f"ledger-{name}") for name in names}
        self.every: list[tuple[str, Proc]] = list(self.running.items())
        self.restarts = 0

    def look(self, *, may_end: bool) -> None:
        """Restart a daemon that stopped on an unknown commit; fail on any other exit but 0,
        and on 0 too unless ``may_end`` (the migration drained before the cuts were done)."""
        for name, proc in list(self.running.items()):
            code = proc.poll()
            if code is None:
                continue
            if code == 1 and COMMIT_UNKNOWN in proc.output():
                self.restarts += 1
                self.injected.notes.append(f"daemon {name} stopped on a commit a cut made "
                                           "unknown (exit 1, by design); restarted")
                self.running[name] = self.sc.start(f"ledger-{name}-restarted")
                self.every.append((name, self.running[name]))
                continue
            assert code == 0, f"{self.sc.name}: daemon {name} exited {code}\n{proc.tail()}"
            assert may_end, (f"{self.sc.name}: daemon {name} ended (drained) before the last "
                             f"cut; so far: {self.injected.notes}\n{proc.tail()}")
            del self.running[name]

    def holding(self) -> Counter[str]:
        """Unfinished (claimed, importing) batches per running daemon, by the ledger."""
        prefixes = {owner_prefix(proc): name for name, proc in self.running.items()}
        try:
            with self.sc.ledger() as conn:
                owners = conn.scalars(sa.text(
                    "SELECT owner FROM sluice_batches WHERE state IN ('claimed', 'importing')"
                )).all()
        except sa.exc.ProgrammingError:  # no tables yet
            return Counter()
        return Counter(name for owner in owners for prefix, name in prefixes.items()
                       if owner and owner.startswith(prefix))

    def log_count(self, pattern: re.Pattern[str]) -> Counter[str]:
        """Per daemon (its restarts too): lines matching ``pattern``, or, when it has a
        group, the distinct values of the group (batch ids)."""
        lines: Counter[str] = Counter()
        ids: defaultdict[str, set[str]] = defaultdict(set)
        for name, proc in self.every:
            hits = pattern.findall(proc.output())
            if pattern.groups:
                ids[name].update(hits)
            else:
                lines[name] += len(hits)
        lines.update({name: len(found) for name, found in ids.items()})
        return lines


def ledger_cuts(sc: Scenario, proxy: TcpProxy, injected: Injected, cuts: list[float], *,
                more: int = 3, both: bool = True, timeout: float = 1800) -> Daemons:
    """Daemons a and b on ``sc``, whose ledger is behind ``proxy``: cut it ``cuts`` s at a time.

    Each cut starts once ``more`` batches more are done than at the end of
    the one before (the first: than at the start) and batches are in flight:
    held by both daemons with ``both`` (a short run may have every batch
    with one daemon). Returns once both daemons ended, each with exit 0 (a
    daemon stopped by a cut that landed on a commit is restarted, see
    :class:`Daemons`). Notes say what each cut met and what followed.
    """
    daemons = Daemons(sc, injected, "a", "b")
    holders = 2 if both else 1
    for n, seconds in enumerate(cuts, 1):
        wanted = sc.states()["done"] + more

        def ready(wanted: int = wanted) -> bool:
            daemons.look(may_end=False)
            return sc.states()["done"] >= wanted and len(daemons.holding()) >= holders

        _until(sc, f"cut {n}: {wanted} batches done, {holders} daemons holding batches", ready,
               timeout)
        held, done, refused_before = daemons.holding(), sc.states()["done"], proxy.refused
        proxy.pause()
        injected.faults += 1
        back = time.monotonic() + seconds
        while time.monotonic() < back:
            daemons.look(may_end=False)
            _pause.wait(0.25)
        proxy.resume()
        assert proxy.refused > refused_before, f"{sc.name}: nothing tried the ledger in cut {n}"
        at = back - seconds - sc.started
        injected.notes.append(f"cut {n}: ledger away {seconds:g} s from {at:.0f} s, at {done} "
                              "batches done, "
                              f"a holding {held['a']}, b holding {held['b']} unfinished batches; "
                              f"{proxy.refused - refused_before} connections refused")

    def ended() -> bool:
        daemons.look(may_end=True)
        return not daemons.running

    _until(sc, "both daemons ended", ended, timeout)
    tried, refused, lost = (daemons.log_count(p) for p in (TRIED, REFUSED, LOST))
    waits = daemons.log_count(WAITED)
    with sc.ledger() as conn:
        again = conn.scalar(sa.text("SELECT count(*) FROM sluice_batches WHERE token > 1"))
    injected.notes.append(
        f"lapsed batches of the other daemon tried: by a {tried['a']} ({refused['a']} "
        f"refused: done or taken first), by b {tried['b']} ({refused['b']} refused); taken "
        f"over or retried (token > 1): {again}; ends refused to the daemon that lost its batch: "
        f"a {lost['a']}, b {lost['b']}; ledger waits logged: a {waits['a']}, b {waits['b']}; "
        f"both daemons exited 0 ({daemons.restarts} restarts)"
    )
    return daemons


def _until(sc: Scenario, what: str, condition: Callable[[], bool], timeout: float) -> None:
    """Poll ``condition()`` until true, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{sc.name}: timed out waiting until {what}")
        _pause.wait(0.25)
