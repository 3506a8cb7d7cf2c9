"""Loading config files: the reference loads, and every mistake names file, line and key.

Real files in tmp_path and the real ``sluice`` console script; no mocks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from config import ConfigError, SluiceConfig, load_config, load_config_text
from config.secrets import config_secrets, redact_text, redact_url

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "examples" / "reference.yaml"

# A small valid config; cases below break one line of it. Line numbers matter.
MINIMAL = """\
sources:
  orders:
    kind: sql
    url: sqlite:///shop.db
    table: orders
    key: id
    target: lake.orders
targets:
  lake:
    kind: parquet
    path: ./out
batch: {max_items: 100, max_wait: 2s}
"""


def sluice_executable() -> str:
    """The ``sluice`` console script of this venv (cli has no ``__main__``)."""
    beside = Path(sys.executable).parent / "sluice"
    found = str(beside) if beside.exists() else shutil.which("sluice")
    assert found, "the sluice console script is not installed (pip install -e .)"
    return found


def run_sluice(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``sluice ARGS`` from the repo root, as a user would."""
    full_env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"} | (env or {})
    return subprocess.run(
        [sluice_executable(), *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write(tmp_path: Path, text: str, name: str = "sluice.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load_error(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env or {})
    return str(caught.value)


# (name, YAML, the expected message line without the file part, line number)
MISTAKES = [
    (
        "missing key",
        MINIMAL.replace("    key: id\n", ""),
        "sources.orders.key: field required",
        2,  # the mapping that lacks it
    ),
    (
        "unknown key",
        MINIMAL.replace("    table: orders", "    tabel: orders").replace(
            "    key: id", "    table: orders\n    key: id"
        ),
        "sources.orders.tabel: unknown key; did you mean 'table'?",
        5,
    ),
    (
        "bad type",
        MINIMAL.replace("max_items: 100", "max_items: many"),
        "batch.max_items: should be a valid integer, unable to parse string as an integer; "
        "got 'many'",
        12,
    ),
    (
        "JDBC URL",
        MINIMAL.replace("url: sqlite:///shop.db", "url: jdbc:postgresql://db/shop?user=app"),
        "sources.orders.url: not a database URL (it starts 'jdbc:postgresql'): write it as "
        "dialect+driver://user@host:port/database, e.g. postgresql+psycopg://app@db:5432/shop, "
        "mysql+pymysql://app@db/shop or sqlite:///shop.db; sluice makes the JDBC URL from it",
        4,
    ),
    (
        "unset variable",
        MINIMAL.replace("table: orders", "table: ${SLUICE_TEST_TABLE}"),
        "sources.orders.table: environment variable SLUICE_TEST_TABLE is not set; "
        "set it or write ${SLUICE_TEST_TABLE:-default}",
        5,
    ),
]


@pytest.mark.parametrize(("yaml_text", "expected", "line"), [m[1:] for m in MISTAKES],
                         ids=[m[0] for m in MISTAKES])
def test_mistake_names_key_file_and_line(
    tmp_path: Path, yaml_text: str, expected: str, line: int
) -> None:
    path = write(tmp_path, yaml_text)
    message = load_error(path)
    assert f"{expected} ({path} line {line})" in message


@pytest.mark.parametrize(("yaml_text", "expected", "line"), [m[1:] for m in MISTAKES],
                         ids=[m[0] for m in MISTAKES])
def test_validate_command_exits_2_with_message(
    tmp_path: Path, yaml_text: str, expected: str, line: int
) -> None:
    path = write(tmp_path, yaml_text)
    result = run_sluice("validate", str(path))
    assert result.returncode == 2, result.stderr
    assert f"{expected} ({path} line {line})" in result.stderr
    assert result.stdout == ""


def test_reference_config_loads_as_it_is() -> None:
    cfg = load_config(REFERENCE, env={})
    assert set(cfg.sources) == {"orders", "customers", "events"}
    assert cfg.sources["orders"].kind == "sql"
    assert cfg.sources["events"].kind == "sqs"
    customers = cfg.sources["customers"]
    assert customers.kind == "sql" and customers.where == "active = 1"
    assert cfg.spark.conf == {"spark.sql.shuffle.partitions": "4"}
    assert cfg.batch.max_wait == 2.0
    assert cfg.strategy is not None and cfg.strategy.prefer is not None
    # Relative paths resolve next to the file, whatever the working directory.
    lake = cfg.targets["lake"]
    assert lake.kind == "parquet" and lake.path == str(REFERENCE.parent / "out")
    assert cfg.work_dir == str(REFERENCE.parent / ".sluice")


def test_validate_command_accepts_the_reference() -> None:
    result = run_sluice("validate", "examples/reference.yaml")
    assert result.returncode == 0, result.stderr
    assert "ok (3 sources, 2 targets)" in result.stdout


def test_schema_command_prints_json_schema() -> None:
    result = run_sluice("schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert "sources" in schema["properties"]
    # A whole-database source (tables: instead of table: and key:) is described too.
    sql = schema["$defs"]["SqlSourceConfig"]
    assert {"tables", "overrides", "order"} <= set(sql["properties"])
    assert sql["oneOf"] == [{"required": ["table", "key"]}, {"required": ["tables"]}]


def test_broken_example_reports_its_three_mistakes() -> None:
    result = run_sluice("validate", "examples/broken.yaml")
    assert result.returncode == 2
    broken = "examples/broken.yaml"
    assert "3 problems" in result.stderr
    assert f"sources.customers.wehre: unknown key; did you mean 'where'? ({broken} line 21)" in (
        result.stderr
    )
    assert f"sources.events.queue_url: field required ({broken} line 23)" in result.stderr
    assert "batch.max_items: should be a valid integer" in result.stderr
    assert f"got 'lots' ({broken} line 40)" in result.stderr


def test_several_errors_are_reported_at_once(tmp_path: Path) -> None:
    text = (
        MINIMAL.replace("    key: id\n", "")
        .replace("path: ./out", "path: ./out\n    partiton_by: [day]")
        .replace("max_wait: 2s", "max_wait: soon")
    )
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}: 3 problems\n")
    lines = message.splitlines()[1:]
    assert lines == [
        f"  sources.orders.key: field required ({path} line 2)",
        f"  targets.lake.partiton_by: unknown key; did you mean 'partition_by'? ({path} line 11)",
        f"  batch.max_wait: expected a duration such as 250ms, 2s, 5m or 1h, got 'soon' "
        f"({path} line 12)",
    ]


def test_variable_defaults_escapes_and_several_per_string(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "table: orders", "table: ${SCHEMA:-public}_${TABLE}_${EMPTY:-x}"
    ).replace("kind: sql\n", "kind: sql\n    where: \"note = '$${literal}' and a = '${A:-}'\"\n")
    cfg = load_config(write(tmp_path, text), env={"TABLE": "orders", "EMPTY": ""})
    source = cfg.sources["orders"]
    assert source.kind == "sql"
    assert source.table == "public_orders_x"
    assert source.where == "note = '${literal}' and a = ''"


def test_variable_in_flow_mapping_needs_quotes(tmp_path: Path) -> None:
    text = MINIMAL.replace("max_items: 100", "max_items: ${BATCH}")
    assert 'quote a ${VAR} value inside [ ] or { }' in load_error(write(tmp_path, text))
    quoted = MINIMAL.replace("max_items: 100", 'max_items: "${BATCH}"')
    assert load_config(write(tmp_path, quoted), env={"BATCH": "7"}).batch.max_items == 7


def test_variable_fills_a_number_field(tmp_path: Path) -> None:
    # Interpolation happens before validation, so a number can come from the environment.
    cfg = load_config(write(tmp_path, MINIMAL + "metrics_port: ${PORT}\n"), env={"PORT": "9100"})
    assert cfg.metrics_port == 9100


def test_duplicate_keys_are_rejected_naming_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("    key: id\n", "    key: id\n    key: uuid\n"))
    message = load_error(path)
    assert f"sources.orders.key: duplicate key, first set at line 6; keep one ({path} line 7)" in (
        message
    )


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("250ms", 0.25), ("2s", 2.0), ("5m", 300.0), ("1h", 3600.0), ("3", 3.0), ("1.5", 1.5)],
)
def test_durations_parse(tmp_path: Path, written: str, seconds: float) -> None:
    text = MINIMAL.replace("max_wait: 2s", f"max_wait: {written}")
    assert load_config(write(tmp_path, text), env={}).batch.max_wait == pytest.approx(seconds)


