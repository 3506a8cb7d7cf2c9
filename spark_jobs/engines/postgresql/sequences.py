"""PostgreSQL's sequences at the cutover: where a source's stand, and a target's set after them.

A sequence's *position* is the last value it handed out (None: none yet). A
target's sequence is set so that its next value follows both its source's
position and the largest value of its column that was migrated (a row the
application inserted with an explicit key, or a sequence that went back):
``setval(seq, position)``, or ``setval(seq, start, false)`` when neither
exists.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from spark_jobs.engines.objects import SchemaObject, TableName
from spark_jobs.engines.postgresql.catalog import quote
from spark_jobs.engines.postgresql.schema import literal, qualified


def positions(conn: sa.Connection, objects: Sequence[SchemaObject]) -> list[int | None]:
    """The position of each of ``objects``' sequences (serial or identity), in order."""
    found: list[int | None] = []
    for obj in objects:
        assert obj.sequence is not None
        name = qualified((obj.sequence.schema, obj.sequence.name))
        row = conn.execute(sa.text(f"SELECT last_value, is_called FROM {name}")).one()
        found.append(int(row.last_value) if row.is_called else None)
    return found


def set_after(conn: sa.Connection, table: TableName, obj: SchemaObject,
              position: int | None) -> str:  # fmt: skip
    """Set the target sequence of ``obj`` (a column's, as the target's catalogue has it) after
    ``position`` and the column's largest value; returns what was done, in words."""
    seq = obj.sequence
    assert seq is not None
    column = quote(obj.name)
    edge = "max" if seq.increment > 0 else "min"
    largest = conn.execute(sa.text(f"SELECT {edge}({column}) FROM {qualified(table)}")).scalar()
    candidates = [int(v) for v in (position, largest) if v is not None]
    name = literal(qualified((seq.schema, seq.name)))
    if not candidates:
        conn.execute(sa.text(f"SELECT setval({name}, {seq.start}, false)"))
        return f"{seq.name}: starts at {seq.start} (no value used yet)"
    value = max(candidates) if seq.increment > 0 else min(candidates)
    conn.execute(sa.text(f"SELECT setval({name}, {value}, true)"))
    return (f"{seq.name}: next value {value + seq.increment} (source's last {position}, "
            f"largest migrated {largest})")  # fmt: skip
