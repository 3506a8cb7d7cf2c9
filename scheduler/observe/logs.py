"""Logging set-up: plain text or one JSON object per line, secrets scrubbed."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable

from config.secrets import redact_text


class _Scrub(logging.Filter):
    """Masks known secrets (and URL passwords) in a record's message and traceback.

    The same rules as ``sluice status`` and error messages
    (:func:`config.secrets.redact_text`): a short secret is masked only as a
    whole token, so it does not mangle the words it happens to be part of.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact_text(record.getMessage(), self.secrets), None
        if record.exc_info and not record.exc_text:
            # Formatters print a cached exc_text as it is: cache the scrubbed one.
            record.exc_text = redact_text(_TRACEBACKS.formatException(record.exc_info),
                                          self.secrets)
        return True


_TRACEBACKS = logging.Formatter()


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = record.exc_text or self.formatException(record.exc_info)
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
    if level <= logging.DEBUG:
        # -v: the modules' own loggers too (a batch's read, encode and COPY times).
        for package in ("scheduler", "sources", "sinks", "spark_jobs", "config"):
            logging.getLogger(package).setLevel(level)
    # py4j chatters at INFO on every call into the JVM.
    logging.getLogger("py4j").setLevel(logging.WARNING)
