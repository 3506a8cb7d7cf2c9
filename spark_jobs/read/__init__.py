"""Where a batch is read: its source's rows as a Spark DataFrame (or as the queries a
load's own task runs), each column in its carrier with its source column beside it.

The first stage of a batch's way (``docs/architecture.md``, "The wings of the
data plane"). Entry points, in the order a batch meets them:

- :func:`.extract.extract`: one batch's rows, by its kind: a keyset range or a
  key list of a SQL table, or an SQS batch's payloads; :func:`.extract.extract_ranges`:
  several ranges of one table, or of many small ones, in one frame (the
  import group);
- :func:`.read_sql.native_frame`: a SQL table read the way its engine reads
  best (PostgreSQL's ``COPY … TO STDOUT``, ConnectorX for MySQL and MariaDB,
  in Spark tasks), remembered as queries (:func:`.read_sql.native_queries`)
  so that a direct load's task can run the read itself; Spark's JDBC reader
  otherwise (:func:`.jdbc_read.jdbc_frame`, its table's schema looked up once);
- :func:`.payloads.payload_frame`: SQS bodies as a frame, one column per field;
- :func:`.computed.apply_columns`: the source's ``columns:`` computed on the
  rows as read.

Beneath it only ``common``, ``tasks`` and ``engines``; the load wing takes its
frames.
"""
