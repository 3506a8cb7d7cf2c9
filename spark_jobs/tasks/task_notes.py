"""What a Spark task that loads a batch tells the driver beside its outcome: what it
logged, and the error it failed with, pickled so that the driver raises it again."""

from __future__ import annotations

import logging
import pickle


class Notes(logging.Handler):
    """Collects what the task logs at INFO and above, for the driver to log."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.notes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.notes.append(record.getMessage())


def pickled(error: BaseException) -> bytes:
    try:
        blob = pickle.dumps(error)
        pickle.loads(blob)  # some exceptions pickle but cannot be rebuilt
        return blob
    except Exception:  # noqa: BLE001 - the text is what is left to tell
        return pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))
