"""Building the SparkSession that runs import jobs.

One place decides every Spark default sluice relies on: the JDBC jars, the
native library path of sqlite-jdbc, UTC everywhere, FAIR pools for concurrent
imports, and loopback networking for local masters. The user's ``spark.conf``
wins over each of these defaults.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from config.errors import ConfigError, SinkUnavailable
from config.models import SparkConfig
from spark_jobs.tasks.children import deafen_spark_jvm

DEBIAN_JARS = (
    Path("/usr/share/java/postgresql.jar"),
    Path("/usr/share/java/mariadb-java-client.jar"),
    Path("/usr/share/java/sqlite-jdbc.jar"),
)
"""The JDBC drivers Debian's packages install; ``jars: auto`` uses those present."""

JNI_DIR = "/usr/lib/x86_64-linux-gnu/jni"
"""Where Debian's sqlite-jdbc keeps its native library (libsqlitejdbc.so)."""

LOG4J = Path(__file__).with_name("log4j2.properties")
"""Errors only from the JVM: Spark's INFO/WARN lines bury sluice's progress."""

_JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
_FILE_LISTS = ("spark.submit.pyFiles", "spark.files", "spark.archives")
_EXECUTOR_PYTHONPATH = "spark.executorEnv.PYTHONPATH"
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class SparkUnavailable(SinkUnavailable):
    """Spark cannot start here (no Java, or the JVM died at start)."""


def jdbc_jars(cfg: SparkConfig) -> list[str]:
    """The JDBC driver jars to put on ``spark.jars``.

    ``auto``: those of :data:`DEBIAN_JARS` that exist. A list: used as given;
    a local path that does not exist is a :class:`ConfigError`.
    """
    if cfg.jars == "auto":
        return [str(jar) for jar in DEBIAN_JARS if jar.exists()]
    missing = [jar for jar in cfg.jars if "://" not in jar and not Path(jar).exists()]
    if missing:
        raise ConfigError(f"spark.jars: {', '.join(missing)} not found (fix the path or use auto)")
    return list(cfg.jars)


def local_cores(master: str) -> int | None:
    """The cores a ``local`` master runs tasks on (``local[*]``: this machine's); None for
    any other master (``local-cluster`` too: its executors are JVMs of their own)."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if found is None:
        return None
    if found.group(1) in (None, ""):
        return 1
    if found.group(1) == "*":
        return os.cpu_count() or 1
    return int(found.group(1))


def is_loopback_master(master: str) -> bool:
    """True for ``local[...]`` masters and cluster masters on this machine's loopback."""
    if master.startswith("local"):
        return True
    host = urlsplit(master.split(",")[0]).hostname
    return host in _LOOPBACK_HOSTS


