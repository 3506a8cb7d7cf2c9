"""A target table's schema objects: what the source table has beyond its columns and key,
what that becomes in the target, what the target lacks, and building it.

A batch's rows go into a table that has its columns and its primary key
(the exactly-once path needs the key); the rest of what the source table is
(its indexes, unique, check, exclusion and foreign-key constraints, defaults,
sequences and identity, triggers and comments) is built after its load (a
check the source's rows all pass, with the table where the engine allows it:
:mod:`.early`), in the order pg_restore and pgcopydb build it, by the target engine's schema
editor (``spark_jobs/engines/<engine>/schema.py``), from what the source
engine's catalogue read (``introspection.py``).

Entry points, in the order a migration meets them:

- :func:`.plan.plan_schema`: each source table's objects and what each becomes
  in its target (``sluice plan``; an object with no translation stops the run
  before its first batch);
- :func:`.build.build_stage`: build what a table sluice made lacks, stage by
  stage (the daemon, as each table's first pass is done; the cutover, for
  what waits for it);
- :func:`.compare.lacking`: what a target table lacks of its source's objects,
  by definition (``sluice plan``, and the cutover, which is not READY while
  anything is lacking);
- :func:`.sequences.set_sequences`: every target sequence and identity set to
  its source's value at the cutover.

Tables sluice made are recorded in the target's ``_sluice_tables``, in the
transaction that creates them: only those get objects built; a table the
operator made is compared and left as it is.
"""