def test_password_from_environment_never_appears_in_errors(tmp_path: Path) -> None:
    password = "pw-Very-S3cret"
    url = "postgresql+psycopg://app:${PGPASSWORD}@db1/shop"
    # The URL lands in a number field (echoed by a type error) and in a target
    # (echoed by a model validator); both messages must hide the password.
    typed = write(tmp_path, MINIMAL + f"metrics_port: {url}\n", "typed.yaml")
    referenced = write(
        tmp_path, MINIMAL.replace("target: lake.orders", f"target: {url}"), "referenced.yaml"
    )
    for path, key in ((typed, "metrics_port"), (referenced, "sources.orders.target")):
        message = load_error(path, env={"PGPASSWORD": password})
        assert key in message
        assert "app:***@db1" in message
        assert password not in message
        result = run_sluice("validate", str(path), env={"PGPASSWORD": password})
        assert result.returncode == 2
        assert "app:***@db1" in result.stderr
        assert password not in result.stderr + result.stdout


def test_a_url_that_is_not_one_is_refused_without_its_password(tmp_path: Path) -> None:
    text = MINIMAL.replace("url: sqlite:///shop.db", "url: postgresql//app:pw-S3cret@db1/shop")
    text += "ledger: mysql:pymysql://root:pw-S3cret@db2/ledger\n"
    message = load_error(write(tmp_path, text))
    assert "sources.orders.url: not a database URL (it starts 'postgresql//app')" in message
    assert "ledger: not a database URL (it starts 'mysql:pymysql')" in message
    assert "pw-S3cret" not in message


