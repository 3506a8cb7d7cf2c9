"""Where a table is verified: a source table compared with its target table, by the
servers' own sums where both can give them, else row by row in Spark; the rows
only the target has deleted if asked.

``sluice verify`` and the cutover run it through :mod:`scheduler.verify_tables`,
which adds what only the ledger knows (the scope that is done, the keys still
held, the repair batches); nothing here reads the ledger. Entry points, in the
order a table meets them:

- :func:`.sums.proven_equal`: the two tables proven equal by their servers'
  counts and hashes of their own rows, with no row read into Spark (None:
  they cannot be, or differ: compare them);
- :func:`.read.read_sides`: both sides as comparable frames over the same
  keys (the source as its rows go into the target: its ``columns:``, its
  casts), :class:`.read.Scope` saying which keys;
- :func:`.compare.compare`: per bucket, then key by key in the buckets that
  differ: the :class:`.compare.TableDiff` of missing, extra, different and
  twice-held keys (:mod:`.keys`: keys as values, in key order);
- :func:`.deletes.delete_extras`: rows only a JDBC target has, deleted;
- :class:`.report.TableReport`, :class:`.report.VerifyReport`: what is reported.
"""
