"""The cutover flag: ``sluice cutover`` asks every daemon on the ledger for a final pass.

One row (``id`` 1) when a cutover was requested; daemons look for it each
second (:mod:`scheduler.ledger.cutover`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "sluice_cutover",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("requested_at", sa.Float, nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
    )
