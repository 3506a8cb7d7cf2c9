"""What happens to a :class:`~tests.chaos.harness.Scenario` before it is verified.

Each function drives real ``sluice run`` processes and counts what it
injected in an :class:`Injected`; the caller then runs a clean ``sluice run`` to the end (where the
scenario needs one) and verifies the target. Randomness comes from a seeded
:class:`random.Random`, so a failing run can be replayed with the same seed.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from tests.chaos.harness import Proc, Scenario
from tests.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parents[2]
# What a daemon prints when it exits 1 on a race it lost to the other daemon:
# creating the ledger's tables at the same time, or a ClaimConflict of
# scheduler/ledger.py and loop.py (a claim, or the end of a batch the other
# daemon took over and finished).
CONFLICT = re.compile(r"claimed by another daemon|lost the range claim|is \w+, expected one of|"
                      r"changed under us|cannot open the ledger .*duplicate key value")


@dataclass
class Injected:
    """What a scenario did to the daemons, for the chaos table and the assertions."""

    kills: int = 0
    faults: int = 0
    notes: list[str] = field(default_factory=list)
    conflict_exits: list[str] = field(default_factory=list)  # logs of daemons that died of it
    taken_over: int = 0  # batches a killed daemon had begun that another daemon finished

    @property
    def total(self) -> int:
        """Kills and faults injected."""
        return self.kills + self.faults


def crash_point_in_code(name: str) -> bool:
    """Whether ``crash_point("name")`` is called anywhere in sluice's code."""
    needle = f'crash_point("{name}")'
    for package in ("scheduler", "sources", "sinks", "spark_jobs"):
        for path in (ROOT / package).glob("*.py"):
            if needle in path.read_text(encoding="utf-8"):
                return True
    return False


# -- kill -9 ---------------------------------------------------------------------------


def kill_at_random(sc: Scenario, rng: random.Random, injected: Injected, *,
                   early_share: float = 0.3, batches: tuple[int, int] = (1, 6)) -> bool:
    """Start a daemon and ``kill -9`` its whole process group at a random moment.

    A share ``early_share`` of the kills land in the first seconds (start-up:
    claims made, Spark still starting, resumed batches not yet imported);
    the others once ``randint(*batches)`` more batches are done in this run,
    plus up to 2.5 s: mid-stream, with imports, commits and ledger writes
    under way. Returns False when the daemon ended first (nothing left to kill).
    """
    number = injected.kills + 1
    if rng.random() < early_share:
        moment = rng.uniform(1.0, 8.0)
        label = f"{moment:.1f} s after start"
        proc = sc.start(f"kill-{number}-early")
        code = proc.wait(moment)
    else:
        more, moment = rng.randint(*batches), rng.uniform(0.0, 2.5)
        label = f"{moment:.1f} s after {more} more batches"
        proc = sc.start(f"kill-{number}-after-{more}-batches")
        code = _wait_done(sc, proc, sc.states()["done"] + more)
        if code is None:
            code = proc.wait(moment)
    if code is not None:
        assert code == 0, f"{sc.name}: sluice run exited {code}\n{proc.tail()}"
        injected.notes.append(f"drained before kill {number}")
        return False
    proc.kill()
    injected.kills += 1
    injected.notes.append(f"kill {number}: {label}, {sc.states()['done']} batches done")
    return True


def _wait_done(sc: Scenario, proc: Proc, target: int, timeout: float = 900) -> int | None:
    """Wait until ``target`` batches are done; the exit code if the daemon ended first."""
    deadline = _deadline(timeout)
    while sc.states()["done"] < target:
        code = proc.wait(0.2)
        if code is not None:
            return code
        if _expired(deadline):
            raise AssertionError(f"{sc.name}: no progress to {target} done batches\n"
                                 f"{proc.tail()}")
    return None


