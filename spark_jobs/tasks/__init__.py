"""Where a batch's tasks run: the SparkSession and its Python workers, or worker
processes of this machine where a task needs no Spark.

The stages above hand their work to these; nothing here knows a source or a
target. Entry points:

- :func:`.session.build_session`, :func:`.session.spark_submit_args`: the
  SparkSession that runs import jobs, every Spark default sluice relies on in
  one place (its log4j configuration, ``log4j2.properties``, beside it);
- :class:`.local_tasks.SessionOnDemand`, :class:`.local_tasks.LocalTasks`: on a
  local master, a session started only when a batch needs Spark, and the
  local worker processes that run the direct loads' tasks until then;
- :func:`.task_input.task_input`, :func:`.task_input.whole`: whether a Spark
  Python task read all of its input (a load's task commits nothing if not);
- :class:`.task_notes.Notes`: what a load's task tells the driver beside its
  outcome;
- :mod:`.children` and :mod:`.worker_daemon`: Spark's JVM and Python workers
  started deaf to the signals that stop sluice, so a drain finishes its batches.
"""
