"""Every value arrives as it was: a table of every type, migrated by a daemon, compared by
the databases themselves (see :mod:`tests.type_matrix`). The matrix each test prints is
the README's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers import drain, write_config
from tests.type_matrix import (
    MARIADB_CANONICAL,
    MARIADB_TAMPER,
    MARIADB_TO_PARQUET,
    MARIADB_TO_PG,
    MARIADB_TO_PG_TAMPER,
    MARIADB_TO_SQLITE,
    MARIADB_TYPES,
    PG_CANONICAL,
    PG_ON_MARIADB,
    PG_TAMPER,
    PG_TO_MARIADB,
    PG_TO_MARIADB_TAMPER,
    PG_TO_PARQUET,
    PG_TO_SQLITE,
    PG_TYPES,
    REJECTED,
    column_name,
    compare,
    libpq_url,
    mariadb_create_source,
    mariadb_schema_copy,
    mariadb_texts,
    parquet_texts,
    pg_create_source,
    pg_schema_copy,
    pg_texts,
    pg_types,
    sqlite_texts,
    tamper,
    tamper_parquet,
    tamper_sqlite,
)

matrix_only = pytest.mark.matrix_only
"""MariaDB into SQLite and Parquet: its reader is taken by the MariaDB runs, those writers by
the PostgreSQL runs. ``make matrix`` runs them with the rest (``MATRIX=1``); ``make test``
leaves them out to stay short."""

ONE_BATCH = """
batch: {max_items: 1000, max_wait: 200ms}
retry: {max_attempts: 2, backoff: 1s}
spark: {master: "local[2]", max_concurrent_imports: 2}
"""


def _config(tmp_path: Path, source: str, target: str) -> tuple[Path, Any]:
    """The matrix's config: into ``target`` (a database URL, or ``parquet``: a lake in
    ``tmp_path``)."""
    into = (f"{{kind: parquet, path: '{tmp_path}/lake'}}" if target == "parquet"
            else f"{{kind: jdbc, url: '{target}'}}")  # fmt: skip
    return write_config(tmp_path, f"""
ledger: sqlite:///{tmp_path}/ledger.db
sources:
  matrix:
    kind: sql
    url: '{source}'
    table: matrix
    key: id
    target: warehouse.matrix
