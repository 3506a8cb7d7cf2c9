"""The daemon's endpoint run as a service: TLS, a token on every path, a browser's sign-in,
slow clients that hold nothing, and the config's refusals.

A real ``sluice run`` (as users run it) serves HTTPS with a certificate of the test's own
CA (trustme) on loopback; every client here is a real one (``ssl``, ``http.client``,
headless Chromium), and every answer is read from the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families

from scheduler.observe.auth import TokenAuth
from tests.conftest import need
from tests.helpers import seed_orders, wait_until

SLUICE = str(Path(sys.executable).parent / "sluice")
TOKEN = "sluice-test-token-0123456789abcdef"
ROWS = 12_000
RATE = 600
PATHS = ("/", "/status.json", "/metrics", "/record?source=orders&key=1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _certs(folder: Path, ca: trustme.CA) -> Path:
    """The server's certificate and key for 127.0.0.1 in ``folder``; the CA's file."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.private_key_pem.write_to_path(str(folder / "server.key"))
    with (folder / "server.pem").open("wb") as out:
        for pem in leaf.cert_chain_pems:
            out.write(pem.bytes())
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return folder / "ca.pem"


def _ask(port: int, path: str, context: ssl.SSLContext, *, token: str | None = None,
         headers: dict[str, str] | None = None, method: str = "GET", body: str | None = None,
         timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """One HTTPS request; the status, headers and body."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    try:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if body is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=sent)
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def _config(folder: Path, port: int, http: str) -> Path:
    (folder / "sluice.yaml").write_text(f"""
ledger: sqlite:///ledger.db
http: {http}
sources:
  orders: {{kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: lake.orders,
           page_size: 300, limits: {{max_rows_per_s: {RATE}}}}}
targets:
  lake: {{kind: parquet, path: ./lake}}
batch: {{max_items: 600, max_wait: 50ms}}
""")
    return folder / "sluice.yaml"


def _validate(folder: Path, http: str) -> subprocess.CompletedProcess[str]:
    config = _config(folder, 9999, http)
    return subprocess.run([SLUICE, "validate", str(config)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "SLUICE_HTTP_TOKEN": TOKEN})  # fmt: skip


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def daemon(tmp_path: Path, ca: trustme.CA) -> Iterator[tuple[int, ssl.SSLContext]]:
    """``sluice run`` serving HTTPS on 127.0.0.1 with a token from the environment; its port
    and a client context that trusts the test's CA. Its log is ``run.log``."""
    seed_orders(f"sqlite:///{tmp_path / 'shop.db'}", ROWS)
    port = _free_port()
    ca_file = _certs(tmp_path, ca)
    _config(tmp_path, port, f"{{host: 127.0.0.1, port: {port}, token: \"${{SLUICE_HTTP_TOKEN}}\", "
                            "tls: {cert: server.pem, key: server.key}}")  # fmt: skip
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SLUICE_HTTP_TOKEN": TOKEN}
    with (tmp_path / "run.log").open("w") as out:
        run = subprocess.Popen([SLUICE, "run", "sluice.yaml", "--until-drained"], cwd=tmp_path,
                               env=env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        wait_until(lambda: _rows_done(port, context) > 0, "the first rows", timeout=120,
                   poll=0.3)  # fmt: skip
        yield port, context
        run.send_signal(signal.SIGTERM)  # drained (0), or stopped by it (143)
        assert run.wait(120) in (0, 143), (tmp_path / "run.log").read_text()[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def _rows_done(port: int, context: ssl.SSLContext) -> int:
    try:
        status, _, body = _ask(port, "/status.json", context, token=TOKEN)
    except OSError:
        return 0  # not serving yet
    return int(json.loads(body)["totals"]["rows_done"]) if status == 200 else 0


@pytest.mark.slow  # a server over TLS (and a browser) started: seconds
@pytest.mark.timeout(300)
def test_every_path_asks_for_the_token_over_tls_and_slow_clients_hold_nothing(
    daemon: tuple[int, ssl.SSLContext], tmp_path: Path
) -> None:
    port, context = daemon
    for path in PATHS:
        assert _ask(port, path, context)[0] == 401, path
        assert _ask(port, path, context, token=TOKEN[:-1] + "x")[0] == 401, path
        status, headers, body = _ask(port, path, context, token=TOKEN)
        assert status == 200, (path, status, body[:300])
        assert TOKEN.encode() not in body
    # A refusal says nothing but that; Prometheus' scrape (the bearer token) parses.
    status, headers, body = _ask(port, "/metrics", context)
    assert headers["www-authenticate"].startswith("Bearer") and body == b"unauthorized"
    _, _, metrics = _ask(port, "/metrics", context, token=TOKEN)
    families = {family.name: family for family in text_string_to_metric_families(metrics.decode())}
    buffered = families["sluice_buffer_items"].samples
    assert [sample.labels["source"] for sample in buffered] == ["orders"]

    # The certificate is checked: a client that does not trust the CA is refused it, and
    # plain HTTP on the TLS port gets no answer.
    with pytest.raises(ssl.SSLCertVerificationError):
        _ask(port, "/", ssl.create_default_context(), token=TOKEN)
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    with pytest.raises((http.client.HTTPException, ConnectionError, TimeoutError)):
        plain.request("GET", "/status.json", headers={"Authorization": f"Bearer {TOKEN}"})
        plain.getresponse().read()
    plain.close()

    # A browser signs in (the cookie: HttpOnly, SameSite=Strict, Secure under TLS).
    status, headers, _ = _ask(port, "/signin", context, method="POST", body=f"token={TOKEN}")
    cookie = headers["set-cookie"]
    assert status == 303 and headers["location"] == "/"
    assert {"HttpOnly", "SameSite=Strict", "Secure"} <= {p.strip() for p in cookie.split(";")}
    assert TOKEN not in cookie
    session = cookie.split(";")[0]
    assert _ask(port, "/", context, headers={"Cookie": session})[0] == 200
    assert _ask(port, "/", context, headers={"Cookie": session[:-1] + "0"})[0] == 401

    # 200 clients that send their request a byte a second hold no thread: the page answers
    # within 2 s meanwhile, and the batches go on.
    slow = _SlowClients(port, context, 200)
    slow.start()
    try:
        wait_until(lambda: slow.sending, "the slow clients to connect", timeout=60)
        before = _rows_done(port, context)
        for _ in range(3):
            started = time.monotonic()
            assert _ask(port, "/", context, token=TOKEN, timeout=2.0)[0] == 200
            assert time.monotonic() - started < 2.0
            time.sleep(1.0)
        wait_until(lambda: _rows_done(port, context) > before, "batches while they trickle",
                   timeout=30)  # fmt: skip
        assert slow.connected == 200
    finally:
        slow.stop()
    log = (tmp_path / "run.log").read_text()
    assert TOKEN not in log
    status_json = subprocess.run([SLUICE, "status", "sluice.yaml", "--json"], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "SLUICE_HTTP_TOKEN": TOKEN})  # fmt: skip
    assert status_json.returncode == 0, status_json.stderr
    assert TOKEN not in status_json.stdout + status_json.stderr


@pytest.mark.slow  # a server over TLS (and a browser) started: seconds
@pytest.mark.timeout(300)
def test_headless_chromium_signs_in_and_reads_the_page(
    daemon: tuple[int, ssl.SSLContext], tmp_path: Path
) -> None:
    need(shutil.which("chromium") is not None,
         "chromium is not installed (make test installs Debian's package)")  # fmt: skip
    port, _ = daemon
    base = f"https://127.0.0.1:{port}"

    def dom(url: str, profile: str) -> str:
        command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                   "--ignore-certificate-errors", f"--user-data-dir={tmp_path / profile}",
                   "--virtual-time-budget=5000", "--dump-dom", url]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=90,
                              check=True).stdout  # fmt: skip

    assert "Sign in first" in dom(f"{base}/", "stranger")
    # The sign-in page takes the token from its fragment (never sent, never logged), posts
    # it, and the browser lands on the page with its cookie.
    signed = dom(f"{base}/signin#token={TOKEN}", "operator")
    assert 'data-field="rows_done"' in signed, signed[:2000]
    assert 'data-field="rows_done"' in dom(f"{base}/", "operator")  # the cookie kept
    assert TOKEN not in signed


