"""The daemon's HTTP endpoint: one small WSGI app that routes each path to its handler.

``/metrics`` is prometheus_client's WSGI app on sluice's registry
(:mod:`.metrics`); the other paths are handlers the caller gives, such as
``/record`` (:mod:`.record`). A path nobody serves answers 404 with the paths
that exist. Requests are read by :mod:`.server` (asyncio, TLS where asked, a
token where set: :mod:`.auth`) and answered on its worker threads, never on the
main loop's: a handler may block on a database without holding anything else up.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from scheduler.observe.server import HttpServer

log = logging.getLogger("sluice.http")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Query = dict[str, list[str]]
"""A request's query parameters: each name with its values, in order (``key=`` repeats)."""


def json_response(start_response: StartResponse, status: int, body: Any) -> list[bytes]:
    """Answer ``body`` as JSON with HTTP ``status``."""
    data = json.dumps(body, default=str).encode()
    start_response(f"{status} {HTTPStatus(status).phrase}", [
        ("Content-Type", "application/json"), ("Content-Length", str(len(data))),
        ("Cache-Control", "no-store"),
    ])  # fmt: skip
    return [data]


def json_route(answer: Callable[[Query], tuple[int, Any]]) -> WsgiApp:
    """A WSGI app for a GET route that answers JSON: ``answer(query)`` gives
    the HTTP status and the body. Anything it raises is a 500 with the error."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return json_response(start_response, 405, {"error": "only GET is served"})
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        try:
            status, body = answer(query)
        except Exception as error:  # a request must get an answer; the server goes on
            log.exception("%s failed", environ.get("PATH_INFO"))
            status, body = 500, {"error": f"{type(error).__name__}: {error}"}
        return json_response(start_response, status, body)

    return app


class Router:
    """The WSGI app of the endpoint: each path to its app, 404 for any other."""

    def __init__(self, routes: Mapping[str, WsgiApp]) -> None:
        self.routes = dict(routes)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        app = self.routes.get(path)
        if app is None:
            return json_response(start_response, 404,
                                 {"error": f"nothing is served at {path}",
                                  "paths": sorted(self.routes)})  # fmt: skip
        return app(environ, start_response)


class HttpEndpoint:
    """The running endpoint; call it (or :meth:`stop`) to stop serving."""

    def __init__(self, server: HttpServer, router: Router) -> None:
        self._server = server
        self._router = router
        self._stopped = False

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen by the system for port 0)."""
        return self._server.port

    @property
    def scheme(self) -> str:
        """``https`` under TLS, else ``http``."""
        return "https" if self._server.tls is not None else "http"

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, close the socket, and close the routes that hold
        connections of their own (those with a ``close()``). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._server.stop(timeout)
        for app in self._router.routes.values():
            close = getattr(app, "close", None)
            if callable(close):
                close()

    __call__ = stop


def serve(
    port: int, routes: Mapping[str, WsgiApp], *, host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None, token: str | None = None,
) -> HttpEndpoint:  # fmt: skip
    """Serve ``routes`` on ``host:port`` (0: any free port) on a thread of its own: HTTPS
    with ``tls``; every path asks for ``token`` when one is given (see :mod:`.auth`).

    Raises ``OSError`` when the port is taken.
    """
    from scheduler.observe.auth import TokenAuth

    router = Router(routes)
    auth = None if token is None else TokenAuth(token, secure=tls is not None)
    server = HttpServer(router, host, port, tls=tls, auth=auth)
    server.start()
    return HttpEndpoint(server, router)
