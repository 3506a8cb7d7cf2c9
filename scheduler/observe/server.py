"""The daemon's HTTP/1.1 server: an asyncio loop reads every request, a few threads answer.

Made for an endpoint that other hosts may reach. One event loop, on a thread of
its own, accepts the connections, does their TLS handshakes and reads each
request whole (its head within :data:`HEAD_TIMEOUT`, however slowly it comes,
at most :data:`HEAD_LIMIT` bytes, a body of at most :data:`BODY_LIMIT`) before a
worker thread (:data:`WORKERS` of them) runs the WSGI app on it; so a client that
opens a connection and sends a byte a second holds no thread, only a socket,
until its time is up (wsgiref's server gave each such client a thread for as
long as it kept sending). Connections are kept alive between requests and
limited to :data:`MAX_CONNECTIONS`. A :class:`~.auth.TokenAuth` is asked about
every request before the app runs; a refused one is answered on the loop.
"""

from __future__ import annotations

import asyncio
import io
import logging
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from scheduler.observe.auth import TokenAuth

log = logging.getLogger("sluice.http")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

HEAD_LIMIT = 16 * 1024
"""Bytes a request's line and headers may take (431 past it)."""
BODY_LIMIT = 1 << 20
"""Bytes a request's body may take (413 past it)."""
HEAD_TIMEOUT = 10.0
"""Seconds a request's whole head may take to arrive, and a kept-alive connection to
stay idle before its next request."""
WRITE_TIMEOUT = 30.0
"""Seconds an answer may take to be sent (a client that does not read is dropped)."""
MAX_CONNECTIONS = 512
"""Connections open at once; one more is closed as it comes."""
WORKERS = 4
"""Threads that run the app: a request waits for one, never a slow client."""


class Answer:
    """What the app said: status line, headers and body, whole."""

    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @classmethod
    def plain(cls, code: int, text: str = "", headers: Iterable[tuple[str, str]] = ()) -> Answer:
        """A short answer of ``code`` with ``text`` as its body."""
        return cls(f"{code} {HTTPStatus(code).phrase}",
                   [("Content-Type", "text/plain; charset=utf-8"), *headers],
                   text.encode())  # fmt: skip


