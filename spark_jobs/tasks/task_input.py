"""Whether a Spark Python task read all of its input, or was cut short.

A task that writes its rows straight into a target inside the commit
transaction (:mod:`spark_jobs.load.write_bulk`) must not commit a partial batch.
PySpark hands the task an iterator that can end early without an error
(see :func:`input_complete`); these look at the worker's own input stream
to tell the two endings apart.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import types
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa


class InputCutShort(RuntimeError):
    """The COPY task's input ended before Spark's end of stream: nothing is committed."""


_END_OF_STREAM = struct.pack("!i", -4)
"""What Spark writes to a Python worker after a task's last input (PySpark's
``SpecialLengths.END_OF_STREAM``); the worker itself reads it once its task is done."""


def task_input() -> BinaryIO | None:
    """The stream this Python worker reads its task's input from; None outside one.

    It is the ``infile`` of ``pyspark.worker.main``, a caller of this task's
    function: PySpark hands a task only an iterator over its input.
    """
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        infile = frame.f_locals.get("infile")
        if frame.f_globals.get("__name__") == "pyspark.worker" and hasattr(infile, "peek"):
            return infile
        frame = frame.f_back
    return None


def input_complete(infile: BinaryIO) -> bool:
    """Whether Spark ended the task's input as it does when it has sent every row.

    A Python task's input can end early and still look complete: when the
    JVM feeding it dies (a ``kill -9`` of sluice's process group leaves
    PySpark's worker daemon running, in a group of its own), or when Spark's
    writer thread fails (a source lost mid-read: Spark shuts its end of the
    socket), pyarrow ends the stream at a message boundary without an error.
    Only after the last row does Spark write its end of stream, at once;
    it is looked at without being read, so the worker still finds it there.
    """
    seen = infile.peek(len(_END_OF_STREAM))[: len(_END_OF_STREAM)]  # type: ignore[attr-defined]
    if 0 < len(seen) < len(_END_OF_STREAM):
        # The worker's buffer ends inside the four bytes: the rest is still
        # in the socket, where MSG_PEEK sees it without taking it either.
        with socket.socket(fileno=os.dup(infile.fileno())) as sock:
            rest = sock.recv(len(_END_OF_STREAM) - len(seen), socket.MSG_PEEK | socket.MSG_WAITALL)
        seen += rest
    return seen == _END_OF_STREAM


def whole(batches: Iterator[pa.RecordBatch], infile: BinaryIO) -> Iterator[pa.RecordBatch]:
    """The task's input; raises :class:`InputCutShort` when it ends before Spark ended it."""
    yield from batches
    if not input_complete(infile):
        raise InputCutShort(
            "the batch's input ended before Spark's end of stream (the Spark JVM or its read "
            "failed): nothing committed"
        )
