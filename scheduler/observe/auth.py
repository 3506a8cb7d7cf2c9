"""The endpoint's token: every path asks for it when ``http.token`` is set.

Programs send ``Authorization: Bearer <token>`` (Prometheus' ``authorization``
setting); a browser signs in once at ``/signin`` and then carries a cookie
(``HttpOnly``, ``SameSite=Strict``, ``Secure`` under TLS, for
:data:`SESSION_S`) whose value is a keyed hash of the token, never the token.
Every comparison takes constant time. A refused request gets 401 and nothing
else; from an address that was refused :data:`FREE_TRIES` times in a row,
each further refusal waits longer (up to :data:`MOST_WAIT` s) before its
answer, on the server's loop, holding no thread. The token is never logged,
printed or put in a page.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections import OrderedDict
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from scheduler.observe.server import Answer

COOKIE = "sluice_session"
SIGNIN = "/signin"
FREE_TRIES = 5
"""Refusals in a row from one address answered at once."""
MOST_WAIT = 8.0
"""Seconds the slowest refusal waits."""
SESSION_S = 12 * 3600
"""Seconds a browser's sign-in lasts (a working day; its browser may close meanwhile)."""
REMEMBERED = 4096
"""Addresses whose refusals are counted (the oldest forgotten first)."""

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>sluice: sign in</title>
<meta name="viewport" content="width=device-width"></head>
<body style="font-family:sans-serif;margin:3em">
<h1>sluice</h1><p>{message}</p>
<form method="post" action="/signin" id="signin">
<label>token <input type="password" name="token" autocomplete="current-password" autofocus>
</label> <button type="submit">sign in</button></form>
<script>
// /signin#token=...: signed in at once (a fragment is never sent to a server or logged).
const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) {{
  history.replaceState(null, "", "/signin");
  document.querySelector("input[name=token]").value = given;
  document.getElementById("signin").submit();
}}
</script></body></html>
"""


class TokenAuth:
    """Checks each request for ``token`` (the bearer header or the sign-in's cookie)."""

    def __init__(self, token: str, *, secure: bool) -> None:
        self._token = token.encode()
        self._session = hmac.new(self._token, b"sluice session cookie", hashlib.sha256).hexdigest()
        self._secure = secure
        self._refused: OrderedDict[str, int] = OrderedDict()

    async def check(self, method: str, path: str, headers: dict[str, str], body: bytes,
                    peer: str) -> Answer | None:  # fmt: skip
        """None when the request may go on; else the answer to send (the sign-in page,
        its outcome, or 401)."""
        if path == SIGNIN:
            return await self._signin(method, headers, body, peer)
        if self.allows(headers):
            self._refused.pop(peer, None)
            return None
        await self._slow_down(peer)
        if "text/html" in headers.get("accept", ""):
            return _page(401, 'Sign in first: <a href="/signin">sign in</a>.')
        return Answer.plain(401, "unauthorized", [("WWW-Authenticate", 'Bearer realm="sluice"')])

    def allows(self, headers: dict[str, str]) -> bool:
        """Whether ``headers`` carry the token or the sign-in's cookie."""
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token):
            return True
        try:
            cookie = SimpleCookie(headers.get("cookie", ""))
        except CookieError:
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(),
                                                          self._session.encode())  # fmt: skip

    async def _signin(self, method: str, headers: dict[str, str], body: bytes,
                      peer: str) -> Answer:  # fmt: skip
        if method in ("GET", "HEAD"):
            return _page(200, "This daemon asks for its token.")
        if method != "POST":
            return Answer.plain(405, "GET or POST")
        given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self._token):
            await self._slow_down(peer)
            return _page(401, "That is not the token.")
        self._refused.pop(peer, None)
        attributes = f"Path=/; Max-Age={SESSION_S}; HttpOnly; SameSite=Strict" + (
            "; Secure" if self._secure else "")  # fmt: skip
        return Answer("303 See Other", [("Location", "/"), ("Cache-Control", "no-store"),
                                        ("Set-Cookie", f"{COOKIE}={self._session}; {attributes}")],
                      b"")  # fmt: skip

    async def _slow_down(self, peer: str) -> None:
        """Count a refusal of ``peer``; past the free tries, wait before answering."""
        count = self._refused.pop(peer, 0) + 1
        self._refused[peer] = count
        while len(self._refused) > REMEMBERED:
            self._refused.popitem(last=False)
        if count > FREE_TRIES:
            await asyncio.sleep(min(MOST_WAIT, 0.25 * 2 ** (count - FREE_TRIES)))


def _page(code: int, message: str) -> Answer:
    """The sign-in page with ``message`` (trusted HTML: sluice's own words only)."""
    return Answer(f"{code} {'OK' if code == 200 else 'Unauthorized'}", [
        ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
    ], _PAGE.format(message=message).encode())  # fmt: skip