class HttpServer:
    """Serves ``app`` on ``host:port`` (0: a free port) once :meth:`start`-ed; HTTPS with
    ``tls``; every request but the sign-in's needs ``auth``'s consent when given."""

    def __init__(
        self, app: WsgiApp, host: str, port: int, *, tls: ssl.SSLContext | None = None,
        auth: TokenAuth | None = None, workers: int = WORKERS,
    ) -> None:  # fmt: skip
        self.app = app
        self.host = host
        self.tls = tls
        self.auth = auth
        self._wanted_port = port
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="http-worker")
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="metrics-http",
                                        daemon=True)  # fmt: skip
        self._connections = 0
        self._port = port

    @property
    def port(self) -> int:
        """The port it listens on (listened on, once stopped)."""
        return self._port

    def start(self) -> None:
        """Listen (raises ``OSError`` when the port is taken), then serve on a thread."""
        start = asyncio.start_server(self._client, self.host, self._wanted_port, ssl=self.tls,
                                     limit=HEAD_LIMIT, ssl_handshake_timeout=HEAD_TIMEOUT
                                     if self.tls else None)  # fmt: skip
        self._server = self._loop.run_until_complete(start)
        self._port = int(self._server.sockets[0].getsockname()[1])
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: no new connection, open ones closed, the workers let go."""
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
            try:
                future.result(timeout)
            except Exception as error:  # stopping goes on whatever the loop says
                log.debug("http: closing: %s", error)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if not self._loop.is_running():
            self._loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

    # -- one connection ----------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._connections >= MAX_CONNECTIONS:
            writer.close()
            return
        self._connections += 1
        peer = (writer.get_extra_info("peername") or ("?",))[0]
        try:
            while await self._one(reader, writer, str(peer)):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass  # the client went, or took too long: nothing to answer
        except asyncio.CancelledError:
            raise
        except Exception:  # one connection's trouble never stops the server
            log.exception("http: a connection from %s failed", peer)
        finally:
            self._connections -= 1
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   peer: str) -> bool:  # fmt: skip
        """Read one request and answer it; whether the connection stays open."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            await self._send(writer, Answer.plain(431, "request head too large"), False, False)
            return False
        request = _parse(head)
        if request is None:
            await self._send(writer, Answer.plain(400, "bad request"), False, False)
            return False
        method, target, version, headers = request
        length = headers.get("content-length", "0")
        if "transfer-encoding" in headers or not length.isdigit():
            await self._send(writer, Answer.plain(411, "a Content-Length is needed"), False, False)
            return False
        if int(length) > BODY_LIMIT:
            await self._send(writer, Answer.plain(413, "request body too large"), False, False)
            return False
        body = await asyncio.wait_for(reader.readexactly(int(length)), HEAD_TIMEOUT)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        path, _, query = target.partition("?")
        refused = None if self.auth is None else await self.auth.check(method, path, headers,
                                                                        body, peer)  # fmt: skip
        if refused is not None:
            await self._send(writer, refused, method == "HEAD", keep)
            return keep
        environ = self._environ(method, path, query, version, headers, body, writer)
        answer = await asyncio.get_running_loop().run_in_executor(self._pool, _call, self.app,
                                                                   environ)  # fmt: skip
        log.debug("%s %s %s %s", peer, method, path, answer.status.split(" ", 1)[0])
        await self._send(writer, answer, method == "HEAD", keep)
        return keep

    def _environ(self, method: str, path: str, query: str, version: str,
                 headers: dict[str, str], body: bytes,
                 writer: asyncio.StreamWriter) -> dict[str, Any]:  # fmt: skip
        local = writer.get_extra_info("sockname") or (self.host, 0)
        peer = writer.get_extra_info("peername") or ("", 0)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": unquote(path),
            "QUERY_STRING": query, "SERVER_NAME": str(local[0]), "SERVER_PORT": str(local[1]),
            "SERVER_PROTOCOL": version, "REMOTE_ADDR": str(peer[0]),
            "CONTENT_TYPE": headers.get("content-type", ""), "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0), "wsgi.url_scheme": "https" if self.tls else "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
            "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        }  # fmt: skip
        for name, value in headers.items():
            if name not in ("content-type", "content-length"):
                environ["HTTP_" + name.upper().replace("-", "_")] = value
        return environ

    async def _send(self, writer: asyncio.StreamWriter, answer: Answer, head_only: bool,
                    keep: bool) -> None:  # fmt: skip
        names = {name.lower() for name, _ in answer.headers}
        lines = [f"HTTP/1.1 {answer.status}", *(f"{n}: {v}" for n, v in answer.headers)]
        if "content-length" not in names:
            lines.append(f"Content-Length: {len(answer.body)}")
        lines.append(f"Connection: {'keep-alive' if keep else 'close'}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head_only:
            writer.write(answer.body)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


def _parse(head: bytes) -> tuple[str, str, str, dict[str, str]] | None:
    """The request line's method, target and version, and the headers (names in lower
    case; a repeated one's values joined by commas); None when it is not HTTP/1.x."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    first, *rest = text[:-4].split("\r\n")
    parts = first.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not parts[1].startswith("/"):
        return None
    headers: dict[str, str] = {}
    for line in rest:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            return None
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return parts[0], parts[1], parts[2], headers


def _call(app: WsgiApp, environ: dict[str, Any]) -> Answer:
    """Run the WSGI app on a worker thread; its answer, whole (a failure is a 500)."""
    said: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        said[:] = [status, list(headers)]
        return lambda data: None  # the write() of old WSGI apps: not used by sluice's

    try:
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()
    except Exception:
        log.exception("http: %s failed", environ.get("PATH_INFO"))
        return Answer.plain(500, "the request failed")
    if not said:
        return Answer.plain(500, "the request had no answer")
    return Answer(said[0], said[1], body)
