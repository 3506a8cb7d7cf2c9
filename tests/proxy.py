"""A TCP proxy on loopback that a test controls: a database host that hangs, then answers.

``hang()``: connections are accepted and never answered (a dropped route, a dead load
balancer, a paused VM look so to a client), and the ones it was forwarding are cut.
``forward()``: connections are passed to the upstream port, both ways.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Listens on ``127.0.0.1:port``; starts hanging (see the module)."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self._upstream = (host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._forwarding = False
        self._held: list[socket.socket] = []  # accepted while hanging: never answered
        self._piped: list[socket.socket] = []  # both ends of each forwarded connection
        self.accepted = 0
        self._closed = False
        threading.Thread(target=self._accept, name="proxy", daemon=True).start()

    def hang(self) -> None:
        """From now on accept and never answer; cut what was forwarded."""
        with self._lock:
            self._forwarding = False
            piped, self._piped = self._piped, []
        for sock in piped:
            _close(sock)

    def forward(self) -> None:
        """From now on pass connections to the upstream."""
        with self._lock:
            self._forwarding = True

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._closed = True
        _close(self._listener)
        with self._lock:
            every, self._held, self._piped = self._held + self._piped, [], []
        for sock in every:
            _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                forwarding = self._forwarding
                if not forwarding:
                    self._held.append(client)
            if forwarding:
                self._pipe(client)

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._upstream, timeout=5)
        except OSError:
            _close(client)
            return
        upstream.settimeout(None)
        with self._lock:
            self._piped += [client, upstream]
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(a, b), name="proxy-pump", daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
