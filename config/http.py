"""The ``http:`` section: where the daemon serves its status page, ``/metrics`` and
``/record``, and who may ask.

Loopback by default, with nothing asked. Served to other hosts (a ``host`` that
is not a loopback address), every path asks for the ``token``, which must then
be set; ``tls`` makes it HTTPS. The old ``metrics_port: N`` still means
``http: {port: N}`` (``sluice validate`` says so).
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from config.base import Model

MIN_TOKEN = 16
"""The fewest characters a token may have."""


class TlsConfig(Model):
    """The endpoint's certificate (its chain, PEM) and private key (PEM); a relative path
    is next to the config file."""

    cert: str
    """The certificate (its chain, PEM)."""
    key: str
    """The certificate's private key (PEM)."""

    def context(self) -> ssl.SSLContext:
        """A server context with this certificate (TLS 1.2 at least). Raises ``OSError``
        for a file that cannot be read, ``ssl.SSLError`` for a key that does not match."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context


class HttpConfig(Model):
    """The daemon's HTTP endpoint: the status page (``/``), ``/status.json``, ``/metrics``
    and ``/record``."""

    host: str = "127.0.0.1"
    """The address to listen on: loopback (the default) serves this host only; ``0.0.0.0``,
    ``::`` or an address of the host serves others, and then needs ``token``."""
    port: int = Field(default=9108, ge=0, lt=65536)
    """The port (0: one the system picks, logged)."""
    token: SecretStr | None = None
    """What every request must carry (``Authorization: Bearer …``, or a browser's sign-in
    at ``/signin``); at least 16 characters; never logged or shown."""
    tls: TlsConfig | None = None
    """HTTPS with this certificate and key."""

    @property
    def loopback(self) -> bool:
        """Whether ``host`` serves this host only."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a host name: it may resolve to anything
            return False

    @model_validator(mode="after")
    def _token_where_needed(self) -> HttpConfig:
        if self.token is not None and len(self.token.get_secret_value()) < MIN_TOKEN:
            raise ValueError(
                f"token: at least {MIN_TOKEN} characters (make one with: "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if self.token is None and not self.loopback:
            raise ValueError(
                f"host {self.host!r} serves other hosts: set token (say token: "
                '"${SLUICE_HTTP_TOKEN}"), or serve loopback only (host: 127.0.0.1)'
            )
        return self

    def at(self, base_dir: Path) -> HttpConfig:
        """This section with the certificate's paths resolved against ``base_dir``."""
        if self.tls is None:
            return self

        def absolute(path: str) -> str:
            return path if Path(path).is_absolute() else str((base_dir / path).resolve())

        tls = TlsConfig(cert=absolute(self.tls.cert), key=absolute(self.tls.key))
        return self.model_copy(update={"tls": tls})

    def tls_problem(self) -> tuple[tuple[str, ...], str] | None:
        """Where under ``http`` and why the certificate cannot serve (a file unreadable, a
        key that does not match it), or None."""
        if self.tls is None:
            return None
        for what in ("cert", "key"):
            path = Path(getattr(self.tls, what))
            if not path.is_file():
                return ("tls", what), f"cannot read {path}"
        try:
            self.tls.context()
        except ssl.SSLError as error:
            return ("tls",), (f"{self.tls.cert} and {self.tls.key} are not a certificate and "
                              f"its key in PEM ({error.reason or error})")  # fmt: skip
        except OSError as error:
            return ("tls",), f"cannot read the certificate or key: {error.strerror or error}"
        return None
