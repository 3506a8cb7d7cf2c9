"""The exactly-once scenario harness (issue 6).

:mod:`tests.chaos.world` seeds the sources once per test session,
:mod:`tests.chaos.harness` runs ``sluice run`` as real processes against them
and checks the target, :mod:`tests.chaos.scenarios` injects crashes, races and
faults, :mod:`tests.chaos.ledger_cuts` takes the ledger away under two daemons,
:mod:`tests.chaos.hot_rows` changes an incremental source's rows under the
migration, and :mod:`tests.chaos.report` prints the table ``make chaos`` shows.
The tests themselves are in ``tests/test_exactly_once.py``.
"""
