"""Keyset ranges keep their place in their source's claim order.

``sluice_batches.range_seq`` is the version of the high-water mark a range's
claim made; the index ``(source, range_seq)`` lets ``sluice where`` and
``/record`` find the range holding a key by a binary search rather than a scan
of every range (see :mod:`scheduler.ledger.lookup`). Ranges claimed before
are numbered here in the order they were claimed: each starts where the one
before it ended.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from scheduler.ledger.lookup import chain_order

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.add_column("sluice_batches", sa.Column("range_seq", sa.Integer, nullable=True))
    op.create_index("ix_sluice_batches_source_range_seq", "sluice_batches", ["source", "range_seq"])
    conn = op.get_bind()
    batches = sa.table(
        "sluice_batches", sa.column("id"), sa.column("source"), sa.column("kind"),
        sa.column("manifest"), sa.column("created_at"), sa.column("range_seq"),
    )  # fmt: skip
    ranges: dict[str, list[tuple[str, str]]] = {}
    for row in conn.execute(
        sa.select(batches.c.id, batches.c.source, batches.c.manifest)
        .where(batches.c.kind == "range")
        .order_by(batches.c.created_at)
    ):
        ranges.setdefault(row.source, []).append((row.id, row.manifest))
    # Each claim moved the source's mark one version on, and the next claim
    # numbers its range by the version it makes: the last range so far gets
    # the mark's version now, so that every later one comes after it.
    sources = sa.table("sluice_sources", sa.column("name"), sa.column("version"))
    marks = dict(conn.execute(sa.select(sources.c.name, sources.c.version)).all())
    numbered: list[dict[str, object]] = []
    for source, found in ranges.items():
        ordered = chain_order(found)
        last = max(int(marks.get(source) or 0), len(ordered))
        numbered.extend(
            {"batch": batch_id, "seq": last - len(ordered) + i}
            for i, batch_id in enumerate(ordered, start=1)
        )
    if numbered:
        conn.execute(
            batches.update()
            .where(batches.c.id == sa.bindparam("batch"))
            .values(range_seq=sa.bindparam("seq")),
            numbered,
        )
