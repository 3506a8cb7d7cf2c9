"""A done batch keeps the MySQL zero dates it made NULL, per column.

``sluice_batches.zero_dates`` is a JSON object ``{column: count}`` (NULL when
the batch made none), so that ``sluice status`` reports them per column after
the run that made them has ended, as it reports rejected rows.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.add_column("sluice_batches", sa.Column("zero_dates", sa.Text, nullable=True))
