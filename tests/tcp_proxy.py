"""A small threaded TCP proxy on loopback that a test can cut and restore.

``TcpProxy(("127.0.0.1", 5432))`` listens on a free loopback port and pipes
every connection to the upstream server. :meth:`TcpProxy.pause` makes the
database "go away": live connections are reset and new ones are accepted and
reset at once, so clients see a dropped connection (not a hang). Each side of
a connection is pumped by its own thread; every socket operation has a short
timeout, so :meth:`TcpProxy.close` returns promptly.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

_POLL = 0.2  # how often blocked threads look at the stop flag
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends an RST


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream``; :meth:`pause`/:meth:`resume` cut it."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_POLL)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._paused = threading.Event()
        self._closed = threading.Event()
        self.accepted = 0  # connections piped through
        self.refused = 0  # connections reset while paused
        self._acceptor = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._acceptor.start()

    def url_for(self, url: str) -> str:
        """``url`` (an SQLAlchemy URL of the upstream) pointed at the proxy instead."""
        import sqlalchemy as sa

        parsed = sa.make_url(url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    @property
    def paused(self) -> bool:
        """Whether connections are being cut."""
        return self._paused.is_set()

    def pause(self) -> None:
        """The server goes away: reset live connections, reset new ones until :meth:`resume`."""
        self._paused.set()
        with self._lock:
            live, self._live = list(self._live), set()
        for sock in live:
            _reset(sock)

    def resume(self) -> None:
        """The server is back: new connections are piped again."""
        self._paused.clear()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, reset every connection and join the threads."""
        self._closed.set()
        self.pause()
        self._acceptor.join(timeout)
        self._listener.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- threads -------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._paused.is_set():
                self.refused += 1
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._paused.is_set():  # paused while we connected
                    _reset(client)
                    _reset(server)
                    continue
                self.accepted += 1
                self._live.update((client, server))
                pumps = [
                    threading.Thread(target=self._pump, args=(a, b), daemon=True)
                    for a, b in ((client, server), (server, client))
                ]
                self._threads = [t for t in self._threads if t.is_alive()] + pumps
            for pump in pumps:
                pump.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(_POLL)
        try:
            while not self._closed.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass  # reset by pause(), or by the other side
        finally:
            with self._lock:
                self._live.discard(src)
                self._live.discard(dst)
            _reset(src)
            _reset(dst)


def _reset(sock: socket.socket) -> None:
    """Cut a connection: wake any thread blocked on it, then close with an RST."""
    for step in (
        lambda: sock.shutdown(socket.SHUT_RDWR),
        lambda: sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET),
        sock.close,
    ):
        with contextlib.suppress(OSError):
            step()
