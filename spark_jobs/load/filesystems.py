"""The few file operations a Parquet target needs, on a local disk or any Hadoop file system.

:func:`filesystem` picks one by the path: local paths go through ``os``
(where ``os.replace`` is atomic), URLs (``scheme://``) through Hadoop's
``FileSystem`` in the Spark JVM.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from config.errors import TargetError


def basename(path: str) -> str:
    """The last part of a path or URL (a folder's own name, trailing slash or not)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


class LocalFs:
    """Batch files on a local disk: ``os.replace`` publishes atomically."""

    def exists(self, path: str) -> bool:
        """Whether a file or folder is there."""
        return os.path.exists(path)

    def list(self, folder: str) -> list[str]:
        """The paths directly in ``folder`` (none if it is missing)."""
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, name) for name in os.listdir(folder)]

    def files(self, folder: str) -> Sequence[str]:
        """Every file under ``folder``, at any depth, as a path relative to it."""
        found = []
        for parent, _, names in os.walk(folder):
            relative = os.path.relpath(parent, folder)
            found += [name if relative == "." else f"{relative}/{name}" for name in names]
        return sorted(found)

    def delete(self, path: str) -> None:
        """Delete a file or a folder tree; a missing one is no error."""
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def replace(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, over an older ``dst``, creating its folder."""
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)  # atomic, and over an older copy of the batch too

    def read_text(self, path: str) -> str | None:
        """A small file's text, or None when it is missing."""
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        """Replace a small file at once: a reader sees the old text or the new, never half."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"  # racing writers never share one
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)


class HadoopFs:
    """Batch files on any Hadoop file system (hdfs://, s3a://, file://) via the JVM."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark._jvm  # PySpark exposes the JVM only through these
        self._path = jvm.org.apache.hadoop.fs.Path
        self._jvm = jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._path(path).getFileSystem(conf)

    def exists(self, path: str) -> bool:
        """Whether a file or folder is there."""
        return bool(self._fs.exists(self._path(path)))

    def list(self, folder: str) -> list[str]:
        """The paths directly in ``folder`` (none if it is missing)."""
        if not self.exists(folder):
            return []
        return [s.getPath().toString() for s in self._fs.listStatus(self._path(folder))]

    def files(self, folder: str) -> Sequence[str]:
        """Every file under ``folder``, at any depth, as a path relative to it."""
        if not self.exists(folder):
            return []
        # Listed paths come back qualified (file:/tmp/x for file:///tmp/x).
        root = self._fs.makeQualified(self._path(folder)).toString().rstrip("/") + "/"
        found = []
        statuses = self._fs.listFiles(self._path(folder), True)
        while statuses.hasNext():
            path = statuses.next().getPath().toString()
            if path.startswith(root):
                found.append(path[len(root) :])
        return sorted(found)

    def delete(self, path: str) -> None:
        """Delete a file or a folder tree; a missing one is no error."""
        self._fs.delete(self._path(path), True)

    def replace(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, over an older ``dst``, creating its folder."""
        # Hadoop's rename refuses an existing destination: a re-run of a
        # published batch removes the old file first (readers may miss the
        # batch for that instant; they never see it twice).
        target = self._path(dst)
        self._fs.delete(target, False)
        self._fs.mkdirs(target.getParent())
        if not self._fs.rename(self._path(src), target):
            raise TargetError(f"could not rename {src} to {dst}")

    def read_text(self, path: str) -> str | None:
        """A small file's text, or None when it is missing."""
        if not self.exists(path):
            return None
        stream = self._fs.open(self._path(path))
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        """Write a small file, replacing an older one."""
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def filesystem(path: str, spark: SparkSession | None) -> LocalFs | HadoopFs:
    """Local paths through ``os``; URLs (``scheme://``) through Hadoop's FileSystem."""
    if "://" not in path:
        return LocalFs()
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise TargetError(f"{path}: a Hadoop path needs a running SparkSession")
    return HadoopFs(spark, path)
