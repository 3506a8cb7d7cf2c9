"""The commands wing: what a user types, one module per command of ``sluice``.

``status``, ``plan``, ``demo`` and ``import_batch`` (``sluice import``, also
run by ``spark-submit`` on a cluster's driver) each own one command; the typer
app in :mod:`scheduler.cli` only wires them. A command may import anything of
sluice (the daemon's runtime, the ledger wing, the observe wing, ``config``,
``sources``, ``sinks``, ``spark_jobs``); nothing outside this wing and the CLI
imports a command. Reports read the ledger through
:class:`scheduler.ledger.LedgerReads` only.
"""
