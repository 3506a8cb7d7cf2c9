"""The ledger wing: the durable record that makes every batch happen exactly once.

It owns the ``sluice_*`` tables (:mod:`.schema`, the only module that defines
them: nothing outside this package imports them), the compare-and-set claims
and transitions with their fencing tokens (:mod:`.store`), owners, leases and
the takeover rule (:mod:`.owners`), sources' checkpoints and poison
(:mod:`.checkpoints`), the schema's versions and their Alembic migrations
(:mod:`.migrate`, ``migrations/``), the single writer thread (:mod:`.writer`), and the one
read API every report uses (:mod:`.reads`: ``status``, ``plan``, the metrics
endpoint; with :mod:`.lookup`, which batch holds a record: ``where``,
``/record``). It may import ``config`` and ``spark_jobs.common.manifest``, nothing else
of sluice; the rest of ``scheduler`` imports it, never its tables.
See docs/architecture.md, "The ledger".
"""

from scheduler.ledger.checkpoints import Checkpoint, SourceBook, fingerprint
from scheduler.ledger.outage import LedgerUnreachable, Patience
from scheduler.ledger.owners import DEAD_AFTER, Owners
from scheduler.ledger.reads import LedgerReads, SourceProgress
from scheduler.ledger.schema import SCHEMA, STATES, UNFINISHED, decode_key, encode_key
from scheduler.ledger.store import Ledger

__all__ = [
    "DEAD_AFTER", "SCHEMA", "STATES", "UNFINISHED", "Checkpoint", "Ledger", "LedgerReads",
    "LedgerUnreachable", "Owners", "Patience", "SourceBook", "SourceProgress", "decode_key",
    "encode_key", "fingerprint",
]
