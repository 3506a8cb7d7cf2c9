"""Helpers shared by the end-to-end tests: seed sources, compare targets."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from config.loader import load_config_text
from config.models import SluiceConfig


def seed_orders(url: str, rows: int, table: str = "orders") -> None:
    """Create ``table`` with a mix of types (and NULLs) and fill it."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    tbl = sa.Table(
        table,
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("customer", sa.String(60), nullable=True),
        sa.Column("amount", sa.Numeric(12, 2), nullable=False),
        sa.Column("flag", sa.SmallInteger, nullable=False),
        sa.Column("placed_at", sa.DateTime, nullable=True),
    )
    meta.create_all(engine)
    base = dt.datetime(2024, 3, 1, 12, 0, 0)
    with engine.begin() as conn:
        conn.execute(
            tbl.insert(),
            [
                {
                    "id": i * 3,  # gaps between keys, as in real tables
                    "customer": None if i % 17 == 0 else f"cust-{i % 97} 'quoted' ü",
                    "amount": decimal.Decimal(i % 1000) / 4,
                    "flag": i % 2,
                    "placed_at": None if i % 23 == 0 else base + dt.timedelta(seconds=37 * i),
                }
                for i in range(1, rows + 1)
            ],
        )
    engine.dispose()


def fetch_rows(url: str, table: str, key: str = "id") -> dict[Any, tuple[str, ...]]:
    """Every row of a table, keyed by its key, each value normalised to text."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        result = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {key}"))
        columns = list(result.keys())
        rows = {}
        for row in result:
            values = dict(zip(columns, row, strict=True))
            rows[values[key]] = tuple(_text(values[c]) for c in sorted(columns))
    engine.dispose()
    return rows


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, decimal.Decimal):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def assert_same_rows(source_url: str, source_table: str, target_url: str, target_table: str) -> int:
    """The target holds exactly the source's rows, column by column; returns the count."""
    source = fetch_rows(source_url, source_table)
    target = fetch_rows(target_url, target_table)
    assert len(target) == len(source), f"{len(target)} rows in target, {len(source)} in source"
    missing = source.keys() - target.keys()
    assert not missing, f"{len(missing)} keys missing, e.g. {sorted(missing)[:5]}"
    different = [k for k in source if source[k] != target[k]]
    assert not different, f"row {different[0]}: {source[different[0]]} != {target[different[0]]}"
    return len(source)


def write_config(folder: Path, text: str) -> tuple[Path, SluiceConfig]:
    """Write a config file and load it as sluice would."""
    path = folder / "sluice.yaml"
    path.write_text(text)
    return path, load_config_text(text, str(path))


class FakeClock:
    """A clock the test moves (``clock.now += 5``), for code that takes ``clock=``."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
