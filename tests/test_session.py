"""The import job's pieces that need no database: JDBC endpoints, names, Spark settings."""

from __future__ import annotations

from typing import Any

import pytest

from config.models import SparkConfig
from spark_jobs.common.jdbc import JdbcEndpoint
from spark_jobs.load.staging import staging_table_name
from spark_jobs.load.write_parquet import BatchFiles
from spark_jobs.tasks.session import (
    DEBIAN_JARS,
    SparkUnavailable,
    build_session,
    jdbc_jars,
    session_conf,
    spark_submit_args,
)


def test_jdbc_endpoints_from_sqlalchemy_urls() -> None:
    pg = JdbcEndpoint.from_url("postgresql+psycopg://app:s3cret@db1:6432/shop?sslmode=require")
    assert (pg.url, pg.driver) == ("jdbc:postgresql://db1:6432/shop", "org.postgresql.Driver")
    assert dict(pg.properties) == {"user": "app", "password": "s3cret", "sslmode": "require"}
    assert "s3cret" not in repr(pg) and "s3cret" not in pg.url and "***" in repr(pg)

    maria = JdbcEndpoint.from_url("mariadb+pymysql://root@127.0.0.1/legacy")
    assert (maria.url, maria.driver, dict(maria.properties)) == (
        "jdbc:mysql://127.0.0.1:3306/legacy?tinyInt1isBit=false",
        "org.mariadb.jdbc.Driver",
        {"user": "root"},
    )
    mysql = JdbcEndpoint.from_url("mysql+pymysql://u:p@h/d")
    assert (mysql.url, mysql.properties["password"]) == (
        "jdbc:mysql://h:3306/d?tinyInt1isBit=false",
        "p",
    )

    lite = JdbcEndpoint.from_url("sqlite:////tmp/x/a.db")
    assert (lite.url, lite.driver, dict(lite.properties)) == (
        "jdbc:sqlite:/tmp/x/a.db",
        "org.sqlite.JDBC",
        {},
    )
    with pytest.raises(ValueError, match="not supported"):
        JdbcEndpoint.from_url("oracle://u@h/d")


def test_batch_names_are_safe_and_distinct() -> None:
    batches = ("orders-1", "Orders-1", "orders_1", "x" * 200)
    names = {staging_table_name(b, 7, "a1b2c3") for b in batches}
    assert len(names) == 4
    assert all(n.startswith("_sluice_stage_") and len(n) <= 58 and n.islower() for n in names)
    # Every attempt stages apart, even two with the same token.
    assert staging_table_name("orders-1", 7) != staging_table_name("orders-1", 7)
    files = BatchFiles.of("/lake", "sales", "orders", "a/b=c")
    assert files.final == "/lake/sales/orders/batch-a_2fb_3dc.parquet"
    stage = files.stage(3)
    assert stage.rsplit("/", 1)[1].startswith("_") and "=" not in files.final
    assert files.stale_stage(stage, 4) and not files.stale_stage(stage, 3)
    assert stage != files.stage(3)
    assert not BatchFiles.of("/lake", "sales", "orders", "a").stale_stage(stage, 4)


def test_session_conf_defaults_and_user_overrides() -> None:
    conf = session_conf(
        SparkConfig(conf={"spark.ui.enabled": "true", "spark.driver.extraJavaOptions": "-Xss4m"})
    )
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.sql.session.timeZone"] == "UTC" and conf["spark.scheduler.mode"] == "FAIR"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.driver.extraJavaOptions"].endswith("-Xss4m")
    assert (
        "-Djava.library.path=/usr/lib/x86_64-linux-gnu/jni" in conf["spark.driver.extraJavaOptions"]
    )
    assert jdbc_jars(SparkConfig()) == [str(j) for j in DEBIAN_JARS if j.exists()]
    remote = session_conf(SparkConfig(master="spark://10.0.0.5:7077"))
    assert "spark.driver.host" not in remote and "spark.pyspark.python" not in remote
    # The JIT's thresholds: only where the driver runs the tasks, and the user's flag last.
    jit = "-XX:CompileThresholdScaling=15"
    assert jit in conf["spark.driver.extraJavaOptions"].split()
    assert jit not in remote["spark.driver.extraJavaOptions"].split()
    assert jit not in conf["spark.executor.extraJavaOptions"].split()
    theirs = "-XX:CompileThresholdScaling=1"
    mine = session_conf(SparkConfig(conf={"spark.driver.extraJavaOptions": theirs}))
    assert mine["spark.driver.extraJavaOptions"].split()[-2:] == [jit, theirs]
    args = spark_submit_args(SparkConfig(master="local[1]", conf={"spark.x": "1"}), "job")
    assert args[:4] == ["--master", "local[1]", "--name", "job"]
    assert "spark.jars=" + ",".join(jdbc_jars(SparkConfig())) in args
    assert args[-2:] == ["--conf", "spark.x=1"]  # the user's settings come last


def test_only_a_local_master_runs_the_worker_daemon_of_sluice() -> None:
    """Spark starts the Python worker daemon before any task, so before the code it ships
    is on the daemon's path: a cluster's executor without sluice installed could not
    import sluice's daemon and failed every Python task. PySpark's own daemon runs there;
    sluice's only on a local master, whose workers import sluice as the driver does."""
    daemon = "spark.python.daemon.module"
    assert session_conf(SparkConfig(master="local[2]"))[daemon] == (
        "spark_jobs.tasks.worker_daemon")  # fmt: skip
    for master in ("spark://127.0.0.1:7077", "spark://10.0.0.5:7077", "yarn"):
        cluster = SparkConfig(master=master)
        assert daemon not in session_conf(cluster), master
        assert not [a for a in spark_submit_args(cluster) if a.startswith(f"{daemon}=")], master


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("spark_jobs.tasks.session.shutil.which", lambda _name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkUnavailable, match="Java 17"):
        build_session(SparkConfig())


@pytest.mark.spark
def test_session_is_utc_fair_and_on_loopback(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.scheduler.mode") == "FAIR"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"


def test_stopping_a_session_does_not_wait_for_the_accumulator_server() -> None:
    import threading

    from sinks.spark import _stop_session

    release, shut = threading.Event(), threading.Event()

    class SlowServer:  # PySpark's waits for its poll loop: ~1 s
        def shutdown(self) -> None:
            release.wait(30)
            shut.set()

    class Context:
        _accumulatorServer: Any = SlowServer()

    class Session:
        sparkContext = Context()
        stopped_with_server: Any = "not stopped"

        def stop(self) -> None:  # PySpark's stop() shuts the server it still finds
            self.stopped_with_server = self.sparkContext._accumulatorServer

    session = Session()
    _stop_session(session)  # type: ignore[arg-type]
    assert session.stopped_with_server is None  # the JVM's side stopped, the server left out
    assert not shut.is_set()  # returned while the server was still shutting down
    release.set()
    assert shut.wait(30)  # and it did shut down, on its own thread
