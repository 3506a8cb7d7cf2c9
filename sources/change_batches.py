"""A batch of a change stream reduced to what its target must do: each key's last state.

A key changed several times in one batch is written once, with its last state;
a deleted key is removed (and one deleted then inserted again is written); a
key that moved (an update of the key's columns) is removed under its old key
and written under its new one. A truncate voids what came before it in the
batch and empties the table first. Rows from a full load's chunks
(:class:`~sources.watermarks.ChunkRow`) are written like inserts, where the
stream's order put them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sources.watermarks import ChunkRow, Key


@dataclass
class NetBatch:
    """What a batch of changes does to its target, in one transaction.

    ``truncate``: empty the table first. ``deletes``: keys to remove. ``upserts``:
    key → the row's last state; a column whose value is the stream's unchanged marker
    keeps the value the target holds (an update that did not touch a TOASTed value).
    """

    truncate: bool = False
    deletes: set[Key] = field(default_factory=set)
    upserts: dict[Key, dict[str, Any]] = field(default_factory=dict)


def net_effect(
    events: Iterable[Any], key_columns: Sequence[str], unchanged: object | None = None
) -> NetBatch:
    """The net effect of ``events`` (stream changes and chunk rows, in the stream's order)
    on a table keyed by ``key_columns``. ``unchanged``: the stream's marker of a value it
    did not send."""
    net = NetBatch()
    for event in events:
        if isinstance(event, ChunkRow):
            _put(net, event.key, event.row, unchanged)
        elif event.op == "truncate":
            net.truncate, net.deletes, net.upserts = True, set(), {}
        elif event.op == "delete":
            key = event.key(key_columns)
            net.upserts.pop(key, None)
            net.deletes.add(key)
        else:
            before = event.old_key(key_columns)
            if before is not None:  # the key moved: the old one goes
                net.upserts.pop(before, None)
                net.deletes.add(before)
            _put(net, event.key(key_columns), event.new, unchanged)
    return net


def _put(net: NetBatch, key: Key, row: dict[str, Any], unchanged: object | None) -> None:
    """``key``'s new state: ``row``, with a value not sent taken from the state before
    in this batch, where there is one."""
    held = net.upserts.get(key)
    if unchanged is not None and held is not None:
        row = {c: held.get(c, v) if v is unchanged else v for c, v in row.items()}
    net.upserts[key] = dict(row)
    net.deletes.discard(key)
