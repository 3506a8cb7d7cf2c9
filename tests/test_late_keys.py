"""A large table's primary key follows its first pass, as pg_restore builds it, and exactly
once holds meanwhile (``spark_jobs/load/late_keys.py`` says why).

Each test runs ``sluice run`` as the user does, on a PostgreSQL source table the
statistics count above :data:`spark_jobs.schema.plan.LATE_KEY_ROWS`, and judges the
target by the server's own answers: its catalogue (``pg_constraint``, ``pg_indexes``),
its rows against the source's (count and a digest of every row's text), and an insert of
a key already there, which the key must refuse.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from spark_jobs.schema.plan import LATE_KEY_ROWS
from tests.helpers import run_sql, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]  # whole runs of the CLI

SLUICE = str(Path(sys.executable).with_name("sluice"))
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
ROWS = LATE_KEY_ROWS + 20_000


def _source(url: str) -> None:
    run_sql(
        url,
        "CREATE TABLE events (id bigint CONSTRAINT events_pk PRIMARY KEY, kind text NOT NULL, "
        "note text, at timestamptz)",
        "CREATE INDEX events_kind_idx ON events (kind)",
        f"INSERT INTO events SELECT g * 3, 'k' || mod(g, 7), CASE WHEN mod(g, 5) = 0 THEN NULL "
        f"ELSE md5(g::text) END, timestamptz '2024-01-01' + g * interval '1 s' "
        f"FROM generate_series(1, {ROWS}) g",
        "VACUUM ANALYZE events",
    )


def _config(folder: Path, source: str, target: str, rate: int) -> Path:
    path = folder / "sluice.yaml"
    path.write_text(f"""
ledger: sqlite:///ledger.db
sources:
  events:
    kind: sql
    url: '{source}'
    table: events
    key: id
    target: wh.events
    limits: {{max_rows_per_s: {rate}}}
targets:
  wh: {{kind: jdbc, url: '{target}'}}
""")
    return path


def _state(url: str) -> tuple[int, list[tuple[str, str]]]:
    """The target table's rows and its constraints as the server prints them."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if conn.execute(sa.text("SELECT to_regclass('events')")).scalar() is None:
                return 0, []
            rows = conn.execute(sa.text("SELECT count(*) FROM events")).scalar_one()
            constraints = conn.execute(sa.text(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = to_regclass('events') ORDER BY 1")).all()  # fmt: skip
        return int(rows), [tuple(c) for c in constraints]  # type: ignore[misc]
    finally:
        engine.dispose()


def _digest(url: str) -> tuple[Any, ...]:
    """Every row, by the server's own text of it: the count, the distinct keys, a digest."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(sa.text(
                "SELECT count(*), count(DISTINCT id), "
                "md5(string_agg(e::text, '|' ORDER BY id)) FROM events e")).one())  # fmt: skip
    finally:
        engine.dispose()


def _watch(url: str, stop: threading.Event, seen: list[tuple[int, list[Any]]]) -> None:
    """Note the target's rows and constraints while a run loads them."""
    while not stop.is_set():
        rows, constraints = _state(url)
        if 0 < rows < ROWS:
            seen.append((rows, constraints))
        stop.wait(0.1)


def _run_watched(path: Path, target: str) -> list[tuple[int, list[Any]]]:
    """``sluice run --until-drained`` to its end (exit 0), the target's rows and constraints
    noted meanwhile."""
    stop, seen = threading.Event(), []  # type: ignore[var-annotated]
    watcher = threading.Thread(target=_watch, args=(target, stop, seen), daemon=True)
    watcher.start()
    try:
        ran = subprocess.run([SLUICE, "run", path.name, "--until-drained"], cwd=path.parent,
                             env=ENV, capture_output=True, text=True, timeout=300)  # fmt: skip
    finally:
        stop.set()
        watcher.join()
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
    return seen


def _pg_indexes(url: str) -> list[tuple[str, str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted((n, d.replace("public.", "")) for n, d in conn.execute(sa.text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'events'")))
    finally:
        engine.dispose()


def _refuses_a_duplicate(url: str) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO events (id, kind) VALUES (3, 'again')"))
    except sa.exc.IntegrityError:
        return True
    finally:
        engine.dispose()
    return False


@pytest.mark.parametrize("clash", [False, True], ids=["its name", "a name taken"])
def test_a_large_tables_key_is_built_after_its_load_and_the_target_is_its_source(
    clash: bool, pg_factory: Any, tmp_path: Path
) -> None:
    source, target = pg_factory.create("lk_src"), pg_factory.create("lk_dst")
    _source(source)
    if clash:  # the source key's name is another relation's in the target schema
        run_sql(target, "CREATE TABLE events_pk (note text)")
    name = "events_pkey" if clash else "events_pk"
    path = _config(tmp_path, source, target, rate=60_000)
    planned = subprocess.run([SLUICE, "plan", path.name], cwd=tmp_path, env=ENV,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert re.search(r"primary key events_pk +PRIMARY KEY \(id\).*: after the table's first "
                     r"pass", planned.stdout), planned.stdout  # fmt: skip
    seen = _run_watched(path, target)
    # While its rows went in, the table had no primary key (its checks, none here, and
    # its columns NOT NULL go in with it); once loaded, the source's key, by its name.
    assert seen and all(constraints == [] for _, constraints in seen), seen
    assert _state(target) == (ROWS, [(name, "PRIMARY KEY (id)")])
    assert _pg_indexes(target) == [(n.replace("events_pk", name), d.replace("events_pk", name))
                                   for n, d in _pg_indexes(source)]  # fmt: skip
    assert _digest(target) == _digest(source) == (ROWS, ROWS, _digest(source)[2])
    assert _refuses_a_duplicate(target)


def test_a_run_killed_before_the_key_restarts_by_building_it_and_every_row_lands_once(
    pg_factory: Any, tmp_path: Path
) -> None:
    source, target = pg_factory.create("lk_src"), pg_factory.create("lk_dst")
    _source(source)
    path = _config(tmp_path, source, target, rate=30_000)
    first = subprocess.Popen([SLUICE, "run", path.name], cwd=tmp_path, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    try:
        wait_until(lambda: 0 < _state(target)[0] < ROWS // 2, "rows in the target", timeout=120)
        assert _state(target)[1] == []  # no key yet: the load was under way without it
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    killed = _state(target)[0]
    seen = _run_watched(path, target)
    # The restart did not make the table: it gave it its key before it wrote a row.
    keyed = [("events_pk", "PRIMARY KEY (id)")]
    assert all(constraints == keyed for rows, constraints in seen if rows > killed), seen
    assert any(constraints == keyed and rows < ROWS for rows, constraints in seen), seen
    assert _state(target) == (ROWS, keyed)
    assert _digest(target) == _digest(source)
    assert _refuses_a_duplicate(target)
