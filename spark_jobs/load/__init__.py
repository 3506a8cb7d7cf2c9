"""Loading a batch into its target: the target made ready for the batch's rows.

The wing of the data plane where a batch's rows meet the target table (the
load paths themselves still sit at ``spark_jobs/``'s top, ``write_*.py``, and
move here as the layout of ``docs/architecture.md`` says):

- :func:`.targets.make_ready`: the target tables of many small tables' batches
  created and checked together, on one connection and in one transaction,
  where each table alone would pay its own connections and commits.
"""
