"""The ledger as sluice created it before its schema had versions (commit a752038).

Tables that exist are left as they are: a ledger made by that sluice has
all of them and only gains the version table here; a new ledger gets them all.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    have = set(sa.inspect(op.get_bind()).get_table_names())

    def create(name: str, *columns: sa.Column, indexed: tuple[str, ...] = ()) -> None:
        if name in have:
            return
        op.create_table(name, *columns)
        for column in indexed:
            op.create_index(f"ix_{name}_{column}", name, [column])

    create(
        "sluice_sources",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("high_water", sa.Text, nullable=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    create(
        "sluice_batches",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("target", sa.String(400), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("token", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("items", sa.Integer, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=True),
        sa.Column("rejected", sa.BigInteger, nullable=True),
        sa.Column("manifest", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("not_before", sa.Float, nullable=True),
        sa.Column("owner", sa.String(120), nullable=True),
        sa.Column("lease_until", sa.Float, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        indexed=("source", "state", "owner"),
    )
    create(
        "sluice_keys",
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(1000), primary_key=True),
        sa.Column("version", sa.String(200), primary_key=True),
        sa.Column("batch_id", sa.String(32), nullable=False),
        indexed=("batch_id",),
    )
    create(
        "sluice_poison",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("message_id", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        indexed=("source",),
    )
    create(
        "sluice_owners",
        sa.Column("owner", sa.String(120), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )
