"""The live status page (``/``) and its data (``/status.json``), beside ``/metrics``.

Both render the latest :class:`~scheduler.observe.snapshot.StatusSnapshot`
(the HTTP threads never read the loop or the ledger themselves). The page is
one template (``status_page.html``, shipped with the package) filled in by
the server: no build step, no CDN, inline CSS, an inline SVG chart per
source, and a few lines of JS that fetch the page again every 2 s and swap
its numbers in. Every text from the config or a database (source names,
errors) is escaped. Numbers carry ``data-field`` and ``data-value`` (the
raw value) so that a script, or a test, can read them. Change streams
(``mode: stream``) have a table of their own: lag, changes/s, changes
waiting, the WAL their slot keeps (and the warning when it is over
``max_retained_wal``), slot and publication.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from string import Template
from typing import Any

from scheduler.observe.eta import format_eta
from scheduler.observe.http import StartResponse, WsgiApp, json_response, json_route
from scheduler.observe.snapshot import (
    DaemonView,
    DeadView,
    GateView,
    LimitsView,
    SourceView,
    StatusBoard,
    StatusSnapshot,
)
from scheduler.observe.streams import StreamView, human_bytes


def status_routes(board: StatusBoard) -> dict[str, WsgiApp]:
    """``/`` and ``/status.json``, for :func:`scheduler.observe.metrics.start_metrics`."""

    def as_json(_query: Any) -> tuple[int, Any]:
        snapshot = board.latest()
        if snapshot is None:
            return 503, {"error": "no status yet: the daemon is starting"}
        return 200, snapshot.to_json()

    return {"/": PageRoute(board), "/status.json": json_route(as_json)}


class PageRoute:
    """``/``: the status page, rendered from the latest snapshot."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return json_response(start_response, 405, {"error": "only GET is served"})
        snapshot = self.board.latest()
        if snapshot is None:
            return json_response(start_response, 503, {"error": "no status yet"})
        body = render(snapshot).encode()
        start_response("200 OK", [
            ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ])  # fmt: skip
        return [body]


@cache
def _template() -> Template:
    return Template(files("scheduler.observe").joinpath("status_page.html").read_text("utf-8"))


def render(snapshot: StatusSnapshot) -> str:
    """The whole page for ``snapshot``."""
    streams = {view.source: view for view in snapshot.streams}
    content = "\n".join([
        _header(snapshot, streams), _sources(snapshot.sources, streams),
        _streams(snapshot.streams), _gate(snapshot.gate), _dead(snapshot.dead),
        _daemons(snapshot.daemons),
    ])  # fmt: skip
    return _template().substitute(owner=_e(snapshot.owner), at=f"{snapshot.at:.3f}",
                                  content=content)  # fmt: skip


# -- the parts -----------------------------------------------------------------------------


def _header(s: StatusSnapshot, streams: dict[str, StreamView]) -> str:
    t = s.totals
    # Streams have no end: with every other source done and every stream caught up, the
    # run is caught up (not done).
    caught_up = bool(streams) and all(
        src.done or (src.name in streams and streams[src.name].caught_up) for src in s.sources)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s.at))
    ledger = "" if s.ledger_error is None else (
        f'<p class="error" id="ledger-error">the ledger cannot be read ({_e(s.ledger_error)}); '
        f"its figures are {_n(s.ledger_read_s_ago or 0, '.0f')} s old</p>")  # fmt: skip
    cards = [
        _card("rows done", "rows_done", t.rows_done, _n(t.rows_done)),
        _card("rows left", "left", t.left, "?" if t.left is None else _n(t.left)),
        _card("rows/s", "rows_per_s", t.rows_per_s, _n(t.rows_per_s, ",.0f")),
        _card("ETA", "eta_s", t.eta_s, format_eta(t.eta_s, t.done, caught_up)),
    ]
    return (
        f'<header><h1>sluice</h1><span class="muted">daemon {_e(s.owner)} · updated {stamp}'
        f" · running {format_eta(s.run_s)}</span></header>\n"
        f'<div class="cards" id="totals" data-done="{int(t.done)}">{"".join(cards)}</div>{ledger}'
    )


def _card(label: str, name: str, value: float | None, text: str) -> str:
    return (f'<div class="card">{label}<b data-field="{name}" data-value="{_raw(value)}">'
            f"{text}</b></div>")  # fmt: skip


def _sources(sources: Iterable[SourceView], streams: dict[str, StreamView]) -> str:
    head = "".join(f"<th>{h}</th>" for h in (
        "source", "state", "progress", "done", "left", "rows/s", "last minute", "ETA",
        "buffer", "batch size", "limits in force",
    ))  # fmt: skip
    rows = "\n".join(_source(src, streams.get(src.name)) for src in sources)
    return (
        f'<h2>Sources</h2><div class="scroll"><table id="sources"><tr>{head}</tr>\n'
        f"{rows}</table></div>"
    )


def _source(src: SourceView, stream: StreamView | None) -> str:
    pct = None if src.progress is None else 100 * src.progress
    state = _state(src, stream)
    caught_up = stream is not None and stream.caught_up
    progress = (
        f'<span class="bar"><span style="width:{pct or 0:.1f}%"></span></span>'
        f'<span class="pct" data-field="progress" data-value="{_raw(src.progress)}">'
        f"{'?' if pct is None else f'{pct:.1f}%'}</span>"
    )
    buffer = (f'<meter value="{src.buffered}" max="{max(1, src.capacity)}"></meter> '
              f'<span data-field="buffered" data-value="{src.buffered}">{_n(src.buffered)}</span>'
              f" / {_n(src.capacity)}")  # fmt: skip
    cells = [
        f'<td><b>{_e(src.name)}</b><br><span class="muted">{_e(src.kind)} → '
        f"{_e(src.target)}{_waits(src)}</span></td>",
        f'<td><span class="badge {state}" data-field="state">{state.replace("-", " ")}</span></td>',
        f"<td>{progress}</td>",
        _num("rows_done", src.rows_done, _n(src.rows_done)),
        _num("left", src.left, "?" if src.left is None else _n(src.left)),
        _num(
            "rows_per_s",
            src.rows_per_s,
            "?" if src.rows_per_s is None else _n(src.rows_per_s, ",.0f"),
        ),
        f"<td>{_chart(src.chart)}</td>",
        _num("eta_s", src.eta_s, format_eta(src.eta_s, src.done, caught_up)),
        f"<td>{buffer}</td>",
        _num("batch_size", src.batch_size, _n(src.batch_size)),
        f'<td data-field="limits">{_limits(src.limits)}</td>',
    ]
    error = (
        ""
        if src.refill_error is None
        else (
            f'<tr><td></td><td colspan="10" class="message error">{_failing(src)}'
            f"{_e(src.refill_error)}</td></tr>"
        )
    )
    return (f'<tr id="source-{_e(src.name)}" data-source="{_e(src.name)}" '
            f'class="{state}">{"".join(cells)}</tr>{error}')  # fmt: skip


def _state(src: SourceView, stream: StreamView | None = None) -> str:
    if src.done:
        return "done"
    if src.failed:
        return "failed"
    if stream is not None:  # a change stream has no end: it follows the source
        return "caught-up" if stream.caught_up else "lagging" if stream.loaded else "loading"
    if src.waiting_for:
        return "waiting"
    if src.at_limit:
        return "limited"
    return "drained" if src.exhausted else "running"


def _waits(src: SourceView) -> str:
    if not src.waiting_for:
        return ""
    return f'<br><span data-field="waiting_for">after {_e(", ".join(src.waiting_for))}</span>'


def _failing(src: SourceView) -> str:
    """How long its refills have failed: its database unreachable since then."""
    if src.failing_s is None:
        return "refills: "
    return f"unreachable for {format_eta(src.failing_s)}: "


def _limits(limits: LimitsView | None) -> str:
    if limits is None:
        return '<span class="muted">none (not a SQL source)</span>'
    parts = []
    if limits.rows_per_s_in_force is None:
        parts.append("no rate limit")
    else:
        of = "" if limits.max_rows_per_s in (None, limits.rows_per_s_in_force) else (
            f" of {_n(limits.max_rows_per_s or 0, ',.0f')}")  # fmt: skip
        parts.append(f'<span data-field="rows_per_s_limit" data-value="'
                     f'{_raw(limits.rows_per_s_in_force)}">{_n(limits.rows_per_s_in_force, ",.0f")}'
                     f"</span> rows/s{of}")  # fmt: skip
    if limits.factor < 1:
        parts.append(f"slow queries: ×{limits.factor:.2f}")
    if limits.connections_in_force is not None:
        parts.append(f'<span data-field="connections_limit" data-value="'
                     f'{limits.connections_in_force}">{limits.connections_held} of '
                     f"{limits.connections_in_force}</span> connections")  # fmt: skip
    return "<br>".join(parts)


def _chart(points: tuple[float, ...], width: int = 100, height: int = 26) -> str:
    """An inline SVG line of ``points`` (rows/s), scaled to its highest."""
    if len(points) < 2:
        return ""
    top = max(points) or 1.0
    step = width / (len(points) - 1)
    line = " ".join(f"{i * step:.1f},{height - 1 - (height - 2) * p / top:.1f}"
                    for i, p in enumerate(points))  # fmt: skip
    return (f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f"<title>rows/s over the last minute (highest {top:,.0f})</title>"
            f'<polyline points="{line}"/></svg>')  # fmt: skip


def _streams(streams: Iterable[StreamView]) -> str:
    """The change streams: a row each, its WAL warning and its error under it."""
    rows = []
    for v in streams:
        state = "caught-up" if v.caught_up else "lagging" if v.loaded else "loading"
        lag = "caught up" if v.caught_up else "?" if v.lag_s is None else f"{v.lag_s:,.0f} s"
        rate = "?" if v.changes_per_s is None else _n(v.changes_per_s, ",.1f")
        wal = "?" if v.retained_bytes is None else human_bytes(v.retained_bytes)
        of = f" of {human_bytes(v.max_retained_wal)}" if v.max_retained_wal else ""
        cells = [
            f"<td><b>{_e(v.source)}</b></td>",
            f'<td><span class="badge {state}" data-field="stream_state">'
            f"{state.replace('-', ' ')}</span></td>",
            _num("lag_s", v.lag_s, lag), _num("changes_per_s", v.changes_per_s, rate),
            _num("waiting", v.waiting, _n(v.waiting)),
            f'<td class="num{" error" if v.over_limit else ""}"><span data-field="retained_bytes"'
            f' data-value="{_raw(v.retained_bytes)}">{wal}</span>{of}</td>',
            # A MariaDB/MySQL source reads its binary log: no slot, no publication.
            f'<td data-field="slot">{_e(v.slot or "none (binary log)")}</td>',
            f'<td data-field="publication">{_e(v.publication or "none")}</td>',
        ]  # fmt: skip
        notes = "".join(
            f'<tr><td></td><td colspan="7" class="message error" data-field="{field}">'
            f"{_e(text)}</td></tr>"
            for field, text in (("wal_warning", v.warning), ("stream_error", v.error)) if text
        )  # fmt: skip
        rows.append(f'<tr id="stream-{_e(v.source)}" data-stream="{_e(v.source)}">'
                    f'{"".join(cells)}</tr>{notes}')  # fmt: skip
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in (
        "source", "stream", "lag", "changes/s", "waiting", "WAL kept", "slot", "publication"))
    return (f'<h2>Change streams</h2><div class="scroll"><table id="streams"><tr>{head}</tr>'
            f'\n{"".join(rows)}</table></div>')  # fmt: skip


def _gate(g: GateView) -> str:
    probe = "" if g.probe is None else f" · probe {_n(g.probe)}"
    return (
        f'<h2>Backpressure gate</h2><p id="gate" data-state="{_e(g.state)}">'
        f'<span class="badge {_e(g.state)}">{_e(g.state)}</span> {_e(g.why)}<br>'
        f'<span class="muted">pending <span data-field="pending" data-value="{g.pending}">'
        f"{_n(g.pending)}</span> (closes at {_n(g.max_pending)}, opens below "
        f"{_n(g.resume_below)}){probe} · importing {g.importing} of {g.max_importing}</span></p>"
    )


def _dead(dead: Iterable[DeadView]) -> str:
    rows = "".join(
        f'<tr data-batch="{_e(d.id)}"><td>{_e(d.source)}</td><td>{_e(d.id)}</td>'
        f'<td class="num">{d.attempts}</td>'
        f'<td class="message error">{_e((d.error or "")[:500])}</td></tr>'
        for d in dead
    )
    if not rows:
        return '<h2>Dead batches</h2><p id="dead" class="muted">none</p>'
    return ('<h2>Dead batches</h2><table id="dead"><tr><th>source</th><th>batch</th>'
            f"<th>attempts</th><th>error</th></tr>{rows}</table>")  # fmt: skip


def _daemons(daemons: Iterable[DaemonView]) -> str:
    rows = "".join(
        f'<tr data-owner="{_e(d.owner)}"><td>{_e(d.owner)}{" (this one)" if d.me else ""}</td>'
        f'<td><span class="badge {"live" if d.live else "dead"}">'
        f"{'live' if d.live else 'not seen'}</span></td>"
        f'<td class="num">{d.seen_s_ago:.0f} s ago</td><td>{_e(d.version or "?")}</td></tr>'
        for d in daemons
    )
    return ('<h2>Daemons</h2><table id="daemons"><tr><th>daemon</th><th>state</th>'
            f"<th>last heartbeat</th><th>sluice</th></tr>{rows}</table>")  # fmt: skip


# -- formatting ----------------------------------------------------------------------------


def _num(name: str, value: float | None, text: str) -> str:
    return f'<td class="num" data-field="{name}" data-value="{_raw(value)}">{text}</td>'


def _raw(value: float | None) -> str:
    return "" if value is None else repr(value)


def _n(value: float, spec: str = ",") -> str:
    return format(value, spec)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