def test_secret_keys_are_not_echoed(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "targets:",
        "  events:\n    kind: sqs\n    queue_url: http://127.0.0.1:5055/1/events\n"
        "    secret_access_key: 98765\n    target: lake.events\ntargets:",
    )
    message = load_error(write(tmp_path, text))
    assert "sources.events.secret_access_key: should be a valid string; got ***" in message
    assert "98765" not in message


def test_model_validator_errors_have_key_and_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("key: id", "key: id\n    buffer: {capacity: 10, replenish_below: 10}")
    text += "strategy:\n  prefer:\n    - orders\n    - fair: {orders: 1, ordres: 2}\n"
    path = write(tmp_path, text)
    message = load_error(path)
    assert "sources.orders.buffer: replenish_below (10) must be below capacity (10)" in message
    assert f"({path} line 7)" in message
    # Cross-references are checked once every field is valid on its own.
    fixed = write(tmp_path, text.replace("replenish_below: 10}", "replenish_below: 5}"), "b.yaml")
    message = load_error(fixed)
    assert "strategy.prefer[1].fair.ordres: strategy names source 'ordres', which is not" in message
    assert f"({fixed} line 17)" in message


def test_unknown_kind_and_nested_unknown_key(tmp_path: Path) -> None:
    text = MINIMAL.replace("kind: parquet", "kind: parqet")
    message = load_error(write(tmp_path, text))
    assert "targets.lake.kind: unknown kind 'parqet'; did you mean 'parquet'?" in message
    text = MINIMAL + "strategy:\n  fair:\n    - {node: orders, wieght: 2}\n"
    message = load_error(write(tmp_path, text))
    assert "strategy.fair[0].wieght: unknown key; did you mean 'weight'?" in message


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = write(folder, MINIMAL + "ledger: sqlite:///state/ledger.db\n")
    cfg = load_config(Path("..") / "conf" / path.name, env={})
    orders = cfg.sources["orders"]
    assert orders.kind == "sql" and orders.url == f"sqlite:///{folder / 'shop.db'}"
    assert cfg.ledger == f"sqlite:///{folder / 'state' / 'ledger.db'}"
    lake = cfg.targets["lake"]
    assert lake.kind == "parquet" and lake.path == str(folder / "out")
    assert cfg.work_dir == str(folder / ".sluice")


def test_absolute_and_memory_paths_stay_as_written(tmp_path: Path) -> None:
    text = MINIMAL.replace("sqlite:///shop.db", "sqlite:////data/shop.db").replace(
        "path: ./out", "path: s3a://bucket/lake"
    )
    cfg = load_config(write(tmp_path, text + "ledger: 'sqlite:///:memory:'\n"), env={})
    orders = cfg.sources["orders"]
    assert orders.kind == "sql" and orders.url == "sqlite:////data/shop.db"
    assert cfg.ledger == "sqlite:///:memory:"
    lake = cfg.targets["lake"]
    assert lake.kind == "parquet" and lake.path == "s3a://bucket/lake"


