"""The batch manifest: everything an import job needs to know about one batch.

The scheduler writes it (to the ledger, and to a file for ``spark-submit``);
the import job reads it. It is plain JSON so that any process can read it.

Keys are always lists of column values, one per key column, so that simple
and composite keys travel the same way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

BatchKind = Literal["range", "keys", "payloads", "changes"]


@dataclass(frozen=True)
class Manifest:
    """One batch: items of one source for one target.

    - ``range``: rows with ``lo < key <= hi`` (``lo`` None: from the start),
      plus the source's ``where:``; a keyset batch.
    - ``keys``: exactly the rows whose key is in ``keys``; a sweep batch.
    - ``payloads``: the records themselves (``payloads``, JSON text each),
      for sources that cannot be re-read, such as SQS.
    - ``changes``: a stream source's changes after the stream position ``lo``
      up to ``hi`` (``payloads``: :class:`~spark_jobs.changes.change_batches.StreamEvent`
      JSON texts, in the stream's order), applied by
      :mod:`spark_jobs.changes.apply_changes`.

    ``token`` is the fencing token: it grows every time the batch is handed to
    a new importer, and a target refuses a commit carrying an older one.

    ``read_parts``: the most connections the batch's read may open to its
    source at once (the database's ``max_connections`` share), set when it
    is dispatched; None: the source's ``read.num_partitions``.
    """

    batch_id: str
    source: str
    target: str
    kind: BatchKind
    items: int
    token: int = 1
    lo: list[Any] | None = None
    hi: list[Any] | None = None
    keys: list[list[Any]] = field(default_factory=list)
    payloads: list[str] = field(default_factory=list)
    read_parts: int | None = None

    def to_json(self) -> str:
        """Serialise to JSON text."""
        fields = asdict(self)
        if fields["read_parts"] is None:
            del fields["read_parts"]  # as manifests were written before it existed
        return json.dumps(fields, separators=(",", ":"), default=str)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Read back what :meth:`to_json` wrote."""
        return cls(**json.loads(text))
