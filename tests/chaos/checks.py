"""The checks of a scenario's target against its sources.

:func:`verify` compares the target with the sources:

- the same key set, and no key twice (in the table, or in two done batches
  of the ledger: the range or key lists of their manifests);
- the same content: every source row, inserted into a copy of the target
  table (``CREATE TABLE … (LIKE …)``, so the target database converts it as
  it converted the migrated row), rendered as text by the target database,
  row by row and as one md5 per table in key order;
- ``_sluice_commits`` holds one committed row per done batch, and the done
  batches' rows add up to the table's count;
- no batch left ``claimed``, ``importing``, ``failed`` or ``dead``;
- every SQS message deleted, each poison body recorded in the ledger.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

if TYPE_CHECKING:
    from tests.chaos.harness import Migration, Scenario


@dataclass
class Check:
    """What :func:`verify` found."""

    rows_checked: int = 0
    duplicates: int = 0
    missing: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        """No duplicate, nothing missing, nothing else wrong."""
        return not (self.duplicates or self.missing or self.problems)

    def describe(self) -> str:
        """The findings, one per line."""
        head = f"{self.rows_checked} rows checked, {self.duplicates} duplicates, " \
               f"{self.missing} missing"
        return "\n".join([head, *self.problems])


def verify(sc: Scenario) -> Check:
    """Compare the target with the sources; see the module docstring."""
    check = Check()
    with sc.target() as conn:
        done = check_batches(sc, conn, check)
        _check_table(conn, "orders", "id", _orders(sc), done, check)
        _check_table(conn, "customers", "id", _customers(sc), done, check)
        _check_table(conn, "events", "id", _events(sc), done, check)
        stages = conn.scalar(sa.text(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_sluice\\_stage\\_%'"
        ))
        if stages:
            check.notes.append(f"{stages} staging tables left in the target")
    _check_queue(sc, check)
    return check


def check_batches(sc: Migration, conn: sa.Connection, check: Check) -> list[dict[str, Any]]:
    """Every batch done, and one committed row in the target (``conn``) per done batch.

    Returns the done batches (id, source, rows, manifest).
    """
    _check_ledger(sc, check)
    done = _done_batches(sc)
    _check_commits(conn, done, check)
    return done


def _check_ledger(sc: Migration, check: Check) -> None:
    states = sc.states()
    left = {s: n for s, n in states.items() if s != "done"}
    if left:
        check.problems.append(f"ledger: batches not done: {left}")


def _done_batches(sc: Migration) -> list[dict[str, Any]]:
    with sc.ledger() as conn:
        # A repair batch (sluice verify --repair) imports its keys again on purpose.
        rows = conn.execute(sa.text(
            "SELECT id, source, rows, manifest, EXISTS (SELECT 1 FROM sluice_keys k "
            "WHERE k.batch_id = b.id AND k.version LIKE 'repair:%') AS repair "
            "FROM sluice_batches b WHERE state = 'done'"
        )).mappings().all()
    return [dict(r) for r in rows]


def _check_commits(conn: sa.Connection, done: list[dict[str, Any]], check: Check) -> None:
    commits: dict[str, int] = dict(conn.execute(
        sa.text("SELECT batch_id, rows FROM _sluice_commits")
    ).all())
    placeholders = [b for b, rows in commits.items() if rows < 0]
    if placeholders:
        check.problems.append(f"_sluice_commits: {len(placeholders)} placeholder rows")
    done_ids = {b["id"] for b in done}
    if set(commits) - done_ids:
        check.problems.append(
            f"_sluice_commits: {len(set(commits) - done_ids)} commits of batches the "
            f"ledger does not have done, e.g. {sorted(set(commits) - done_ids)[:3]}"
        )
    if done_ids - set(commits):
        check.problems.append(
            f"ledger: {len(done_ids - set(commits))} done batches without a commit "
            f"in the target, e.g. {sorted(done_ids - set(commits))[:3]}"
        )


def _check_table(
    conn: sa.Connection, table: str, key: str, expected: dict[Any, dict[str, Any]],
    done: list[dict[str, Any]], check: Check,
) -> None:
    check.rows_checked += len(expected)
    # Each source has its own table; repair batches import keys again by design.
    mine = [b for b in done if b["source"] == table and not b["repair"]]
    # Keys in more than one done batch: a double import, whatever the table shows.
    covered = _coverage(mine, sorted(expected))
    twice = sum(n - 1 for n in covered.values() if n > 1)
    exists = conn.scalar(sa.text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table})
    if not exists:
        check.missing += len(expected)
        check.problems.append(f"{table}: no such table in the target")
        return
    total, distinct = conn.execute(
        sa.text(f'SELECT count(*), count(DISTINCT "{key}") FROM "{table}"')
    ).one()
    check.duplicates += twice + (total - distinct)
    if twice:
        check.problems.append(f"{table}: {twice} keys imported by more than one batch")
    found = set(conn.scalars(sa.text(f'SELECT "{key}" FROM "{table}"')))
    missing = expected.keys() - found
    extra = found - expected.keys()
    check.missing += len(missing)
    if missing:
        check.problems.append(f"{table}: {len(missing)} keys missing, e.g. "
                              f"{sorted(missing)[:5]}")
    if extra:
        check.problems.append(f"{table}: {len(extra)} keys not in the source, e.g. "
                              f"{sorted(extra)[:5]}")
    uncovered = [k for k in expected if k not in covered]
    if uncovered and not missing:
        check.problems.append(f"{table}: {len(uncovered)} keys in no done batch")
    rows_done = sum(int(b["rows"] or 0) for b in mine)
    if rows_done != total:
        check.problems.append(f"{table}: done batches say {rows_done} rows, "
                              f"the table has {total}")
    _compare_content(conn, table, key, expected, check)


def _compare_content(conn: sa.Connection, table: str, key: str,
                     expected: dict[Any, dict[str, Any]], check: Check) -> None:
    """The source's rows as the target database renders them, against the target's."""
    columns = [c["name"] for c in sa.inspect(conn).get_columns(table)]
    wanted = sorted(next(iter(expected.values())).keys())
    if sorted(columns) != wanted:
        check.problems.append(f"{table}: columns {sorted(columns)}, expected {wanted}")
        return
    copy = f'chaos_expected."{table}"'
    conn.exec_driver_sql("CREATE SCHEMA IF NOT EXISTS chaos_expected")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {copy}")
    conn.exec_driver_sql(f'CREATE TABLE {copy} (LIKE public."{table}")')
    holder = sa.Table(table, sa.MetaData(), autoload_with=conn, schema="chaos_expected")
    rows = list(expected.values())
    for start in range(0, len(rows), 5_000):
        conn.execute(holder.insert(), rows[start : start + 5_000])
    conn.commit()
    differ = conn.execute(sa.text(
        f'SELECT e."{key}", ROW(e.*)::text, ROW(t.*)::text FROM {copy} e '
        f'JOIN public."{table}" t USING ("{key}") '
        "WHERE ROW(e.*)::text IS DISTINCT FROM ROW(t.*)::text "
        f'ORDER BY e."{key}" LIMIT 3'
    )).all()
    sums = conn.execute(sa.text(
        f"SELECT (SELECT md5(string_agg(ROW(e.*)::text, E'\\n' ORDER BY e.\"{key}\")) "
        f"FROM {copy} e), (SELECT md5(string_agg(ROW(t.*)::text, E'\\n' "
        f'ORDER BY t."{key}")) FROM public."{table}" t)'
    )).one()
    if differ:
        k, want, got = differ[0]
        check.problems.append(f"{table}: rows differ from the source, e.g. key {k}: "
                              f"source {want} target {got}")
    elif sums[0] != sums[1]:
        check.problems.append(f"{table}: checksum {sums[1]} != source's {sums[0]}")


def _check_queue(sc: Scenario, check: Check) -> None:
    attrs = sc.client.get_queue_attributes(
        QueueUrl=sc.queue_url, AttributeNames=["All"]
    )["Attributes"]
    left = {k: attrs[k] for k in ("ApproximateNumberOfMessages",
                                  "ApproximateNumberOfMessagesNotVisible",
                                  "ApproximateNumberOfMessagesDelayed") if attrs[k] != "0"}
    if left:
        check.problems.append(f"events: messages left in the queue: {left}")
    with sc.ledger() as conn:
        recorded = set(conn.scalars(sa.text("SELECT body FROM sluice_poison")))
    if recorded != sc.world.poison:
        check.problems.append(
            f"events: poison recorded {len(recorded)} bodies, sent "
            f"{len(sc.world.poison)}; unrecorded: {sorted(sc.world.poison - recorded)[:3]}"
            f", wrongly recorded: {sorted(recorded - sc.world.poison)[:3]}"
        )


# -- what the target must hold ----------------------------------------------------


def _orders(sc: Scenario) -> dict[Any, dict[str, Any]]:
    return _rows(sc.world.shop_url, "SELECT * FROM orders")


def _customers(sc: Scenario) -> dict[Any, dict[str, Any]]:
    return _rows(sc.world.legacy_url, "SELECT * FROM customers WHERE status = 'active'")


def _events(sc: Scenario) -> dict[Any, dict[str, Any]]:
    return {
        key: {
            name: json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list)
            else value
            for name, value in record.items()
        }
        for key, record in sc.world.events.items()
    }


def _rows(url: str, query: str) -> dict[Any, dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {row["id"]: dict(row) for row in conn.execute(sa.text(query)).mappings()}
    finally:
        engine.dispose()


def _coverage(batches: list[dict[str, Any]], keys: list[Any]) -> Counter[Any]:
    """How many of the done ``batches`` hold each key (ranges read against ``keys``)."""
    covered: Counter[Any] = Counter()
    for batch in batches:
        manifest = json.loads(batch["manifest"])
        if manifest["kind"] == "range":
            lo, hi = manifest["lo"], manifest["hi"]
            start = 0 if lo is None else bisect.bisect_right(keys, lo[0])
            end = len(keys) if hi is None else bisect.bisect_right(keys, hi[0])
            covered.update(keys[start:end])
        else:
            covered.update(k[0] for k in manifest["keys"])
    return covered