targets:
  warehouse: {into}
{ONE_BATCH}""")  # fmt: skip


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("precreated", [False, True], ids=["created", "pg_dump_ddl"])
def test_postgresql_to_postgresql_keeps_every_value(
    tmp_path: Path, pg_factory: Any, spark: Any, precreated: bool
) -> None:
    source, target = pg_factory.create("mx_src"), pg_factory.create("mx_dst")
    rows = pg_create_source(source, "matrix", PG_TYPES)
    if precreated:
        pg_schema_copy(source, target)
        # A row of the batch's range already there: the batch is staged and upserted
        # (casts into the table's types, identity overridden), not COPYed straight in.
        _copy_row(source, target, "matrix", key=1)
    path, cfg = _config(tmp_path, source, target)
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0, summary

    columns = [column_name(t) for t, _ in PG_TYPES] + ["n_identity", "n_generated"]
    shown = [t for t, _ in PG_TYPES] + ["identity column", "generated column"]
    copied = pg_texts(target, "matrix", columns)
    matrix = compare(pg_texts(source, "matrix", columns), copied, columns, shown,
                     "postgresql -> postgresql")  # fmt: skip
    print(f"\n{matrix.table()}")
    assert len(copied) == rows
    assert all(r == "same" for r in matrix.results.values()), matrix.table()
    source_types, target_types = pg_types(source, "matrix"), pg_types(target, "matrix")
    assert {c: source_types[c] for c in columns[:-2]} == {c: target_types[c] for c in columns[:-2]}
    if not precreated:
        _verify_sees_each_change(spark, cfg, source, target, columns)


USER_TYPES = ("mood", "posint", "email")
"""The matrix's types the database defines (an enum, domains), and their arrays."""


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("spark_jobs", [False, True], ids=["local_tasks", "spark_jobs"])
def test_built_in_types_go_from_one_binary_copy_into_the_other_as_stored(
    tmp_path: Path, pg_factory: Any, spark: Any, caplog: pytest.LogCaptureFixture,
    spark_jobs: bool,
) -> None:  # fmt: skip
    """A target of the source's very types (sluice makes it so) takes the source's binary
    COPY as it comes, never parsed: every built-in type of the matrix, every value. By a
    local task, as ``sluice run`` on a local master loads it, and by a Spark task, as a
    cluster's executors do."""
    specs = [(t, v) for t, v in PG_TYPES if not t.startswith(USER_TYPES)]
    source, target = pg_factory.create("mx_src"), pg_factory.create("mx_dst")
    rows = pg_create_source(source, "matrix", specs)
    path, cfg = _config(tmp_path, source, target)
    with caplog.at_level("INFO", logger="spark_jobs"):
        summary = drain(cfg, path, spark, spark_jobs=spark_jobs)
    assert summary.exit_code == 0, summary
    assert "(copy as stored)" in caplog.text
    columns = [column_name(t) for t, _ in specs]
    copied = pg_texts(target, "matrix", columns)
    matrix = compare(pg_texts(source, "matrix", columns), copied, columns, [t for t, _ in specs],
                     "postgresql -> postgresql, as stored")  # fmt: skip
    assert len(copied) == rows
    assert all(r == "same" for r in matrix.results.values()), matrix.table()


def _differing(before: dict[Any, tuple], after: dict[Any, tuple]) -> set[Any]:
    """The keys whose rows differ, by the databases' own texts (the independent read)."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def _verify_sees_each_change(spark: Any, cfg: Any, source: str, target: str,
                             columns: list[str]) -> None:  # fmt: skip
    """verify finds the matrix equal, then every value changed behind sluice's back by its
    type's smallest step, then a column rewritten through a lossy type; judged by the
    databases' own texts, never by verify itself."""
    from scheduler.verify_tables import verify_config

    [equal] = verify_config(spark, cfg).tables
    assert equal.equal and equal.checked == equal.target_rows > 0, equal
    changed = tamper(target, "matrix", PG_TYPES, PG_TAMPER)
    assert _differing(pg_texts(source, "matrix", columns),
                      pg_texts(target, "matrix", columns)) == changed  # fmt: skip
    [found] = verify_config(spark, cfg).tables
    assert (found.different, found.missing, found.extra) == (len(changed), 0, 0), found
    assert {k for [k] in found.first["different"]} <= changed
    # A time made a timestamp (what a JDBC read of it used to give): not equal either.
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE matrix ALTER COLUMN c_time TYPE timestamp "
                             "USING ('1970-01-01'::date + c_time)")  # fmt: skip
    engine.dispose()
    [lossy] = verify_config(spark, cfg).tables
    times = len([v for t, vals in PG_TYPES if t == "time" for v in vals])
    assert lossy.different == len(changed) - 1 + times, lossy


def _copy_row(source: str, target: str, table: str, key: int) -> None:
    """One row of ``source``'s table into ``target``'s, by COPY's text (what pg_dump does)."""
    import psycopg

    with psycopg.connect(libpq_url(source)) as src, psycopg.connect(libpq_url(target)) as dst:
        names = [r[0] for r in src.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (table,))]  # fmt: skip
        listed = ", ".join(names)
        data = bytearray()
        with src.cursor().copy(f"COPY (SELECT {listed} FROM {table} WHERE id = {key}) TO STDOUT") \
                as out:  # fmt: skip
            for chunk in out:
                data += chunk
        with dst.cursor().copy(f"COPY {table} ({listed}) FROM STDIN") as into:
            into.write(bytes(data))
    assert sa  # the module's engines are the helpers'


