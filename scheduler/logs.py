"""Logging set-up: plain text or one JSON object per line, secrets scrubbed."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable


class _Scrub(logging.Filter):
    """Replaces every known secret in a record's message with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            for secret in self.secrets:
                message = message.replace(secret, "***")
            record.msg, record.args = message, None
        return True


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(fmt: str = "text", level: int = logging.INFO,
                  secrets: Iterable[str] = ()) -> None:
    """Route sluice's logs to stderr in ``text`` or ``json`` format."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s",
                                               "%H:%M:%S"))
    handler.addFilter(_Scrub(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("sluice").setLevel(level)
    # py4j chatters at INFO on every call into the JVM.
    logging.getLogger("py4j").setLevel(logging.WARNING)
