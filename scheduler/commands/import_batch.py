"""One batch, imported in the foreground: ``sluice import CONFIG --batch ID``.

The same steps the daemon takes for a batch, with the ledger's rules intact:
this process registers as an owner, begins the batch (a new fencing token, so
an importer that held it before is refused at the target), renews its lease
while the import runs, and records the outcome. A failed or dead batch is
requeued first (the operator asked for it by id); a ``done`` batch is left as
it is; a batch a live daemon is importing is refused.

``spark-submit scheduler/commands/import_batch.py --config CONFIG --batch ID``
runs the same function on a cluster's driver (:func:`main`).
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and not __package__:
    # Run as a script by spark-submit from a checkout: make the project's
    # packages importable (the zip on spark.submit.pyFiles does it otherwise).
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from config.errors import ClaimConflict, LedgerError
from config.models import SluiceConfig
from config.secrets import redact_url
from scheduler.ledger import Ledger
from spark_jobs.jobs.import_job import ImportResult, report_failure, run_import, write_result

__all__ = ["ForegroundImport", "import_batch", "main"]

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
        """0 when the batch is done with no rejected row, else 1 (README: exit codes)."""
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
        state = ledger.reads.state_of(batch_id)
        if state is None:
            raise LedgerError(f"batch {batch_id} is not in the ledger {redact_url(cfg.ledger)}")
        if state == "done":
            return ForegroundImport(batch_id, "done")
        ledger.owners.register()
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
                ended = ledger.fail(batch_id, reason, cfg.retry, token=manifest.token,
                                    permanent=getattr(error, "permanent", False))
                return ForegroundImport(batch_id, ended, error=reason)
        ledger.finish(batch_id, result.rows_written, result.rows_rejected, token=manifest.token,
                      zero_dates=result.zero_dates)
        return ForegroundImport(batch_id, "done", result)
    finally:
        if own:
            try:
                ledger.owners.unregister()
            finally:
                ledger.close()


class _Heartbeat:
    """Renews this owner's leases every ``every`` seconds while the import runs.

    A thread of its own, not an APScheduler job as in the daemon: this
    process (``sluice import``, a spark-submit driver) runs one import and no
    scheduler, and a scheduler's executor pool for one job would be more
    machinery than this loop.
    """

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
                self.ledger.owners.heartbeat()
            except LedgerError as error:  # the lease may lapse: the fencing token still guards
                log.warning("lease renewal failed: %s", error)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit scheduler/commands/import_batch.py --config CONFIG --batch ID``.

    Takes the batch from the ledger, imports it on this driver and records
    the outcome there, as ``sluice import`` does. Prints the outcome as one
    JSON line (with ``--result``, also writes it there); exits 0 when the
    batch is done with no rejected row, 1 otherwise, 2 for a bad config.
    """
    parser = argparse.ArgumentParser(prog="import_batch",
                                     description="Import one sluice batch by its id.")
    parser.add_argument("--config", required=True, type=Path, help="the sluice YAML config")
    parser.add_argument("--batch", required=True, help="the batch id (see sluice status)")
    parser.add_argument("--result", type=Path, help="where to write the outcome (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from config.catalog import catalog_from_env
    from config.errors import SluiceError
    from config.loader import load_config
    from spark_jobs.tasks.session import build_session

    batch_id = args.batch
    try:
        cfg = load_config(args.config, tables=catalog_from_env(os.environ))
        outcome = import_batch(
            cfg, batch_id, lambda: build_session(cfg.spark, app_name=f"sluice-import-{batch_id}")
        )
    except SluiceError as error:
        return report_failure(args.result, str(error), error.transient, error.exit_code)
    except (OSError, ValueError) as error:  # an unreadable config
        return report_failure(args.result, str(error), False, 2)
    if outcome.error is not None:
        return report_failure(args.result, f"batch {batch_id} {outcome.state}: {outcome.error}",
                              outcome.state == "failed", 1)  # fmt: skip
    done: dict[str, object] = {"batch_id": batch_id}
    if outcome.result is not None:
        done.update(asdict(outcome.result))
    done["state"] = outcome.state
    write_result(args.result, done)
    print(json.dumps(done))
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
