"""Where is this record? The batch that holds a key, its state, and the target's commit.

One answer for ``sluice where`` (:mod:`scheduler.commands.where`) and the
daemon's ``/record`` (:class:`RecordRoute`): the batch that holds the key (by
range for a keyset source, by key otherwise), its state, attempts, owner,
last error and when it was done, and whether the target's ``_sluice_commits``
has that batch's commit. A key no batch holds is *not seen*, which is an
answer, not an error. Bad input (an unknown source, a wrong number of key
values, a value that is not of its column's type) is a :class:`ConfigError`
naming what and where.

Reads only: the ledger (through :class:`~scheduler.ledger.LedgerReads`), the
source database (its key's column types once; text keys' comparisons in its
collation; a sweep key's row when the typed value is not in the ledger) and
the target (the commit of the one batch found).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa

from config.errors import ConfigError, SluiceError, SourceError
from config.models import JdbcTargetConfig, SluiceConfig, SqlSourceConfig, SqsSourceConfig
from config.secrets import config_secrets, redact_text
from scheduler.ledger import LedgerReads, encode_key
from scheduler.ledger.lookup import HeldBy, reader_engine
from scheduler.observe.http import Query, json_route
from scheduler.observe.record_keys import SqlKey, sqs_keys
from spark_jobs.engines import url_traits

EngineFor = Callable[[str, SqlSourceConfig], sa.Engine | None]
"""The engine to read a SQL source's database with (None: its SQLite file does not exist)."""


