"""What Spark ships to a cluster's drivers and executors: sluice's code and its dependencies.

A cluster's machines need not have sluice installed: the import job's
packages travel as one zip on ``--py-files`` / ``spark.submit.pyFiles``,
built once when a sink starts. The direct COPY / LOAD DATA runs sluice's
code in the executors' Python workers, which also import psycopg, PyMySQL,
SQLAlchemy, pydantic and cachetools: those (and what they require) travel as a second
zip on ``spark.archives``, unpacked by Spark next to each executor and put
on its workers' ``PYTHONPATH`` (:func:`build_deps_archive`). What PySpark's
Arrow functions need on executors anyway (pyarrow, numpy, pandas) is not
shipped.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import logging
import os
import platform
import sys
import uuid
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from config.models import SparkConfig

log = logging.getLogger(__name__)

PACKAGES = ("scheduler", "sources", "sinks", "config", "spark_jobs")
"""The top-level packages of sluice (what ``pyproject.toml`` installs)."""

_ROOT = Path(__file__).resolve().parent.parent
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed times: the same code gives the same bytes


EXECUTOR_DEPENDENCIES = (
    "psycopg", "psycopg-binary", "pymysql", "sqlalchemy", "pydantic", "cachetools",
    "pyyaml",  # the config package's loader, imported with its models
)
"""Distributions sluice's code imports in executors' Python workers, beyond PySpark's own."""

PROVIDED = frozenset({"pyspark", "py4j", "pyarrow", "numpy", "pandas"})
"""Distributions an executor running PySpark's Arrow functions has already."""

DEPS_ALIAS = "sluice-deps"
"""The folder, in each executor's working directory, the archive unpacks into."""


def build_pyfiles_zip(dest: Path, root: Path = _ROOT) -> Path:
    """Write the packages under ``root`` to the zip ``dest``; return its path.

    Source and data files only (no ``__pycache__``); written next to ``dest``
    and renamed, so a process reading the zip never sees half of it.
    """
    missing = [name for name in PACKAGES if not (root / name / "__init__.py").is_file()]
    if missing:
        raise FileNotFoundError(f"sluice packages {missing} not found under {root}")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}")
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            for package in PACKAGES:
                for path in sorted((root / package).rglob("*")):
                    if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                        continue
                    relative = path.relative_to(root).as_posix()
                    info = zipfile.ZipInfo(relative, date_time=_EPOCH)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o644 << 16
                    archive.writestr(info, path.read_bytes())
        os.replace(temporary, dest)
    finally:
        temporary.unlink(missing_ok=True)
    return dest


def build_deps_archive(folder: Path, roots: Iterable[str] = EXECUTOR_DEPENDENCIES) -> Path:
    """Zip the installed distributions ``roots`` and what they require into ``folder``.

    The zip holds each distribution's files as installed (its RECORD),
    compiled extensions included: executors must run the driver's Python
    minor version (as PySpark requires) on the same OS and architecture.
    Named after the files it holds (their names and sizes) and the
    platform, and reused when it exists: a sink starts in milliseconds once
    it has been built. A distribution installed without a list of its files
    (no RECORD) cannot be shipped: a warning names it.
    """
    entries: list[tuple[str, Path]] = []
    for dist in _closure(roots):
        files = [(f.as_posix(), Path(str(dist.locate_file(f)))) for f in dist.files or ()
                 # Scripts installed outside site-packages ("../../bin/…") stay home.
                 if f.parts[0] != ".." and "__pycache__" not in f.parts]  # fmt: skip
        files = [(name, path) for name, path in files if path.is_file()]
        if not files:
            log.warning("%s %s lists no installed files: not shipped to executors, which "
                        "must have it installed", dist.name, dist.version)  # fmt: skip
        entries += files
    tag = "|".join([sys.version, platform.machine(),
                    *(f"{name}:{path.stat().st_size}" for name, path in entries)])  # fmt: skip
    dest = Path(folder) / f"{DEPS_ALIAS}-{hashlib.sha256(tag.encode()).hexdigest()[:16]}.zip"
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}")
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, path in entries:
                archive.write(path, name)
        os.replace(temporary, dest)
    finally:
        temporary.unlink(missing_ok=True)
    return dest


def _closure(roots: Iterable[str]) -> list[md.Distribution]:
    """The installed distributions ``roots`` and their requirements (markers and extras
    as this interpreter meets them), without :data:`PROVIDED`; sorted by name."""
    found: dict[str, md.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(name, "") for name in roots]
    while todo:
        name, extra = todo.pop()
        key = canonicalize_name(name)
        if key in PROVIDED or (key, extra) in seen:
            continue
        seen.add((key, extra))
        try:
            dist = found.get(key) or md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional requirement this machine does without
        found[key] = dist
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo.extend((req.name, e) for e in ("", *req.extras))
    return sorted(found.values(), key=lambda d: canonicalize_name(d.name))


def executor_archives(cfg: SparkConfig, work_dir: Path) -> list[str]:
    """``spark.archives`` entries for ``cfg``'s executors: the dependencies archive,
    unpacked as :data:`DEPS_ALIAS`; none for a local master (its executor is the
    driver's process) or with ``ship_dependencies: false``."""
    if cfg.master.startswith("local") or not cfg.ship_dependencies:
        return []
    return [f"{build_deps_archive(Path(work_dir) / 'pyfiles')}#{DEPS_ALIAS}"]
