"""A source database that does not answer never holds the others back (sources.reach).

Run as users run it (``sluice run`` as a process, on its default local path), with one
source behind a proxy on loopback that the test controls: it accepts connections and
never answers, then forwards them. What is certainly the config's fault (a password, a
table, a host name) still stops the start with exit 2, naming the source and the key.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers import assert_same_rows, count_rows, seed_orders, wait_until
from tests.proxy import Proxy

pytestmark = [pytest.mark.postgres]

SLUICE = str(Path(sys.executable).parent / "sluice")
ROWS = 3_000


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5) as answer:
        return dict(json.load(answer))


def test_a_hung_database_at_start_holds_no_other_source_back_and_migrates_once_it_answers(
    pg_url: str, pg_target: str, tmp_path: Path
) -> None:
    for table in ("fast_a", "fast_b", "far"):
        seed_orders(pg_url, ROWS, table=table)
    source = sa.make_url(pg_url)
    proxy = Proxy(source.port or 5432)
    # The hung database's own connect timeout, as a user sets one per database.
    far = source.set(port=proxy.port, query={"connect_timeout": "2"}).render_as_string(False)
    port = _free_port()
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
metrics_port: {port}
sources:
  fast_a: {{kind: sql, url: "{pg_url}", table: fast_a, key: id, target: out.fast_a}}
  fast_b: {{kind: sql, url: "{pg_url}", table: fast_b, key: id, target: out.fast_b}}
  far: {{kind: sql, url: "{far}", table: far, key: id, target: out.far}}
strategy: {{fair: {{fast_a: 1, fast_b: 1, far: 1}}}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                               env=_env(), stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        # The two answering sources drain while the third's host never answers.
        def drained() -> bool:
            assert run.poll() is None, "sluice ended before the far source answered"
            return count_rows(pg_target, "fast_a") == ROWS == count_rows(pg_target, "fast_b")

        wait_until(drained, "the answering sources drained", timeout=90, poll=0.5)
        assert proxy.accepted > 0 and run.poll() is None
        assert count_rows(pg_target, "far") == 0

        def far_view() -> dict[str, Any]:
            return next(s for s in _status(port)["sources"] if s["name"] == "far")

        # The page shows it unreachable, for how long and why (its password never).
        wait_until(lambda: far_view()["failing_s"], "the far source shown unreachable",
                   timeout=30, poll=0.5)  # fmt: skip
        assert "cannot connect" in far_view()["refill_error"]
        assert "source far" in far_view()["refill_error"]
        proxy.forward()
        run.wait(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        proxy.close()
        output = log.read_text()
        print(output[-5000:])  # shown where the test fails
    assert run.returncode == 0, output
    assert "far: its database did not answer at start" in output
    for table in ("fast_a", "fast_b", "far"):
        assert assert_same_rows(pg_url, table, pg_target, table) == ROWS


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        pytest.param("mysql+pymysql://root:not-the-password@127.0.0.1:3306/test",
                     "Access denied", marks=pytest.mark.mariadb),
        ("postgresql+psycopg://postgres@no-such-host.invalid:5432/test", "resolve host"),
        ("postgresql+psycopg://postgres@127.0.0.1:5432/no_such_database_here", "does not exist"),
        ("TABLE", "no_such_table"),
    ],
    ids=["bad password", "unknown host", "missing database", "missing table"],
)
def test_what_the_config_names_wrong_still_stops_the_start_with_exit_2(
    pg_url: str, pg_target: str, tmp_path: Path, where: str, expected: str
) -> None:
    seed_orders(pg_url, 10, table="fine")
    url, table = (pg_url, "no_such_table") if where == "TABLE" else (where, "fine")
    (tmp_path / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
sources:
  fine: {{kind: sql, url: "{pg_url}", table: fine, key: id, target: out.fine}}
  wrong: {{kind: sql, url: "{url}", table: {table}, key: id, target: out.wrong}}
targets:
  out: {{kind: jdbc, url: "{pg_target}"}}
""")
    done = subprocess.run([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "source wrong" in done.stderr and expected in done.stderr
    assert "not-the-password" not in done.stderr + done.stdout
    if where != "TABLE":
        assert "sources.wrong.url" in done.stderr
    assert count_rows(pg_target, "fine") == 0  # nothing started
