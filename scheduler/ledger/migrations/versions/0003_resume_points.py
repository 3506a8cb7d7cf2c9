"""Incremental sources keep where a restart resumes their walk.

``sluice_sources.resume_after`` holds the walk position (``(cursor, *key)``,
typed JSON) before which every row version read is done; a restart reads
past it instead of reading the whole table again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.add_column("sluice_sources", sa.Column("resume_after", sa.Text, nullable=True))