def test_validate_refuses_an_open_endpoint_without_a_token_a_short_one_and_bad_certificates(
    tmp_path: Path, ca: trustme.CA
) -> None:
    open_host = _validate(tmp_path, "{host: 0.0.0.0, port: 9108}")
    assert open_host.returncode == 2
    assert "http" in open_host.stderr and "set token" in open_host.stderr, open_host.stderr
    short = _validate(tmp_path, "{host: 0.0.0.0, token: too-short}")
    assert short.returncode == 2 and "at least 16 characters" in short.stderr, short.stderr
    assert "too-short" not in short.stderr + short.stdout
    _certs(tmp_path, ca)
    missing = _validate(tmp_path, "{tls: {cert: nowhere.pem, key: server.key}}")
    assert missing.returncode == 2 and "http.tls.cert: cannot read" in missing.stderr
    other = ca.issue_cert("127.0.0.1")
    other.private_key_pem.write_to_path(str(tmp_path / "other.key"))
    mismatched = _validate(tmp_path, "{tls: {cert: server.pem, key: other.key}}")
    assert mismatched.returncode == 2 and "http.tls" in mismatched.stderr, mismatched.stderr
    good = _validate(tmp_path, "{host: 0.0.0.0, token: \"${SLUICE_HTTP_TOKEN}\", "
                               "tls: {cert: server.pem, key: server.key}}")  # fmt: skip
    assert good.returncode == 0, good.stderr
    (tmp_path / "old.yaml").write_text(
        (tmp_path / "sluice.yaml").read_text().replace(
            "http: {host: 0.0.0.0, token: \"${SLUICE_HTTP_TOKEN}\", tls: {cert: server.pem, "
            "key: server.key}}", "metrics_port: 9108"))  # fmt: skip
    old = subprocess.run([SLUICE, "validate", str(tmp_path / "old.yaml")], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert old.returncode == 0 and "metrics_port is deprecated" in old.stdout, old


class _SlowClients(threading.Thread):
    """``count`` TLS connections that send a request a byte a second, never finishing it
    within the test (a slowloris)."""

    def __init__(self, port: int, context: ssl.SSLContext, count: int) -> None:
        super().__init__(daemon=True)
        self.port, self.context, self.count = port, context, count
        self.connected = 0
        self.sending = False
        self._halt = threading.Event()

    def run(self) -> None:
        sockets: list[ssl.SSLSocket] = []
        try:
            for _ in range(self.count):
                raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                sockets.append(self.context.wrap_socket(raw, server_hostname="127.0.0.1"))
                self.connected += 1
            request = b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 64
            self.sending = True
            for byte in range(len(request)):
                for sock in sockets:
                    # A socket the server dropped at its deadline (as it should) fails here.
                    with contextlib.suppress(OSError):
                        sock.send(request[byte : byte + 1])
                if self._halt.wait(1.0):
                    return
        finally:
            for sock in sockets:
                sock.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


def test_refusals_in_a_row_from_one_address_wait_longer_and_a_success_forgets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    auth = TokenAuth(TOKEN, secure=True)
    wrong = {"authorization": "Bearer not-the-token-at-all"}

    def ask(headers: dict[str, str], peer: str = "10.0.0.1") -> int | None:
        answer = asyncio.run(auth.check("GET", "/metrics", headers, b"", peer))
        return None if answer is None else int(answer.status.split()[0])

    assert [ask(wrong) for _ in range(8)] == [401] * 8
    assert waits == [0.5, 1.0, 2.0]  # five free, then each longer
    assert ask(wrong, "10.0.0.2") == 401 and len(waits) == 3  # another address: its own count
    assert ask({"authorization": f"Bearer {TOKEN}"}) is None
    assert ask(wrong) == 401 and len(waits) == 3  # forgotten after a success