@pytest.mark.spark
@pytest.mark.mariadb
@pytest.mark.parametrize("precreated", [False, True], ids=["created", "mariadb_dump_ddl"])
def test_mariadb_to_mariadb_keeps_every_value(
    tmp_path: Path, mariadb_factory: Any, spark: Any, precreated: bool
) -> None:
    source, target = mariadb_factory.create("mx_src"), mariadb_factory.create("mx_dst")
    rows = mariadb_create_source(source, "matrix", MARIADB_TYPES)
    if precreated:
        mariadb_schema_copy(source, target)
    path, cfg = _config(tmp_path, source, target)
    summary = drain(cfg, path, spark)
    assert summary.exit_code == 0, summary

    columns = [column_name(t) for t, _ in MARIADB_TYPES] + ["n_generated"]
    ddls = [t for t, _ in MARIADB_TYPES] + ["bigint"]
    copied = mariadb_texts(target, "matrix", columns, ddls)
    matrix = compare(mariadb_texts(source, "matrix", columns, ddls), copied, columns,
                     ddls[:-1] + ["generated column"], "mariadb -> mariadb")  # fmt: skip
    print(f"\n{matrix.table()}")
    assert len(copied) == rows
    assert all(r == "same" for r in matrix.results.values()), matrix.table()
    if not precreated:
        from scheduler.verify_tables import verify_config

        [equal] = verify_config(spark, cfg).tables
        assert equal.equal and equal.checked == rows, equal
        changed = tamper(target, "matrix", MARIADB_TYPES, MARIADB_TAMPER, mariadb=True)
        assert _differing(mariadb_texts(source, "matrix", columns, ddls),
                          mariadb_texts(target, "matrix", columns, ddls)) == changed
        [found] = verify_config(spark, cfg).tables
        if found.different != len(changed):  # debug aid: which change verify did not see
            from spark_jobs.common.manifest import Manifest
            from spark_jobs.jobs.import_job import target_table
            from spark_jobs.verify.compare import compare as verify_compare
            from spark_jobs.verify.read import Scope, read_sides

            src = cfg.sources["matrix"]
            tgt = target_table(cfg, Manifest("v", "matrix", src.target, "keys", 0))
            diff = verify_compare(spark, *read_sides(spark, src, tgt, Scope(), 2), ["id"],
                                  label="x")  # fmt: skip
            seen = {int(k) for [k] in diff.keys(["different"])}
            raise AssertionError(f"not seen: {sorted(changed - seen)}")
        assert (found.different, found.missing, found.extra) == (len(changed), 0, 0), found
        assert {int(k) for [k] in found.first["different"]} <= changed


