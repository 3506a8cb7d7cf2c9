"""Each daemon records the sluice and ledger schema it runs.

An upgrade refuses while a daemon of an older schema is live; ``status``
shows each daemon's version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column("sluice_owners", sa.Column("sluice_version", sa.String(40), nullable=True))
    op.add_column("sluice_owners", sa.Column("schema", sa.String(32), nullable=True))
