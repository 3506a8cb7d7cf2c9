"""What every wing of the data plane shares, beneath the stages and above the engines.

Small and engine-blind where it can be; each module here is needed by more than
one wing (and by ``sources``, ``sinks`` and ``scheduler``):

- :class:`.manifest.Manifest`: everything an import job needs to know about one
  batch, as the scheduler writes it;
- :func:`.jdbc.sql_engine`, :func:`.jdbc.looker_engine`, :class:`.jdbc.JdbcEndpoint`:
  the connections to a config's databases, kept per URL, and Spark's JDBC
  endpoint for each;
- :func:`.keyorder.row_compare`, :func:`.keyorder.typed_key`: keys compared in
  key order as each dialect's SQL answers from the key's index, and keys read
  back from JSON in their columns' types (the reads, the commits, ``sources``'
  key queries, ``sluice verify``);
- :class:`.outcomes.ImportResult`, :class:`.outcomes.BatchImportFailed`: what an
  import ends with, and whether a retry may help.
"""