@dataclass(frozen=True)
class TargetCommit:
    """What the target says of a batch: committed (with its token and rows), or not;
    ``committed`` None when the target could not be read (``error`` says why)."""

    target: str
    committed: bool | None
    token: int | None = None
    rows: int | None = None
    rejected: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class RecordAnswer:
    """Where a record stands. ``batch`` is None when no batch holds its key (not seen);
    ``earlier``: older versions of an incremental source's key, in other batches."""

    source: str
    key: list[Any]
    seen: bool
    note: str
    batch: dict[str, Any] | None = None
    target: TargetCommit | None = None
    earlier: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``sluice where --json``, ``/record``)."""
        return json.loads(json.dumps(asdict(self), default=str))


class RecordFinder:
    """Finds where records are, for one config (a callable: the daemon's may be reloaded).

    Thread-safe. Each :meth:`find` blocks on the ledger, the source database
    and the target; errors reading them are :class:`SluiceError` (a
    :class:`SourceError` for the source, the database's own error for the
    ledger). :meth:`close` releases the source engines it made.
    """

    def __init__(
        self, cfg: SluiceConfig | Callable[[], SluiceConfig], reads: LedgerReads,
        engine_for: EngineFor,
    ) -> None:  # fmt: skip
        self._cfg = cfg if callable(cfg) else (lambda: cfg)
        self.reads = reads
        self._engine_for = engine_for
        self._lock = threading.Lock()
        self._keys: dict[str, SqlKey] = {}

    def typed_key(self, source: str, key: Sequence[str]) -> list[Any]:
        """The key as it is looked up (JSON-ready): checks the input without the ledger."""
        src = self._source(self._cfg(), source)
        if isinstance(src, SqsSourceConfig):
            return sqs_keys(source, key)[0]
        return json.loads(encode_key(self._sql_key(source, src).parse(key)))

    def find(self, source: str, key: Sequence[str]) -> RecordAnswer:
        """Where the record of ``source`` with ``key`` (its text, one per key column) is."""
        cfg = self._cfg()
        src = self._source(cfg, source)
        if isinstance(src, SqsSourceConfig):
            shown, held = self._by_keys(source, sqs_keys(source, key))
        else:
            sql_key = self._sql_key(source, src)
            values = sql_key.parse(key)
            if src.mode == "keyset":
                with sql_key.at_or_below(values) as order:
                    found = self.reads.covering_range(source, order)
                shown, held = values, [found] if found else []
            else:
                shown, held = self._by_keys(source, [values])
                if not held and (stored := sql_key.stored(values)) is not None:
                    shown, held = self._by_keys(source, [stored, values])
        typed = json.loads(encode_key(shown))
        if not held:
            return RecordAnswer(source, typed, False, self._unseen(source, src))
        secrets = config_secrets(cfg)
        newest, *older = held
        batch = _batch(newest, secrets)
        earlier = [{"id": b.id, "state": b.state, "version": b.version} for b in older]
        return RecordAnswer(source, typed, True, _note(newest), batch,
                            _commit(cfg, newest, secrets), earlier)  # fmt: skip

    def close(self) -> None:
        """Dispose of the source engines this finder opened."""
        with self._lock:
            keys, self._keys = list(self._keys.values()), {}
        for sql_key in keys:
            sql_key.engine.dispose()

    def _source(self, cfg: SluiceConfig, name: str) -> SqlSourceConfig | SqsSourceConfig:
        src = cfg.sources.get(name)
        if src is None:
            raise ConfigError(f"no source {name!r} in the config "
                              f"(sources: {', '.join(cfg.sources)})")  # fmt: skip
        return src

    def _by_keys(self, source: str, keys: list[list[Any]]) -> tuple[list[Any], list[HeldBy]]:
        """The first of ``keys`` some batch holds, with its batches; else the first key."""
        for key in keys:
            held = self.reads.holding_keys(source, [encode_key(key)])
            if held:
                return key, held
        return keys[0], []

    def _sql_key(self, name: str, src: SqlSourceConfig) -> SqlKey:
        with self._lock:
            known = self._keys.get(name)
        if known is not None and known.cfg == src:
            return known
        # Read outside the lock (it waits on the source); two first requests may
        # both read, and the later one keeps the other's.
        engine = self._engine_for(name, src)
        if engine is None:
            raise SourceError(
                f"source {name}: database file {sa.make_url(src.url).database} does not exist"
            )
        try:
            sql_key = SqlKey(name, src, engine)  # the types, read once per source
        except BaseException:
            engine.dispose()
            raise
        stale: SqlKey | None
        with self._lock:
            kept = self._keys.get(name)
            if kept is not None and kept.cfg == src:
                stale, sql_key = sql_key, kept
            else:  # new, or the source changed (a reload): its types read again
                stale, self._keys[name] = kept, sql_key
        if stale is not None:
            stale.engine.dispose()
        return sql_key

    def _unseen(self, name: str, src: SqlSourceConfig | SqsSourceConfig) -> str:
        if isinstance(src, SqlSourceConfig) and src.mode == "keyset":
            recorded = self.reads.recorded_sources().get(name)
            mark = None if recorded is None else recorded.high_water
            if mark is None:
                return f"not seen: no range of {name} is claimed yet"
            return f"not seen: past every range of {name} claimed so far (up to {mark})"
        return f"not seen: no batch of {name} holds this key"


def _batch(held: HeldBy, secrets: list[str]) -> dict[str, Any]:
    values = asdict(held)
    if held.error is not None:
        values["error"] = redact_text(held.error, secrets)
    values["done_at"] = held.updated_at if held.state == "done" else None
    if held.kind != "range":
        del values["lo"], values["hi"]
    return values


def _note(held: HeldBy) -> str:
    after = "the start" if held.lo is None else held.lo
    where = f"range ({after}, {held.hi}]" if held.kind == "range" else f"{held.kind} batch"
    return f"held by batch {held.id} ({where}), {held.state}"


def _commit(cfg: SluiceConfig, held: HeldBy, secrets: list[str]) -> TargetCommit:
    """The batch's commit as its target records it (read, never written)."""
    # Spark's modules load only when a record was found: an answer of not seen needs none.
    from spark_jobs.common.manifest import BatchKind, Manifest
    from spark_jobs.jobs.import_job import target_table
    from spark_jobs.load.write import committed_batch

    kind = cast(BatchKind, held.kind)
    manifest = Manifest(
        batch_id=held.id, source=held.source, target=held.target, kind=kind, items=held.items
    )
    try:
        target = target_table(cfg, manifest)
        label = target.label
        if _missing_sqlite_file(target.config):
            return TargetCommit(label, False)  # nothing written yet; never create the file
        commit = committed_batch(target, held.id)
    except Exception as error:  # a target that cannot be read is part of the answer
        cause = str(getattr(error, "orig", None) or error).strip().splitlines() or ["?"]
        return TargetCommit(held.target, None, error=redact_text(cause[0], secrets))
    if commit is None:
        return TargetCommit(label, False)
    return TargetCommit(label, True, commit.token, commit.rows, commit.rejected)


def _missing_sqlite_file(target: Any) -> bool:
    if not isinstance(target, JdbcTargetConfig):
        return False
    url = sa.make_url(target.url)
    return url_traits(url).file_database and not Path(url.database or "").exists()


class RecordRoute:
    """``/record?source=S&key=K`` (``key=`` once per key column): :meth:`RecordFinder.find`
    as JSON, 400 with the error for bad input, 503 when the ledger, source or
    target cannot be read.

    A WSGI app for :func:`scheduler.observe.metrics.start_metrics`'s routes.
    It runs on the HTTP server's threads and reads the ledger with an engine
    of its own (a few connections), made at the first request; the endpoint
    closes it when it stops.
    """

    def __init__(self, cfg: Callable[[], SluiceConfig], *, connections: int = 2) -> None:
        self._cfg = cfg
        self._connections = connections
        self._lock = threading.Lock()
        self._finder: RecordFinder | None = None
        self._app = json_route(self.answer)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self._app(environ, start_response)

    def answer(self, query: Query) -> tuple[int, Any]:
        """The HTTP status and the JSON body for a request's query."""
        unknown = sorted(set(query) - {"source", "key"})
        sources, key = query.get("source", []), query.get("key", [])
        if unknown:
            return 400, {
                "error": f"unknown parameter(s) {', '.join(unknown)}: "
                "/record takes source= once and key= once per key column"
            }
        if len(sources) != 1 or not key:
            return 400, {
                "error": "/record needs source= once and key= once per key column "
                "(in key order), e.g. /record?source=orders&key=42"
            }
        try:
            found = self._found().find(sources[0], key)
        except ConfigError as error:
            return 400, {"error": str(error)}
        except (SluiceError, sa.exc.SQLAlchemyError) as error:
            cause = str(getattr(error, "orig", None) or error).strip().splitlines() or ["?"]
            secrets = config_secrets(self._cfg())
            return 503, {"error": redact_text(cause[0], secrets)}
        return 200, found.to_json()

    def close(self) -> None:
        """Release the ledger and source connections (the endpoint calls it when it stops)."""
        with self._lock:
            finder, self._finder = self._finder, None
        if finder is not None:
            finder.close()
            finder.reads.engine.dispose()

    def _found(self) -> RecordFinder:
        with self._lock:
            if self._finder is None:
                cfg = self._cfg()
                reads = LedgerReads(reader_engine(cfg.ledger, self._connections))
                self._finder = RecordFinder(self._cfg, reads, _source_engine)
            return self._finder


def _source_engine(_name: str, src: SqlSourceConfig) -> sa.Engine:
    """One connection at most to a source database (its types, text keys' comparisons)."""
    url = sa.make_url(src.url)
    if url_traits(url).file_database:  # no pool to bound: a file opened per connection
        return sa.create_engine(url)
    return sa.create_engine(url, pool_size=1, max_overflow=0, pool_pre_ping=True)