@pytest.mark.spark
@pytest.mark.mariadb
@pytest.mark.postgres
def test_mariadb_to_postgresql_changes_values_only_as_the_mapping_says(
    tmp_path: Path, mariadb_factory: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = mariadb_factory.create("mx_src"), pg_factory.create("mx_dst")
    rows = mariadb_create_source(source, "matrix", MARIADB_TYPES)
    path, cfg = _config(tmp_path, source, target)
    summary = drain(cfg, path, spark)
    refused = [t for t, vals in MARIADB_TYPES for v in vals
               if t in ("tinyint(1)",) and v not in ("0", "1")]  # fmt: skip
    assert summary.exit_code == 1 and summary.stats.rows_rejected == len(refused), summary
    assert summary.stats.zero_dates == {"matrix.c_date": 1, "matrix.c_datetime_6": 1}

    columns = [column_name(t) for t, _ in MARIADB_TYPES] + ["n_generated"]
    ddls = [t for t, _ in MARIADB_TYPES] + ["generated column"]
    copied = pg_texts(target, "matrix", columns)
    matrix = compare(mariadb_texts(source, "matrix", columns, [*ddls[:-1], "bigint"]), copied,
                     columns, ddls, "mariadb -> postgresql", MARIADB_TO_PG,
                     PG_CANONICAL)  # fmt: skip
    print(f"\n{matrix.table()}")
    assert len(copied) == rows - len(refused)
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    _verify_across(spark, cfg, MARIADB_TYPES, MARIADB_TO_PG_TAMPER, target, len(refused),
                   mariadb=False)  # fmt: skip


@pytest.mark.spark
@pytest.mark.mariadb
@pytest.mark.postgres
def test_postgresql_to_mariadb_changes_values_only_as_the_mapping_says(
    tmp_path: Path, mariadb_factory: Any, pg_factory: Any, spark: Any
) -> None:
    source, target = pg_factory.create("mx_src"), mariadb_factory.create("mx_dst")
    rows = pg_create_source(source, "matrix", PG_TYPES)
    path, cfg = _config(tmp_path, source, target)
    summary = drain(cfg, path, spark)
    refused = [v for t, vals in PG_TYPES for v in vals
               if t in PG_TO_MARIADB and PG_TO_MARIADB[t](_pg_text(source, t, v)) == REJECTED]

    columns = [column_name(t) for t, _ in PG_TYPES] + ["n_identity", "n_generated"]
    shown = [t for t, _ in PG_TYPES] + ["identity column", "generated column"]
    ddls = [PG_ON_MARIADB.get(t, "text") for t in shown]
    copied = mariadb_texts(target, "matrix", columns, ddls)
    matrix = compare(pg_texts(source, "matrix", columns), copied, columns, shown,
                     "postgresql -> mariadb", PG_TO_MARIADB, MARIADB_CANONICAL)  # fmt: skip
    print(f"\n{matrix.table()}")
    assert summary.exit_code == 1 and summary.stats.rows_rejected == len(refused), summary
    assert len(copied) == rows - len(refused)
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    _verify_across(spark, cfg, PG_TYPES, PG_TO_MARIADB_TAMPER, target, len(refused),
                   mariadb=True)  # fmt: skip


def _verify_across(spark: Any, cfg: Any, specs: list[Any], changes: dict[str, Any], target: str,
                   refused: int, mariadb: bool) -> None:  # fmt: skip
    """Across engines: verify finds the target equal under the mapping (the refused rows
    rejected, not missing), then each value changed behind its back. The servers' own
    neutral texts (what their row sums hash) agree where Spark's do, and differ where
    a value of a kind they print was changed."""
    from scheduler.verify_tables import verify_config
    from tests.neutral_texts import differing, provable_columns

    source = cfg.sources["matrix"].url
    [equal] = verify_config(spark, cfg).tables
    assert (equal.different, equal.missing, equal.extra, equal.rejected) == (0, 0, 0, refused), \
        equal
    assert differing(source, target, "matrix") == {}
    changed = tamper(target, "matrix", specs, changes, mariadb=mariadb)
    [found] = verify_config(spark, cfg).tables
    assert (found.different, found.missing, found.extra) == (len(changed), 0, 0), found
    assert {int(k) for [k] in found.first["different"]} <= changed
    provable = provable_columns(source, "matrix") & provable_columns(target, "matrix")
    seen = differing(source, target, "matrix")
    assert set(seen) == {column_name(t) for t in changes} & provable, seen
    assert all(len(keys) == 1 and int(*keys) in changed for keys in seen.values()), seen


def _verify_sees_each_step(spark: Any, cfg: Any, refused: int, read: Any, tampering: Any) -> None:
    """A file target (SQLite, Parquet): verify finds it equal under the mapping (the refused
    rows rejected, not missing), then a value of every type changed by its smallest step,
    each change seen first by an independent read of the target (``read``)."""
    from scheduler.verify_tables import verify_config

    [equal] = verify_config(spark, cfg).tables
    assert (equal.different, equal.missing, equal.extra, equal.rejected) == (0, 0, 0, refused), \
        equal
    before = read()
    changed = tampering()
    assert _differing(before, read()) == changed and len(changed) > 20
    [found] = verify_config(spark, cfg).tables
    assert (found.different, found.missing, found.extra) == (len(changed), 0, 0), found
    assert {int(k) for [k] in found.first["different"]} <= changed


def _pg_text(url: str, ddl: str, literal: str) -> str:
    """How PostgreSQL prints ``literal`` of type ``ddl`` (in UTC)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.execute(sa.text("SET TimeZone = 'UTC'"))
        text = conn.exec_driver_sql(f"SELECT (({literal})::{ddl})::text".replace("%", "%%"))
        value = str(text.scalar())
    engine.dispose()
    return value


@pytest.mark.spark
@pytest.mark.postgres
def test_postgresql_to_parquet_changes_values_only_as_the_mapping_says(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source = pg_factory.create("mx_src")
    rows = pg_create_source(source, "matrix", PG_TYPES)
    path, cfg = _config(tmp_path, source, "parquet")
    summary = drain(cfg, path, spark)
    refused = [v for t, vals in PG_TYPES for v in vals
               if t in PG_TO_PARQUET and PG_TO_PARQUET[t](_pg_text(source, t, v)) == REJECTED]
    columns = [column_name(t) for t, _ in PG_TYPES]
    shown = [t for t, _ in PG_TYPES]
    copied = parquet_texts(f"{tmp_path}/lake/matrix", columns)
    pg = {k: tuple(_pg_copy_text(t, v) for t, v in zip(shown, row, strict=True))
          for k, row in pg_texts(source, "matrix", columns).items()}  # fmt: skip
    matrix = compare(pg, copied, columns, shown, "postgresql -> parquet", PG_TO_PARQUET)
    print(f"\n{matrix.table()}")
    assert summary.exit_code == 1 and summary.stats.rows_rejected == len(refused), summary
    assert len(copied) == rows - len(refused)
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    lake = f"{tmp_path}/lake/matrix"
    _verify_sees_each_step(spark, cfg, len(refused), lambda: parquet_texts(lake, columns),
                           lambda: tamper_parquet(lake, PG_TYPES))  # fmt: skip


def _pg_copy_text(ddl: str, text: Any) -> Any:
    """PostgreSQL's ``::text`` of a value as its own output function prints it (COPY's
    text, what a text column of the target holds): a bpchar padded, an inet host's prefix
    length left out."""
    if text is None:
        return None
    if ddl.startswith("char("):
        return text.ljust(int(ddl[5:-1]))
    if ddl == "inet":
        return re.sub(r"/(32|128)$", "", text)
    return text


@pytest.mark.spark
@pytest.mark.postgres
def test_postgresql_to_sqlite_changes_values_only_as_the_mapping_says(
    tmp_path: Path, pg_factory: Any, spark: Any
) -> None:
    source = pg_factory.create("mx_src")
    rows = pg_create_source(source, "matrix", PG_TYPES)
    lite = tmp_path / "lite.db"
    path, cfg = _config(tmp_path, source, f"sqlite:///{lite}")
    summary = drain(cfg, path, spark)
    refused = [v for t, vals in PG_TYPES for v in vals
               if t in PG_TO_SQLITE and PG_TO_SQLITE[t](_pg_text(source, t, v)) == REJECTED]
    columns = [column_name(t) for t, _ in PG_TYPES]
    shown = [t for t, _ in PG_TYPES]
    copied = sqlite_texts(str(lite), columns, floats=[column_name("real")])
    pg = {k: tuple(_pg_copy_text(t, v) for t, v in zip(shown, row, strict=True))
          for k, row in pg_texts(source, "matrix", columns).items()}  # fmt: skip
    matrix = compare(pg, copied, columns, shown, "postgresql -> sqlite", PG_TO_SQLITE)
    print(f"\n{matrix.table()}")
    assert summary.exit_code == 1 and summary.stats.rows_rejected == len(refused), summary
    assert len(copied) == rows - len(refused)
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    floats = [column_name("real")]
    _verify_sees_each_step(spark, cfg, len(refused),
                           lambda: sqlite_texts(str(lite), columns, floats=floats),
                           lambda: tamper_sqlite(str(lite), PG_TYPES, floats))  # fmt: skip


def _mariadb_matrix(source: str) -> tuple[int, list[str], list[str], dict[Any, tuple]]:
    """The MariaDB matrix table: its rows, columns, types and texts."""
    rows = mariadb_create_source(source, "matrix", MARIADB_TYPES)
    columns = [column_name(t) for t, _ in MARIADB_TYPES]
    shown = [t for t, _ in MARIADB_TYPES]
    return rows, columns, shown, mariadb_texts(source, "matrix", columns, shown)


@matrix_only
@pytest.mark.spark
@pytest.mark.mariadb
def test_mariadb_to_sqlite_changes_values_only_as_the_mapping_says(
    tmp_path: Path, mariadb_factory: Any, spark: Any
) -> None:
    source = mariadb_factory.create("mx_src")
    rows, columns, shown, texts = _mariadb_matrix(source)
    lite = tmp_path / "lite.db"
    path, cfg = _config(tmp_path, source, f"sqlite:///{lite}")
    summary = drain(cfg, path, spark)
    refused = [v for row in texts.values() for t, v in zip(shown, row, strict=True)
               if v is not None and t in MARIADB_TO_SQLITE
               and MARIADB_TO_SQLITE[t](v) == REJECTED]  # fmt: skip
    # The key, a bigint unsigned, is kept as its text: past 2^63 is no SQLite integer.
    floats = [column_name("float")]
    copied = {int(k): row for k, row in sqlite_texts(str(lite), columns, floats).items()}
    matrix = compare(texts, copied, columns, shown, "mariadb -> sqlite", MARIADB_TO_SQLITE)
    print(f"\n{matrix.table()}")
    assert summary.stats.rows_rejected == len(refused), summary
    assert summary.stats.zero_dates == {"matrix.c_date": 1, "matrix.c_datetime_6": 1}
    assert len(copied) == rows - len(refused)
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    def read() -> dict[int, tuple]:
        return {int(k): row for k, row in sqlite_texts(str(lite), columns, floats).items()}

    _verify_sees_each_step(spark, cfg, len(refused), read,
                           lambda: tamper_sqlite(str(lite), MARIADB_TYPES, [floats[0]]))


@matrix_only
@pytest.mark.spark
@pytest.mark.mariadb
def test_mariadb_to_parquet_changes_values_only_as_the_mapping_says(
    tmp_path: Path, mariadb_factory: Any, spark: Any
) -> None:
    source = mariadb_factory.create("mx_src")
    rows, columns, shown, texts = _mariadb_matrix(source)
    path, cfg = _config(tmp_path, source, "parquet")
    summary = drain(cfg, path, spark)
    copied = parquet_texts(f"{tmp_path}/lake/matrix", columns)
    matrix = compare(texts, copied, columns, shown, "mariadb -> parquet", MARIADB_TO_PARQUET)
    print(f"\n{matrix.table()}")
    assert summary.exit_code == 0 and summary.stats.rows_rejected == 0, summary
    assert summary.stats.zero_dates == {"matrix.c_date": 1, "matrix.c_datetime_6": 1}
    assert len(copied) == rows
    assert not [r for r in matrix.results.values() if r.startswith("DIFFERENT")], matrix.table()
    lake = f"{tmp_path}/lake/matrix"
    _verify_sees_each_step(spark, cfg, 0, lambda: parquet_texts(lake, columns),
                           lambda: tamper_parquet(lake, MARIADB_TYPES))  # fmt: skip

