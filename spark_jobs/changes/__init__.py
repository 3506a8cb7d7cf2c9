"""Where a change stream's batch is applied: its events reduced to their net effect and
applied to the target in one transaction, once, in the stream's order. No Spark.

The stream sources (``sources/pg_stream.py``, ``sources/binlog_stream.py``)
make the batches; a ``changes`` batch skips the read wing (its rows travel in
its manifest) and takes the load wing's commit row, tables and fit. Entry
points, as a batch meets them:

- :class:`.change_batches.StreamEvent`, :func:`.change_batches.net_effect`,
  :func:`.change_batches.segments`: a batch as its manifest carries it, and
  each key's last state (what ``sources`` builds and the apply applies);
- :func:`.stream_import.import_changes`: a stream's batch into its target,
  the table created first in the catalogue's types if it is not there;
- :func:`.apply_changes.apply_changes`: the net effect applied under the
  batch's commit row and its stream's row (:func:`.positions.stream_position`:
  the position of the last change a target table holds);
- :func:`.load_ranges.apply_ranges`: a batch of a full load's key ranges, read from
  the source in the slot's exported snapshot by the importer itself and COPYed in,
  side by side with the load's other batches;
- :mod:`.copies`: the COPY into the table or a stage shaped like it, and the upsert
  from the stage, that both write through.
"""