def test_invalid_yaml_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("path: ./out", "path: [./out"))
    message = load_error(path)
    assert message.startswith("invalid YAML: ")
    assert f"({path} line 12, column 6)" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", "the file is empty"), ("- a\n- b\n", "found a list"), ("just text\n", "a single value")],
)
def test_document_must_be_a_mapping(tmp_path: Path, text: str, expected: str) -> None:
    message = load_error(write(tmp_path, text))
    assert expected in message and "sluice.yaml" in message


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    message = load_error(tmp_path / "nope.yaml")
    assert message == f"{tmp_path / 'nope.yaml'}: no such config file"
    result = run_sluice("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "no such config file" in result.stderr


def test_load_config_text_names_its_source() -> None:
    with pytest.raises(ConfigError, match=r"\(inline line 12\)"):
        load_config_text(MINIMAL.replace("max_items: 100", "max_items: -1"), "inline", env={})
    assert isinstance(load_config_text(MINIMAL, env={}), SluiceConfig)


def test_redact_url() -> None:
    assert redact_url("postgresql+psycopg://app:pw@db1/shop") == "postgresql+psycopg://app:***@db1/shop"
    assert redact_url("jdbc:postgresql://app:pw@db1/shop") == "jdbc:postgresql://app:***@db1/shop"
    assert redact_url("postgresql://app:p@ss@db1/shop") == "postgresql://app:***@db1/shop"
    assert redact_url("mysql+pymysql://root@127.0.0.1/legacy") == "mysql+pymysql://root@127.0.0.1/legacy"
    assert redact_url("not a url") == "not a url"


def test_redact_text_and_config_secrets() -> None:
    cfg = load_config_text(
        MINIMAL.replace("sqlite:///shop.db", "postgresql://app:p%40ss@db/shop").replace(
            "targets:",
            "  events:\n    kind: sqs\n    queue_url: http://q\n    access_key_id: AKIAKEY\n"
            "    secret_access_key: topsecret\n    target: lake.events\ntargets:",
        ),
        env={},
    )
    events = cfg.sources["events"]
    assert events.kind == "sqs" and isinstance(events.secret_access_key, SecretStr)
    assert "topsecret" not in repr(cfg)
    secrets = config_secrets(cfg)
    assert set(secrets) == {"p%40ss", "p@ss", "AKIAKEY", "topsecret"}
    line = "connect postgresql://app:p@ss@db/shop with topsecret, key AKIAKEY"
    scrubbed = redact_text(line, secrets)
    assert all(secret not in scrubbed for secret in secrets)
    assert scrubbed == "connect postgresql://app:***@db/shop with ***, key ***"


@pytest.mark.parametrize(
    ("max_items", "deploy", "expected"),
    [
        # Small keyset batches: a job's worth (100,000 rows, 32 batches at most)
        # per import slot and one more in flight, so that they share Spark jobs.
        (10_000, "session", (300_000, 290_000, 96, 310_000)),
        # spark-submit: a batch is a job; every slot busy and one batch waiting.
        (10_000, "submit", (50_000, 40_000, 4, 40_000)),
        # Large batches: the rows bound them; a job's worth of small ones fits in flight.
        (100_000, "session", (300_000, 200_000, 96, 400_000)),
        (1_000, "session", (96_000, 95_000, 96, 97_000)),
    ],
)
def test_sizes_left_out_follow_the_batch_and_the_sink(
    tmp_path: Path, max_items: int, deploy: str, expected: tuple[int, int, int, int]
) -> None:
    text = MINIMAL.replace("max_items: 100,", f"max_items: {max_items},") + (
        f"spark: {{deploy: {deploy}}}\n"
    )
    cfg = load_config(write(tmp_path, text), env={})
    pressure, buffer = cfg.backpressure, cfg.sources["orders"].buffer
    assert (
        pressure.max_pending,
        pressure.resume_below,
        pressure.max_importing_batches,
        buffer.capacity,
    ) == expected
    assert buffer.replenish_below == buffer.capacity - max_items
    # Values given are kept.
    given = text + "backpressure: {max_pending: 7000, max_importing_batches: 2}\n"
    kept = load_config(write(tmp_path, given, "given.yaml"), env={}).backpressure
    resume = max(7000 - max_items, 3500)  # one batch under it, at least half of it
    assert (kept.max_pending, kept.resume_below, kept.max_importing_batches) == (7000, resume, 2)


def test_the_daemon_rides_out_the_configured_ledger_outage(tmp_path: Path) -> None:
    from scheduler.daemon import Daemon
    from sinks.abc import MemorySink

    config = tmp_path / "sluice.yaml"
    config.write_text(
        f"ledger: sqlite:///{tmp_path / 'ledger.db'}\nledger_outage: 90s\n"
        "sources:\n  s: {kind: sql, url: 'sqlite:///s.db', table: t, key: id, target: lake.t}\n"
        "targets:\n  lake: {kind: parquet, path: ./lake}\n"
    )
    daemon = Daemon(load_config(config), config_path=str(config), sink=MemorySink())
    try:
        assert daemon.ledger.patience.grace == 90.0
    finally:
        daemon.close()
    assert SluiceConfig.model_fields["ledger_outage"].default == 600.0  # 10 minutes