def crash_at(sc: Scenario, fault: str, injected: Injected, timeout: float = 300) -> bool:
    """Run with ``SLUICE_FAULT=fault`` and require that it crashed there.

    Returns False (and notes why) when the crash point is not in the code
    yet, in which case the run is a plain run.
    """
    point = fault.partition(":")[0]
    if not crash_point_in_code(point):
        injected.notes.append(f"{point}: not in the code yet, not injected")
        return False
    proc = sc.start(f"fault-{point}", fault=fault)
    code = proc.wait(timeout)
    if code is None:
        proc.kill()
        raise AssertionError(f"{sc.name}: SLUICE_FAULT={fault}: still running after "
                             f"{timeout} s\n{proc.tail()}")
    proc.wait_group_gone()
    marker = f"SLUICE_FAULT: crashing at {point}"
    assert code == -9 and marker in proc.output(), (
        f"{sc.name}: SLUICE_FAULT={fault} did not crash there (exit {code}): the point was "
        f"never reached\n{proc.tail()}"
    )
    injected.faults += 1
    return True


# -- two daemons at once ---------------------------------------------------------------


def hot_hot(sc: Scenario, rng: random.Random, injected: Injected,
            after_done: tuple[int, int] = (1, 3), timeout: float = 1800) -> None:
    """Two daemons on one config and ledger; one is killed midway and restarted.

    Daemon a is killed (its whole process group) once ``randint(*after_done)``
    batches are done, plus a random fraction of a second, at the first moment
    after that when it holds a batch it began and cannot finish any more,
    and daemon b holds batches too: mid-migration, with batches of both
    daemons in flight. Each such batch must end done by another daemon
    (b, or a restarted) under a newer fencing token: the two daemons raced
    for it, and ``injected.taken_over`` counts them. A daemon that exits 1
    because it lost a race to the other (creating the ledger, a claim, or
    the end of a batch the other took over) is restarted, as a supervisor
    would, and recorded in ``injected.conflict_exits``: the data must still
    come out right. Both must end with exit 0 once everything is drained.
    """
    # Closed at the kill's moment, the gate holds every target commit: a's
    # imports then wait inside theirs, so a surely holds batches it began and
    # cannot finish (a fast short run could otherwise slip past every look).
    gate = CommitGate(sc, "orders", "customers", "events", closed=False)
    # Started together on a new ledger: both create its tables at once too
    # (test_two_daemons_starting_at_once_on_a_new_postgresql_ledger).
    a, b = sc.start("hot-a"), sc.start("hot-b")
    done = rng.randint(*after_done)
    sc.wait_for(f"{done} batches are done", lambda: sc.states()["done"] >= done, a, timeout)
    delay = rng.uniform(0.0, 2.0)
    try:
        # Closed before the random delay, not after it: on a loaded machine a
        # short run could otherwise finish within the delay, leaving a no
        # batch to hold when it is looked at.
        gate.close()
        assert a.wait(delay) is None, f"{sc.name}: daemon a ended before the kill\n{a.tail()}"
        owner, held = _stop_holding_begun_batches(sc, a, b, timeout)
        a.kill()
    finally:
        gate.open()
    injected.kills += 1
    injected.notes.append(f"a killed {delay:.1f} s after {done} batches were done, holding "
                          f"{len(held)} begun batches")
    running = {"a": sc.start("hot-a-restarted"), "b": b}
    deadline = _deadline(timeout)
    while running:
        for name, proc in list(running.items()):
            code = proc.wait(0.5)
            if code is None:
                continue
            if code == 1 and CONFLICT.search(proc.output()):
                injected.conflict_exits.append(str(proc.log_path))
                running[name] = sc.start(f"hot-{name}-after-conflict")
                continue
            assert code == 0, f"{sc.name}: daemon {name} exited {code}\n{proc.tail()}"
            del running[name]
        if _expired(deadline):
            for proc in running.values():
                proc.kill()
            raise AssertionError(f"{sc.name}: daemons still running after {timeout} s")
    by_b = _assert_taken_over(sc, owner, held, owner_prefix(b))
    injected.taken_over += len(held)
    injected.notes.append(f"a's begun batches finished by b: {by_b}, by a restarted: "
                          f"{len(held) - by_b}")


def owner_prefix(proc: Proc) -> str:
    """How the ledger's owner names of ``proc`` begin (``host:pid:``, see scheduler.ledger)."""
    return f"{socket.gethostname()}:{proc.pid}:"


