# sluice: make demo | make test | make check | make lint | make bench | make jars | make docs | make docs-shots
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAR_DIR := /usr/share/java
JAR_PKGS := libpostgresql-jdbc-java libmariadb-java libxerial-sqlite-jdbc-java
JARS := $(JAR_DIR)/postgresql.jar $(JAR_DIR)/mariadb-java-client.jar $(JAR_DIR)/sqlite-jdbc.jar
ROWS ?= 100000
export SPARK_LOCAL_IP ?= 127.0.0.1
export AWS_EC2_METADATA_DISABLED ?= true

.PHONY: demo test check lint bench jars java pgloader pgcopydb chromium venv clean docs docs-serve docs-shots

demo: venv jars java
	$(VENV)/bin/sluice demo --rows $(ROWS)

# Two workers, a test module each at a time (its fixtures stay together): the
# tests wait on servers as much as they compute, and each worker has its own
# databases, SparkSession and moto_server. TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= 2
test: venv jars java chromium
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The inner loop: lint and types, then the tests that need neither Spark nor a
# whole run of seconds (pytest -m "not spark and not slow"); make test runs them all.
check: lint
	$(PY) -m pytest -q -m "not spark and not slow" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy scheduler sources sinks config spark_jobs

# The docs site: MkDocs, strict (a broken link, a page left out of the nav, a config key
# or CLI option without words fails), into site/. Pages generated from the code by
# docs/gen/hooks.py; no database, no Spark. tests/test_docs.py runs the same build.
export NO_MKDOCS_2_WARNING := 1
docs: venv
	$(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: venv
	$(VENV)/bin/mkdocs serve

# The docs' pictures under docs/images/, made by docs/gen/shots.py with sluice's own code:
# the status page served from a made-up snapshot and shot by headless Chromium, and
# `sluice status` on a ledger filled through its API, recorded by rich as SVG. They are
# committed: make docs needs no browser. Run it when the page or status changes.
docs-shots: venv chromium
	PYTHONPATH=. $(PY) docs/gen/shots.py

bench: venv jars java pgloader pgcopydb
	$(PY) benchmarks/run.py $(BENCH)

venv: $(STAMP)

# Reinstall when the project's dependencies change; reuse the venv otherwise.
$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# Spark's JDBC drivers come from Debian's packages.
jars:
	@missing=0; for jar in $(JARS); do [ -e $$jar ] || missing=1; done; \
	if [ $$missing = 1 ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing JDBC jars: $(JAR_PKGS)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(JAR_PKGS) >/dev/null; \
	  elif command -v sudo >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(JAR_PKGS) >/dev/null; \
	  else \
	    echo "error: JDBC jars missing under $(JAR_DIR); install the Debian packages: $(JAR_PKGS)" >&2; exit 1; \
	  fi; \
	fi

# The peers benchmark runs pgloader from Debian's package, installed as the jars are.
pgloader:
	@command -v pgloader >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "error: pgloader missing; install the Debian package pgloader" >&2; exit 1; fi; \
	  echo "installing pgloader"; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgloader >/dev/null; \
	}

# The takeover benchmark runs pgcopydb from Debian's package, installed as pgloader is.
pgcopydb:
	@command -v pgcopydb >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "error: pgcopydb missing; install the Debian package pgcopydb" >&2; exit 1; fi; \
	  echo "installing pgcopydb"; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgcopydb >/dev/null; \
	}

# The status page's test opens it in headless Chromium, Debian's package, installed as the jars are.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "error: chromium missing; install the Debian package chromium" >&2; exit 1; fi; \
	  echo "installing chromium"; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	}

java:
	@command -v java >/dev/null || { echo "error: Java 17 is required by Spark and was not found (install openjdk-17-jre-headless)" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "error: Java 17 or newer is required by Spark (found: $${v:-unknown})" >&2; exit 1; fi

clean:
	rm -rf .sluice .pytest_cache .mypy_cache .ruff_cache spark-warehouse site

# The long exactly-once scenarios (tests/test_exactly_once.py with CHAOS=long:
# 200,000 / 50,000 / 1,000 rows, ten random kills, each crash point, hot-hot,
# outages, a dead batch, the ledger cut under two daemons, hot rows of an
# incremental source changing during the run) and their table.
# CHAOS_SEED=n replays a run's kills.
.PHONY: chaos
chaos: venv jars java
	CHAOS=long $(PY) -m pytest tests/test_exactly_once.py tests/test_stream_chaos.py -p tests.chaos.report -rxX

# The whole type matrix (tests/test_type_matrix.py): make test's pairs and those
# it leaves out (MariaDB into SQLite and Parquet), each printing its table.
.PHONY: matrix
matrix: venv jars java
	MATRIX=1 $(PY) -m pytest -s tests/test_type_matrix.py

# /record's latency with KEYS keys migrated (default 10 M) in a SQLite and a
# PostgreSQL ledger, while another thread claims (benchmarks/bench_record.py).
KEYS ?= 10000000
.PHONY: bench-record
bench-record: venv
	PYTHONPATH=. $(PY) benchmarks/bench_record.py --keys $(KEYS)
