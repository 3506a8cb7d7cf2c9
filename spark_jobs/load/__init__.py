"""Where a batch is loaded: its rows into the target table and its commit recorded there,
in one transaction, fenced by the batch's token; or into a Parquet table's folder.

The second stage of a batch's way (``docs/architecture.md``, "The wings of the
data plane"), after the read wing gave its frame. Its modules, as a batch
meets them:

- :func:`.write.write_batch`: one batch into its target, whatever the target
  (:func:`.write.committed_batch`: whether a target holds a batch's commit);
- the target made ready: :func:`.targets.make_ready` (many small tables' at
  once), :func:`.jdbc_tables.prepare_target` (one table created, or checked
  against the batch: :mod:`.target_fit`, :mod:`.batch_columns`,
  :mod:`.narrowing`), :mod:`.early` (the schema objects built with it),
  :mod:`.late_keys` (a large table made without its primary key, which follows
  its first pass);
- :func:`.write_jdbc.write_jdbc`: a JDBC target's batch, by its bulk path
  (:mod:`.bulk_paths`: PostgreSQL's binary COPY, ``LOAD DATA LOCAL INFILE``)
  or Spark's JDBC writer;
- :func:`.write_direct.load_directly`: keyset batches read and loaded straight
  into their tables by the load's own tasks, each in its commit transaction;
  :func:`.write_bulk.write_bulk`: direct, or staged (:mod:`.staging`) then
  upserted (:mod:`.upsert`);
- :func:`.commit_jdbc.commit_staged`, :func:`.commit_jdbc.commit_direct`: the
  commit row taken, a stale token refused, the rows upserted; rows the
  target refuses set aside (:mod:`.rejects_jdbc`);
- :func:`.write_parquet.write_parquet`: a Parquet table's batch, staged then
  published by rename (:mod:`.parquet_types`, :mod:`.parquet_layout`,
  :mod:`.filesystems`).

:mod:`.target` holds what every writer shares: where a batch goes
(:class:`.target.TargetTable`), what a commit records, the stale token.
Beneath it ``read``, ``tasks``, ``common`` and ``engines``.
"""
