"""One batch, imported in the foreground: ``sluice import CONFIG --batch ID``.

The same steps the daemon takes for a batch, with the ledger's rules intact:
this process registers as an owner, begins the batch (a new fencing token, so
an importer that held it before is refused at the target), renews its lease
while the import runs, and records the outcome. A failed or dead batch is
requeued first (the operator asked for it by id); a ``done`` batch is left as
it is; a batch a live daemon is importing is refused.

``spark-submit spark_jobs/import_job.py --config CONFIG --batch ID`` runs the
same function on the cluster's driver.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession

from config.errors import ClaimConflict, LedgerError
from config.models import SluiceConfig
from config.secrets import redact_url
from scheduler.ledger import Ledger
from spark_jobs.import_job import ImportResult, run_import

__all__ = ["ForegroundImport", "import_batch"]

log = logging.getLogger("sluice.import")


@dataclass(frozen=True)
class ForegroundImport:
    """What ``sluice import`` did with the batch.

    ``state`` is the batch's state afterwards (``done``, ``failed``, ``dead``);
    ``result`` is None when nothing was imported (already done, or it failed);
    ``error`` says why it failed.
    """

    batch_id: str
    state: str
    result: ImportResult | None = None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        """0 when the batch is done with no rejected row, else 1 (DESIGN: exit codes)."""
        if self.state != "done":
            return 1
        return 1 if self.result is not None and self.result.rows_rejected else 0


def import_batch(
    cfg: SluiceConfig, batch_id: str, spark: Callable[[], SparkSession],
    *, ledger: Ledger | None = None,
) -> ForegroundImport:
    """Import ``batch_id`` of the ledger now, in this process; record the outcome.

    ``spark`` starts (or joins) the session, called only once there is work.
    Raises :class:`LedgerError` for a batch id the ledger does not hold and
    :class:`ClaimConflict` when another live owner holds the batch.
    """
    own = ledger is None
    ledger = ledger or Ledger(cfg.ledger, lease_ttl=cfg.lease.ttl, owner=None)
    try:
        state = ledger.state_of(batch_id)
        if state is None:
            raise LedgerError(f"batch {batch_id} is not in the ledger {redact_url(cfg.ledger)}")
        if state == "done":
            return ForegroundImport(batch_id, "done")
        ledger.register_owner()
        if state in ("failed", "dead"):
            ledger.requeue(batch_id)
            log.info("batch %s was %s: requeued with fresh attempts", batch_id, state)
        try:
            manifest = ledger.begin(batch_id)
        except ClaimConflict as conflict:
            raise ClaimConflict(
                f"batch {batch_id} is held by a running daemon ({conflict}); "
                "let it finish, or stop that daemon first"
            ) from conflict
        with _Heartbeat(ledger, every=min(5.0, cfg.lease.ttl / 3)):
            try:
                result = run_import(spark(), cfg, manifest)
            except Exception as error:  # the batch's failure, recorded as the daemon would
                reason = str(error) or type(error).__name__
                ended = ledger.fail(batch_id, reason, cfg.retry, token=manifest.token)
                return ForegroundImport(batch_id, ended, error=reason)
        ledger.finish(batch_id, result.rows_written, result.rows_rejected, token=manifest.token)
        return ForegroundImport(batch_id, "done", result)
    finally:
        if own:
            try:
                ledger.unregister_owner()
            finally:
                ledger.close()


class _Heartbeat:
    """Renews this owner's leases every ``every`` seconds while the import runs."""

    def __init__(self, ledger: Ledger, every: float) -> None:
        self.ledger = ledger
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="sluice-import-heartbeat",
                                        daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.every + 5)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.ledger.heartbeat()
            except LedgerError as error:  # the lease may lapse: the fencing token still guards
                log.warning("lease renewal failed: %s", error)
