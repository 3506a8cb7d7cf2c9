"""The observe wing: what an operator watches while sluice runs.

Progress display (:mod:`.progress`), the Prometheus endpoint (:mod:`.metrics`)
and log set-up (:mod:`.logs`); later the status page. It reads the daemon's
runtime figures and the ledger (through :class:`scheduler.ledger.LedgerReads`)
and changes neither: nothing here writes the ledger or feeds a batch. It may
import ``config``, ``sources``, the ledger wing and the runtime's types; the
runtime imports it only to start it.
"""
