"""The data plane: a batch read from its source, loaded into its target and committed there.

A house of wings, one folder each, stacked (``docs/architecture.md``, "The
wings of the data plane"); a module imports only its own wing and the ones
beneath it (``tests/test_wings.py``):

- :mod:`.jobs`: the import job and group, a batch's way from read to commit;
- :mod:`.schema`: a target table's schema objects, planned, compared, built;
- :mod:`.verify`: a source table compared with its target table;
- :mod:`.changes`: a change stream's batch applied, once, in order;
- :mod:`.load`: a batch into its target, and its commit recorded there;
- :mod:`.read`: a batch's rows read from its source;
- :mod:`.tasks`: where tasks run (the SparkSession, local worker processes);
- :mod:`.common`: the manifest, connections, key order, outcomes;
- :mod:`.engines`: what sluice knows of each database engine, beneath them all.

It never imports ``scheduler``, ``sources`` or ``sinks`` (``tests/test_layout.py``).
"""