def _stop_holding_begun_batches(sc: Scenario, a: Proc, b: Proc, timeout: float
                                ) -> tuple[str, dict[str, int]]:
    """Stop daemon a (SIGSTOP to its group) at a moment it holds batches it cannot finish.

    Returns a's owner name and those batches with their fencing tokens. Read
    while a is stopped, in this order: a's ``importing`` batches in the
    ledger, then the target's ``_sluice_commits``. A batch whose commit is
    not in the target then cannot be recorded done by a: a records a batch
    done only after its target commit returned, which would have been seen.
    So another daemon must begin it again (a newer token) and finish it.
    b must hold batches too (any state): the two daemons ran at once.
    Until then a runs on, and the check is made again.
    """
    mine, theirs = owner_prefix(a), owner_prefix(b)
    deadline = _deadline(timeout)
    while True:
        os.killpg(a.pid, signal.SIGSTOP)  # no more ledger or target writes from a
        try:
            with sc.ledger() as conn:
                rows = conn.execute(sa.text(
                    "SELECT id, state, token, owner FROM sluice_batches WHERE owner IS NOT NULL"
                )).all()
            committed = _target_commits(sc)
        except BaseException:
            os.killpg(a.pid, signal.SIGCONT)  # a failed read must not leave a stopped
            raise
        owners = {r.owner for r in rows if r.owner.startswith(mine)}
        held = {r.id: int(r.token) for r in rows
                if r.owner in owners and r.state == "importing" and r.id not in committed}
        if held and any(r.owner.startswith(theirs) for r in rows):
            assert len(owners) == 1, owners
            return owners.pop(), held
        os.killpg(a.pid, signal.SIGCONT)
        if a.wait(0.25) is not None:
            raise AssertionError(f"{sc.name}: daemon a ended ({a.poll()}) before it held a "
                                 f"batch it had begun, with b holding batches\n{a.tail()}")
        if _expired(deadline):
            raise AssertionError(f"{sc.name}: daemon a never held a begun batch while b held "
                                 f"batches too, in {timeout} s")


def _target_commits(sc: Scenario) -> set[str]:
    """Batches committed in the target (none before sluice created ``_sluice_commits``)."""
    try:
        with sc.target() as conn:
            return set(conn.scalars(sa.text("SELECT batch_id FROM _sluice_commits")))
    except sa.exc.ProgrammingError:
        return set()


def _assert_taken_over(sc: Scenario, owner: str, held: dict[str, int], b_prefix: str) -> int:
    """Each of ``held`` is done by another owner than ``owner``, under a newer token.

    Returns how many of them daemon b finished (the others: a restarted).
    """
    query = sa.text(
        "SELECT id, state, token, owner FROM sluice_batches WHERE id IN :ids"
    ).bindparams(sa.bindparam("ids", expanding=True))
    with sc.ledger() as conn:
        now = {r.id: r for r in conn.execute(query, {"ids": sorted(held)})}
    for batch, token in held.items():
        row = now[batch]
        assert row.state == "done" and row.token > token and row.owner != owner, (
            f"{sc.name}: batch {batch}, begun by the killed daemon a ({owner}, token {token}), "
            f"is {row.state} with token {row.token} by {row.owner}: no other daemon took it over"
        )
    return sum(now[batch].owner.startswith(b_prefix) for batch in held)


# -- faults ----------------------------------------------------------------------------

REFUSE = """
CREATE FUNCTION chaos_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'chaos: table % refuses writes', TG_TABLE_NAME USING ERRCODE = 'XX000';
END $$;
CREATE FUNCTION chaos_refuse_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = ANY (TG_ARGV::bigint[]) THEN
    RAISE EXCEPTION 'chaos: row % refused', NEW.id USING ERRCODE = 'XX000';
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION chaos_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Waits while the scenario holds this advisory lock (a CommitGate).
  PERFORM pg_advisory_xact_lock_shared(TG_ARGV[0]::bigint);
  RETURN NULL;
END $$;
CREATE FUNCTION chaos_arm() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  made record;
  armed record;
BEGIN
  FOR made IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE'
  LOOP
    FOR armed IN SELECT * FROM chaos_armed WHERE 'public.' || tbl = made.object_identity LOOP
      EXECUTE armed.ddl;
    END LOOP;
  END LOOP;
END $$;
CREATE TABLE chaos_armed (tbl text NOT NULL, ddl text NOT NULL);
CREATE EVENT TRIGGER chaos_arm ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION chaos_arm();
"""


