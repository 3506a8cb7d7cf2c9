"""Shared by the benchmarks: how a figure is printed, a throwaway PostgreSQL database."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


def report(
    bench: str, value: float, unit: str, baseline: float | None = None, **extra: object
) -> None:
    """Print one figure as the JSON line the runner collects.

    ``extra`` fields follow the standard ones (say, ``settings``: the
    non-default settings the figure was measured with).
    """
    figure: dict[str, object] = {"bench": bench, "value": round(value, 3), "unit": unit}
    if baseline is not None:
        figure["baseline"] = round(baseline, 3)
        figure["ratio"] = round(value / baseline, 3) if baseline else None
    figure.update(extra)
    print(json.dumps(figure), flush=True)


@contextmanager
def pg_database(admin_url: str) -> Iterator[str | None]:
    """The URL of a new throwaway PostgreSQL database, dropped on the way out.

    None (said on stderr) when PostgreSQL cannot be reached: the caller skips
    its PostgreSQL figures.
    """
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"sluice_bench_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as error:
        print(f"PostgreSQL not reachable, skipping its figures: {error}", file=sys.stderr)
        admin.dispose()
        yield None
        return
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
