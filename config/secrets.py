"""Keep secrets out of errors, logs and ``status``.

Passwords reach sluice inside URLs (``postgresql://app:${PGPASSWORD}@db/shop``)
and in keys named like ``secret_access_key``. Everything that prints config
values goes through :func:`redact_url` or :func:`redact_text`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, SecretStr
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

MASK = "***"

# ``scheme://user:password@``: the password runs to the last ``@`` before the
# path, so an unencoded ``@`` in it is still masked whole.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][\w+.:-]*://[^/:@\s]*:)(?P<password>[^/\s]*)@")
# Secrets shorter than this are masked as whole tokens only (see redact_text).
SHORT_SECRET = 8
_SECRET_KEY = re.compile(r"secret|password|passwd|access_key_id|token", re.IGNORECASE)


def is_secret_key(name: object) -> bool:
    """Whether a config key holds a secret by its name (``*secret*``, ``*password*``,
    ``*token*``…)."""
    return isinstance(name, str) and _SECRET_KEY.search(name) is not None


def redact_url(url: str) -> str:
    """Return ``url`` with its password replaced by ``***``.

    SQLAlchemy URLs are rendered by SQLAlchemy itself; anything it cannot parse
    (``jdbc:…``, plain text) still has a ``user:password@`` part masked.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        parsed = None
    if parsed is not None and parsed.password is not None:
        url = parsed.render_as_string(hide_password=True)
    # Also after SQLAlchemy: it splits ``user:p@ss@host`` at the first ``@``.
    return _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", url)


def url_passwords(text: str) -> list[str]:
    """The passwords of every ``scheme://user:password@`` in ``text``, raw and decoded."""
    found: list[str] = []
    for match in _USERINFO.finditer(text):
        raw = match["password"]
        found += [raw, unquote(raw)] if unquote(raw) != raw else [raw]
    return [p for p in found if p and p != MASK]


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Replace secret values in ``text`` with ``***`` and mask URL passwords.

    A secret of at least :data:`SHORT_SECRET` characters is masked wherever it
    appears. A shorter one (``t``, ``testing``: test keys, moto's defaults) is
    masked only as a whole token, that is not inside a word: in URL userinfo,
    after ``key=`` or ``key:``, between quotes or spaces. Masking it inside
    words would turn ``placed_at`` into ``placed_a***`` and hide nothing, as
    such a value is guessable anyway. Longer secrets are replaced first so one
    that contains another is hidden whole.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= SHORT_SECRET:
            text = text.replace(secret, MASK)
        else:
            text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", MASK, text)
    return _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)


def find_secrets(data: Any, key: object = None) -> list[str]:
    """Every secret in a tree of mappings, lists and scalars (raw YAML or a dump).

    A secret is a URL password, a :class:`SecretStr` value, or any scalar under
    a key named like a secret.
    """
    if isinstance(data, SecretStr):
        return [data.get_secret_value()]
    if isinstance(data, Mapping):
        return [s for k, v in data.items() for s in find_secrets(v, k)]
    if isinstance(data, list | tuple):
        return [s for item in data for s in find_secrets(item, key)]
    if data is None or isinstance(data, bool):
        return []
    if is_secret_key(key):
        return [str(data)]
    return url_passwords(data) if isinstance(data, str) else []


def config_secrets(cfg: BaseModel) -> list[str]:
    """Every password in any URL of ``cfg`` (a ``SluiceConfig``: any model, so that this
    module, which the models' own errors use, imports none of them) and every
    :class:`SecretStr` value."""
    # model_dump keeps SecretStr objects as they are in python mode.
    return sorted(set(find_secrets(cfg.model_dump())))
