"""``sluice where CONFIG --source S --key K``: where one record is, read-only.

The answer is :class:`~scheduler.observe.record.RecordFinder`'s, the same
the daemon's ``/record`` gives: the batch that holds the key, its state,
attempts, owner, last error, when it was done, and whether the target's
``_sluice_commits`` has its commit. Nothing is written: the ledger and the
source are read through read-only engines (as ``status`` and ``plan`` read
them), a ledger of an older schema as it is.

The typer command is defined here and registered by :mod:`scheduler.cli`
with the CLI's error path (``where_command(_fail)``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from config.errors import ConfigError, LedgerError, SluiceError

if TYPE_CHECKING:
    from scheduler.observe.record import RecordAnswer

ConfigPath = Annotated[Path, typer.Argument(help="The YAML config file.", show_default=False)]
SourceName = Annotated[
    str, typer.Option("--source", "-s", help="The record's source.", show_default=False)
]
KeyValues = Annotated[
    list[str],
    typer.Option("--key", "-k", show_default=False,
                 help="The record's key: once per key column, in key order (SQS: the key "
                      "field's value; quote it as JSON, '\"42\"', to mean text only)."),
]  # fmt: skip
AsJson = Annotated[bool, typer.Option("--json", help="One JSON document (as /record answers).")]


def where_command(fail: Callable[[SluiceError], NoReturn]) -> Callable[..., None]:
    """The ``where`` command, reporting errors through the CLI's ``fail``."""

    def where(config: ConfigPath, source: SourceName, key: KeyValues, as_json: AsJson = False
              ) -> None:  # fmt: skip
        """Where one record is: the batch that holds its key (by range for keyset
        sources), its state, attempts, owner, last error, when it was done, and
        whether the target's _sluice_commits has its commit.

        Exit 0 when the ledger answered, also for a key no batch holds ("not
        seen"; --json: "seen": false); 1 when the ledger, the source or the
        target cannot be read; 2 for a bad config or bad input (an unknown
        source, a wrong number of --key values, a value not of its column's type).
        """
        try:
            answer = find_record(config, source, key)
        except SluiceError as error:
            fail(error)
        typer.echo(json.dumps(answer.to_json(), indent=2) if as_json else render(answer))

    return where


def find_record(config: Path, source: str, key: Sequence[str]) -> RecordAnswer:
    """Load ``config`` and find the record; raises :class:`SluiceError` (bad input: ConfigError)."""
    import sqlalchemy as sa

    from config.loader import load_config
    from config.secrets import config_secrets, redact_text, redact_url
    from scheduler.ledger import LedgerReads
    from scheduler.observe.record import RecordAnswer, RecordFinder
    from scheduler.readonly import readonly_engine

    cfg = load_config(config)
    if source not in cfg.sources:
        raise ConfigError(f"{config}: no source {source!r} (sources: {', '.join(cfg.sources)})")
    # Read-only: never creates, changes or upgrades a ledger, even one a daemon is using.
    engine = readonly_engine(cfg.ledger) or sa.create_engine("sqlite://")  # none: an empty one
    finder = RecordFinder(cfg, LedgerReads(engine), lambda _name, src: readonly_engine(src.url))
    try:
        if not finder.reads.has_tables():
            typed = finder.typed_key(source, key)  # bad input is an error all the same
            return RecordAnswer(source, typed, False, "not seen: nothing ran yet (no ledger "
                                f"at {redact_url(cfg.ledger)})")  # fmt: skip
        return finder.find(source, key)
    except sa.exc.SQLAlchemyError as error:
        cause = str(getattr(error, "orig", None) or error).strip().splitlines() or ["?"]
        raise LedgerError(
            f"cannot read the ledger {redact_url(cfg.ledger)}: "
            f"{redact_text(cause[0], config_secrets(cfg))}"
        ) from error
    finally:
        finder.close()
        engine.dispose()


def render(answer: RecordAnswer) -> str:
    """The answer as text: a headline, then the batch's facts one per line."""
    head = f"{answer.source} key {answer.key}: {answer.note}"
    batch = answer.batch
    if batch is None:
        return head
    lines = [
        head,
        f"  state     {batch['state']}"
        + (f" (done at {_when(batch['done_at'])})" if batch["done_at"] else ""),
    ]
    lines.append(f"  attempts  {batch['attempts']} (fencing token {batch['token']})")
    if batch["state"] in ("claimed", "importing"):
        lines.append(f"  owner     {batch['owner']} (lease until {_when(batch['lease_until'])})")
    else:
        lines.append(f"  owner     {batch['owner'] or '-'}")
    if batch["state"] == "failed" and batch["not_before"]:
        lines.append(f"  retry     not before {_when(batch['not_before'])}")
    lines.append(f"  error     {batch['error'] or '-'}")
    if batch["state"] == "done":
        lines.append(f"  rows      {batch['rows']} written, {batch['rejected'] or 0} rejected")
    lines.append(f"  target    {_commit(answer)}")
    lines.extend(f"  earlier   batch {e['id']} (version {e['version']}), {e['state']}"
                 for e in answer.earlier)  # fmt: skip
    return "\n".join(lines)


def _commit(answer: RecordAnswer) -> str:
    commit = answer.target
    if commit is None:
        return "-"
    if commit.committed is None:
        return f"{commit.target}: cannot tell ({commit.error})"
    if not commit.committed:
        return f"{commit.target}: no commit of this batch in _sluice_commits"
    return (
        f"{commit.target}: committed in _sluice_commits (token {commit.token}, {commit.rows} rows)"
    )


def _when(stamp: Any) -> str:
    if stamp is None:
        return "-"
    return dt.datetime.fromtimestamp(float(stamp), dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
