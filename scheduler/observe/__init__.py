"""The observe wing: what an operator watches while sluice runs.

Progress display (:mod:`.progress`), the ETA (:mod:`.eta`), the change
streams' health (:mod:`.streams`: lag, changes/s, retained WAL), the HTTP
endpoint (:mod:`.http`) with Prometheus ``/metrics`` (:mod:`.metrics`),
``/record``, where a record is (:mod:`.record`, also ``sluice where``'s
answer, with :mod:`.record_keys`), and the status page ``/`` with
``/status.json`` (:mod:`.page`, from the snapshots of :mod:`.snapshot`), and
log set-up (:mod:`.logs`). It reads the daemon's
runtime figures and the ledger (through :class:`scheduler.ledger.LedgerReads`)
and changes neither: nothing here writes the ledger or feeds a batch. It may
import ``config``, ``sources``, ``spark_jobs`` (to read a target's commits),
the ledger wing and the runtime's types; the runtime imports it only to start it.
"""