def session_conf(
    cfg: SparkConfig,
    app_name: str = "sluice",
    py_files: Sequence[str] = (),
    archives: Sequence[str] = (),
) -> dict[str, str]:
    """Every setting :func:`build_session` applies, defaults first, the user's last.

    ``py_files``: zips of sluice's code for the executors (and for a driver
    that is not this process); they go on ``spark.submit.pyFiles`` (the
    driver's Python path) and ``spark.files`` (shipped to every executor).
    ``archives``: ``path#folder`` of Python packages for the executors'
    workers (:func:`sinks.pyfiles.executor_archives`), on ``spark.archives``
    and their ``PYTHONPATH``.
    """
    java_opts = (
        f"-Djava.library.path={JNI_DIR} -Duser.timezone=UTC -Dlog4j2.configurationFile={LOG4J}"
    )
    conf = {
        "spark.app.name": app_name,
        "spark.master": cfg.master,
        "spark.jars": ",".join(jdbc_jars(cfg)),
        # JDBC converts TIMESTAMP values with the JVM's zone: make it agree with
        # the session zone so a timestamp reads and writes back unchanged.
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.session.timeZone": "UTC",
        "spark.scheduler.mode": "FAIR",
        "spark.ui.enabled": "false",
        # Spark's console progress bars would scribble over sluice's own.
        "spark.ui.showConsoleProgress": "false",
        # A batch's rows come to the driver as Arrow, half a batch per task
        # (~12 MB for 100,000 rows). Above 1 MB (the default) each result took
        # a detour through the block manager and its network client: a fifth
        # of the JVM's CPU in a 10 M-row copy. Under the 128 MB RPC limit.
        "spark.task.maxDirectResultSize": "64m",
        # Rows streamed to a Python task (the direct COPY) go in Arrow batches
        # of maxRecordsPerBatch rows; a byte limit too made Spark measure the
        # batch after every row, a tenth of the JVM's CPU in a copy.
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    }
    if cfg.master.startswith("local"):
        # The driver runs the tasks, on sluice's machine, where the JIT's
        # compiler threads take cores from the import: by default they
        # compiled every Spark path a batch touches a few thousand times, the
        # biggest CPU user of the JVM (~40% of it in a 1 M-row copy). Fifteen
        # times the thresholds leaves that code interpreted and still compiles
        # the per-row loops early in a batch: a 10 M-row copy took 10% less
        # time (median 27.7 s against 30.8 s, 3 runs each), 1 M rows the same.
        conf["spark.driver.extraJavaOptions"] += " -XX:CompileThresholdScaling=15"
        # Python workers that a SIGTERM to the whole service does not kill
        # mid-drain (see spark_jobs.tasks.worker_daemon). Only on a local
        # master, whose workers import sluice as the driver does: Spark starts
        # the daemon before any task, so before the code it ships
        # (spark.submit.pyFiles) is on the daemon's path, and on a cluster's
        # executor every Python task failed unless sluice was installed there.
        # A cluster's executors are not in sluice's service to be stopped with it.
        conf["spark.python.daemon.module"] = "spark_jobs.tasks.worker_daemon"
    if is_loopback_master(cfg.master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if is_loopback_master(cfg.master) and "PYSPARK_PYTHON" not in os.environ:
        # Python workers (createDataFrame of keys and payloads) would run the
        # `python3` on PATH, which may not be this virtualenv's interpreter;
        # executors of a cluster on this machine can run this one too.
        conf["spark.pyspark.python"] = sys.executable
    if py_files:
        conf["spark.submit.pyFiles"] = ",".join(py_files)
        conf["spark.files"] = ",".join(py_files)
    if archives:
        conf["spark.archives"] = ",".join(archives)
        # Spark unpacks each into the executor's working directory, where its
        # Python workers start: a relative path finds it on every executor.
        conf[_EXECUTOR_PYTHONPATH] = ":".join(a.rpartition("#")[2] for a in archives)
    for key, value in cfg.conf.items():
        if key in _JAVA_OPTIONS:
            # Keep ours and append the user's: for a repeated -D the JVM takes
            # the last one, so the user still wins, and sqlite-jdbc still loads.
            conf[key] = f"{conf[key]} {value}"
        elif key in _FILE_LISTS and key in conf:
            conf[key] = f"{conf[key]},{value}"  # sluice's code and the user's files
        elif key == _EXECUTOR_PYTHONPATH and key in conf:
            conf[key] = f"{value}:{conf[key]}"  # the user's packages first
        else:
            conf[key] = value
    return conf


def spark_submit_args(
    cfg: SparkConfig,
    app_name: str = "sluice",
    py_files: Sequence[str] = (),
    archives: Sequence[str] = (),
) -> list[str]:
    """``spark-submit`` options applying :func:`session_conf` (put them before the script).

    Under spark-submit the driver JVM starts before any Python runs, so the
    jars and Java options must be on its command line: set later by
    :func:`build_session`, the drivers are not found (ClassNotFoundException).
    ``py_files`` go on ``--py-files``, followed by the user's
    ``spark.submit.pyFiles`` (spark-submit would let the option hide that
    setting). The caller also sets ``SPARK_LOCAL_IP=127.0.0.1`` for a loopback master.
    """
    conf = session_conf(cfg, app_name, archives=archives)
    args = ["--master", conf.pop("spark.master"), "--name", conf.pop("spark.app.name")]
    files = [*py_files, *filter(None, conf.pop("spark.submit.pyFiles", "").split(","))]
    if files:
        args += ["--py-files", ",".join(files)]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def _require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") or (java_home and Path(java_home, "bin", "java").exists()):
        return
    raise SparkUnavailable(
        "Spark needs Java 17: `java` is not on PATH and JAVA_HOME is not set "
        "(install openjdk-17-jre-headless, or point JAVA_HOME at a Java 17)"
    )


def build_session(
    cfg: SparkConfig,
    app_name: str = "sluice",
    py_files: Sequence[str] = (),
    archives: Sequence[str] = (),
) -> SparkSession:
    """Start (or join) the SparkSession the import jobs run on.

    Static settings (jars, Java options, master, ``py_files``) only take
    effect when this call starts the JVM; a session that already exists in
    the process is returned as it is, with its own settings. Under
    ``spark-submit`` the JVM is already running: give it
    :func:`spark_submit_args` on its command line.
    """
    conf = session_conf(cfg, app_name, py_files, archives)
    if is_loopback_master(cfg.master):
        # The JVM otherwise binds to the machine's outward address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The Python workers of this JVM run what PYSPARK_PYTHON names when
        # the context starts (pyspark ignores spark.pyspark.python there):
        # without it, the `python3` on PATH, which may lack sluice's packages.
        if "spark.pyspark.python" in conf:
            os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
    _require_java()
    # A stop signal sent to sluice's whole process group (or cgroup) must
    # not kill the JVM under the batches being drained: sluice stops it.
    deafen_spark_jvm()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except PySparkRuntimeError as error:
        raise SparkUnavailable(
            f"Spark could not start its JVM ({error.getCondition()}); "
            "Spark 4 needs Java 17 or later: check `java -version` and JAVA_HOME"
        ) from error
    session.sparkContext.setLogLevel(conf.get("spark.log.level", "ERROR"))
    return session