def arm_refusal(sc: Scenario, table: str, keys: list[int] | None = None) -> None:
    """Make the target refuse writes to ``table`` (only rows with ``keys``, if given).

    Installed before the table exists: an event trigger adds the table's
    trigger the moment sluice creates the table. The refusal is an
    ``XX000`` error, not a constraint violation, so the whole batch fails
    (rather than its rows going to ``_sluice_rejects``).
    """
    if keys is None:
        ddl = (f'CREATE TRIGGER chaos_refuse BEFORE INSERT OR UPDATE ON public."{table}" '
               "FOR EACH STATEMENT EXECUTE FUNCTION chaos_refuse()")
    else:
        args = ", ".join(f"'{int(k)}'" for k in keys)
        ddl = (f'CREATE TRIGGER chaos_refuse BEFORE INSERT OR UPDATE ON public."{table}" '
               f"FOR EACH ROW EXECUTE FUNCTION chaos_refuse_row({args})")
    _arm(sc, table, ddl)


def _arm(sc: Scenario, table: str, ddl: str) -> None:
    """Run ``ddl`` (a trigger on ``table``) the moment sluice creates ``table`` in the target."""
    engine = sa.create_engine(sc.target_url)
    try:
        with engine.begin() as conn:
            if not conn.scalar(sa.text("SELECT to_regclass('chaos_armed') IS NOT NULL")):
                # Straight to psycopg, without parameters: '%' is PL/pgSQL's, not a placeholder.
                conn.connection.driver_connection.execute(REFUSE)  # type: ignore[union-attr]
            conn.execute(sa.text("INSERT INTO chaos_armed VALUES (:t, :d)"),
                         {"t": table, "d": ddl})
    finally:
        engine.dispose()


class CommitGate:
    """Holds every write to target tables while closed: an event the scenario sets.

    Armed before the tables exist (like :func:`arm_refusal`): each table's
    trigger takes a shared advisory lock that the closed gate holds
    exclusively, so an import's write waits inside its commit transaction
    (it neither fails nor uses up an attempt) until the gate opens, then
    goes on at once. :meth:`waiting` counts the writes held: imports in
    flight that cannot be done yet. Made closed unless ``closed=False``.
    """

    KEY = 15_015  # advisory locks are per database: one gate per target is enough

    def __init__(self, sc: Scenario, *tables: str, closed: bool = True) -> None:
        self._engine = sa.create_engine(sc.target_url, isolation_level="AUTOCOMMIT")
        self._conn = self._engine.connect()
        for table in tables:
            _arm(sc, table, f'CREATE TRIGGER chaos_gate BEFORE INSERT OR UPDATE ON '
                            f'public."{table}" FOR EACH STATEMENT EXECUTE FUNCTION '
                            f"chaos_gate('{self.KEY}')")
        if closed:
            self.close()

    def close(self) -> None:
        """Hold every later write (waits for writes already past the gate)."""
        self._conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": self.KEY})

    def waiting(self) -> int:
        """Writes to the tables waiting at the gate now."""
        return int(self._conn.scalar(sa.text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid::bigint = 0 AND objid::bigint = :k AND objsubid = 1 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ), {"k": self.KEY}))

    def open(self) -> None:
        """Let every held write through, and every later one (the triggers stay: they no
        longer wait). Idempotent."""
        if not self._conn.closed:
            self._conn.close()  # ends the session, and its advisory lock with it
            self._engine.dispose()


