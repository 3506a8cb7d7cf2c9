"""The import jobs: a batch from its source into its target (read, load, commit), or
several batches by one Spark job; the top of the data plane.

What ``sinks`` and ``scheduler`` run; it imports every wing beneath it and
no wing imports it. Entry points:

- :func:`.import_job.run_import`: one batch, idempotent per batch id (a
  batch its target already holds is ``skipped``); :func:`.import_job.main`,
  the same as a ``spark-submit`` application
  (``spark-submit spark_jobs/jobs/import_job.py --config CONFIG --manifest FILE``);
- :func:`.import_group.run_imports`: several batches, of one table or of many
  small ones, read and loaded together (the direct loads of keyset ranges by
  one Spark job, or by local worker processes without Spark);
- :func:`.import_job.target_table`: a batch's :class:`~spark_jobs.load.target.TargetTable`
  from the config, as the ledger's reports and ``sluice verify`` resolve it too.
"""
