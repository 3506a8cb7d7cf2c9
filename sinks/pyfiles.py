"""The zip of sluice's code that Spark ships to drivers and executors.

A cluster's machines need not have sluice installed: the import job's
packages travel as one zip on ``--py-files`` / ``spark.submit.pyFiles``,
built once when a sink starts.
"""

from __future__ import annotations

import os
import uuid
import zipfile
from pathlib import Path

PACKAGES = ("scheduler", "sources", "sinks", "config", "spark_jobs")
"""The top-level packages of sluice (what ``pyproject.toml`` installs)."""

_ROOT = Path(__file__).resolve().parent.parent
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed times: the same code gives the same bytes


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