def lift_refusal(sc: Scenario, table: str) -> None:
    """The cause is fixed: drop the table's refusing trigger (and do not re-arm it)."""
    engine = sa.create_engine(sc.target_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM chaos_armed WHERE tbl = :t"), {"t": table})
            conn.exec_driver_sql(f'DROP TRIGGER IF EXISTS chaos_refuse ON public."{table}"')
    finally:
        engine.dispose()


def failed_attempts(sc: Scenario, source: str) -> int:
    """Import attempts of ``source`` that failed so far (failed now, or begun again)."""
    return sc.ledger_count(
        "SELECT coalesce(sum(CASE WHEN state IN ('failed', 'dead') THEN attempts "
        "ELSE attempts - 1 END), 0) FROM sluice_batches WHERE source = :s", s=source,
    )


def done_batches(sc: Scenario, source: str) -> int:
    """Done batches of ``source``."""
    return sc.ledger_count(
        "SELECT count(*) FROM sluice_batches WHERE source = :s AND state = 'done'", s=source
    )


def outages(sc: Scenario, mariadb: TcpProxy, sqs: TcpProxy, injected: Injected,
            outage: float = 8.0, timeout: float = 1800) -> Proc:
    """One daemon through two proxies; MariaDB and SQS go away together while the
    target refuses ``events`` until its batches failed a few times.

    Asserts that ``orders`` keeps flowing while the other two are down, and
    that every failed import is retried to success. Returns the daemon,
    which the caller waits for.

    The outage starts at a moment the scenario chooses, with every orders
    batch still to do: a :class:`CommitGate` holds orders' writes to the
    target until an orders import waits at it, MariaDB and SQS go away, and
    then it opens. Without it, the first orders job could carry every
    orders batch (a Spark job takes up to ``JOB_GROUP`` of them) and leave
    none to be done during the outage.
    """
    arm_refusal(sc, "events")
    gate = CommitGate(sc, "orders")
    try:
        proc = sc.start("outages")
        sc.wait_for("an orders import waits at the gate", lambda: gate.waiting() >= 1, proc,
                    timeout)
        mariadb.pause()
        sqs.pause()
        injected.faults += 2
        before = done_batches(sc, "orders")
    finally:
        gate.open()
    # No orders batch can be done while its write waits at the gate.
    assert before == 0, f"{sc.name}: {before} orders batches done past the gate"
    # Down for ``outage`` seconds; orders must get at least one batch done meanwhile.
    gone = _deadline(outage)
    while not _expired(gone) and proc.wait(0.25) is None:
        pass
    during = done_batches(sc, "orders")
    mariadb.resume()
    sqs.resume()
    assert proc.poll() is None, f"{sc.name}: sluice ended during the outage\n{proc.tail()}"
    assert mariadb.refused + sqs.refused >= 1, "nothing tried to reach MariaDB or SQS"
    assert during > before, (
        f"{sc.name}: orders stalled while MariaDB and SQS were down\n{proc.tail()}"
    )
    injected.notes.append(f"MariaDB and SQS down {outage:.0f} s; orders batches done "
                          f"meanwhile: {during - before}")
    sc.wait_for("events imports failed 3 times", lambda: failed_attempts(sc, "events") >= 3,
                proc, timeout)
    lift_refusal(sc, "events")
    injected.faults += 1
    return proc


def dead_then_retry(sc: Scenario, key: int, injected: Injected, timeout: float = 1800) -> str:
    """A batch whose row ``key`` the target always refuses: it ends ``dead``.

    The run must exit 1, ``sluice status`` must show the dead batch and its
    error; then the cause is fixed and ``sluice retry --dead`` requeues it.
    Returns the status text.
    """
    arm_refusal(sc, "orders", [key])
    proc = sc.start("dead")
    code = proc.wait(timeout)
    if code is None:
        proc.kill()
        raise AssertionError(f"{sc.name}: sluice did not end in {timeout} s\n{proc.tail()}")
    injected.faults += 1
    assert code == 1, f"{sc.name}: a run with a dead batch must exit 1, not {code}\n{proc.tail()}"
    assert "dead batches 1" in proc.output(), proc.tail()
    status = sc.sluice("status")
    assert status.returncode == 0, status.stderr
    dead = re.search(r"dead orders batch (\w+) \((\d+) attempts\): (.*)", status.stdout)
    assert dead is not None, f"no dead batch in sluice status:\n{status.stdout}"
    assert f"chaos: row {key} refused" in dead.group(3), status.stdout
    assert sc.states()["dead"] == 1, sc.states()
    lift_refusal(sc, "orders")
    retried = sc.sluice("retry", "--dead")
    assert retried.returncode == 0, retried.stderr
    assert "requeued 1 batches (orders 1)" in retried.stdout, retried.stdout
    return status.stdout


def _deadline(seconds: float) -> float:
    return time.monotonic() + seconds


def _expired(deadline: float) -> bool:
    return time.monotonic() > deadline
