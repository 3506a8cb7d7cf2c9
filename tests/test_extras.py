"""Database drivers are extras: sluice runs without them and says which one a URL needs.

Each check runs in a Python whose ``psycopg`` and ``pymysql`` cannot be
imported (``sys.modules`` entries of None, as for a package not installed),
so that what is installed in this virtualenv cannot hide an import.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

WITHOUT_DRIVERS = """
import sys
for name in ("psycopg", "psycopg_binary", "pymysql"):
    sys.modules[name] = None
"""


def _run_without_drivers(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_DRIVERS + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_module_that_ships_imports_without_the_database_drivers(tmp_path: Path) -> None:
    done = _run_without_drivers(
        """
        import importlib, pkgutil
        for room in ("config", "sources", "spark_jobs", "sinks", "scheduler"):
            package = importlib.import_module(room)
            for info in pkgutil.walk_packages(package.__path__, room + "."):
                if ".migrations" not in info.name:  # Alembic's env runs on import
                    importlib.import_module(info.name)
        print("imported")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


NOT_SHIPPED = {  # distribution: its top-level modules
    "apscheduler": ("apscheduler",),
    "typer": ("typer",),
    "rich": ("rich",),
    "prometheus-client": ("prometheus_client",),
    "boto3": ("boto3", "botocore"),
    "alembic": ("alembic",),
}


def test_what_executors_import_needs_only_what_is_shipped_to_them(tmp_path: Path) -> None:
    """Spark executors import the jobs and the config's models, with only PySpark's own
    distributions and ``EXECUTOR_DEPENDENCIES`` (sinks/pyfiles.py) at hand."""
    from sinks.pyfiles import EXECUTOR_DEPENDENCIES, _closure

    shipped = {d.metadata["Name"].lower() for d in _closure(EXECUTOR_DEPENDENCIES)}
    assert not shipped & set(NOT_SHIPPED), "the check below would prove nothing"
    blocked = [module for modules in NOT_SHIPPED.values() for module in modules]
    done = _run_without_drivers(
        f"""
        import importlib, pkgutil, sys
        for name in {blocked!r}:
            sys.modules[name] = None
        importlib.import_module("config.models")
        jobs = importlib.import_module("spark_jobs")
        for info in pkgutil.walk_packages(jobs.__path__, "spark_jobs."):
            importlib.import_module(info.name)
        print("imported")
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


def test_validate_names_each_url_whose_driver_is_missing_and_the_extra(tmp_path: Path) -> None:
    (tmp_path / "needs.yaml").write_text(
        textwrap.dedent(
            """\
            ledger: postgresql://postgres@127.0.0.1/ledger
            sources:
              orders:
                kind: sql
                url: postgresql+psycopg://postgres@127.0.0.1/shop
                table: orders
                key: id
                target: wh.orders
            targets:
              wh:
                kind: jdbc
                url: mysql+pymysql://root:hunter2@127.0.0.1/warehouse
            """
        )
    )
    (tmp_path / "sqlite.yaml").write_text(
        textwrap.dedent(
            """\
            sources:
              orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id,
                       target: lake.orders}
            targets:
              lake: {kind: parquet, path: lake}
            """
        )
    )
    code = """
        import sys
        from scheduler.cli import main
        sys.argv = ["sluice", "validate", sys.argv[1]]
        main()
    """
    needs = _run_without_drivers(code.replace("sys.argv[1]", "'needs.yaml'"), tmp_path)
    assert needs.returncode == 2, needs.stderr
    assert "Traceback" not in needs.stderr
    lines = needs.stderr.splitlines()
    # SQLAlchemy's default PostgreSQL driver (psycopg2 before 2.1, psycopg since).
    assert any(
        "ledger: postgresql:// needs the Python driver 'psycopg" in line
        and "sluice[postgres]" in line
        and "line 1)" in line
        for line in lines
    ), needs.stderr
    assert any(
        "sources.orders.url: postgresql+psycopg:// needs the Python driver 'psycopg': "
        "install it with pip install 'sluice[postgres]'" in line and "line 5)" in line
        for line in lines
    ), needs.stderr
    assert any(
        "targets.wh.url: mysql+pymysql:// needs the Python driver 'pymysql': "
        "install it with pip install 'sluice[mysql]'" in line
        for line in lines
    ), needs.stderr
    assert "hunter2" not in needs.stderr

    sqlite = _run_without_drivers(code.replace("sys.argv[1]", "'sqlite.yaml'"), tmp_path)
    assert sqlite.returncode == 0, sqlite.stderr
    assert "ok (1 sources, 1 targets)" in sqlite.stdout
