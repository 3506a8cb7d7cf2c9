"""PostgreSQL's ``INSERT … OVERRIDING SYSTEM VALUE``: the source's values into an identity
column that the table generates ``ALWAYS`` (a target created from the source's DDL).

SQLAlchemy has no option for it: :class:`OverridingInsert` is its PostgreSQL
``INSERT`` (``ON CONFLICT`` included), compiled with the clause after the
column list.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles


class OverridingInsert(postgresql.Insert):
    """``INSERT INTO t (…) OVERRIDING SYSTEM VALUE SELECT …``."""

    inherit_cache = True


@compiles(OverridingInsert, "postgresql")
def _compile(element: OverridingInsert, compiler: Any, **kw: Any) -> str:
    text = compiler.visit_insert(element, **kw)
    head, sep, rest = text.partition(") SELECT ")
    if not sep:
        raise ValueError("OVERRIDING SYSTEM VALUE needs INSERT … (columns) SELECT …")
    return f"{head}) OVERRIDING SYSTEM VALUE SELECT {rest}"


def insert(table: sa.TableClause, overriding: bool = False) -> postgresql.Insert:
    """PostgreSQL's ``INSERT`` into ``table``; ``overriding``: taking the rows' own values
    for identity columns the table generates ``ALWAYS``."""
    return OverridingInsert(table) if overriding else postgresql.insert(table)
