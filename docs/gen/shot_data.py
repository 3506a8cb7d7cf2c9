"""What the docs' pictures show (:mod:`shots`): a run as a user would see it, made up.

:func:`snapshot` is one moment of a daemon's status page: a table mid-run at its
rate limit, its child waiting for it, one done, one whose database went away, a
queue, and a change stream lagging behind its source. :func:`status_config` and
:func:`fill_ledger` make the config and the ledger ``sluice status`` reads: batches
done, importing, claimed and dead, a sweep finished, messages and two poison ones.
Everything is at fixed times (:data:`AT`), so a picture changes only when the code
that draws it does.
"""

from __future__ import annotations

import math

from config.models import RetryConfig, SluiceConfig
from scheduler.ledger import Ledger
from scheduler.ledger.owners import sluice_version
from scheduler.observe.snapshot import (
    DaemonView,
    DeadView,
    GateView,
    LimitsView,
    SourceView,
    StatusSnapshot,
    Totals,
)
from scheduler.observe.streams import StreamView

AT = 1_715_679_667.0
"""The moment shown: 2024-05-14 09:41:07 UTC."""
OWNER = "etl-1:31877:5f1c9a2e"
"""The daemon shown (host, pid, a random part)."""
AWAY = ('connection to server at "billing-db" (10.0.4.12), port 5432 failed: '
        "Connection refused")  # fmt: skip
"""Why the away database's refills fail."""


def _chart(mean: float, swing: float, phase: float = 0.0) -> tuple[float, ...]:
    """A minute of rows/s about ``mean``, a point a second."""
    return tuple(max(0.0, mean + swing * math.sin(phase + i / 4) * math.cos(i / 9))
                 for i in range(60))  # fmt: skip


def _source(name: str, kind: str, target: str, **values: object) -> SourceView:
    """A source row: a running one unless ``values`` say otherwise."""
    fields: dict[str, object] = {
        "name": name, "kind": kind, "target": target, "rows_done": 0, "rows_done_run": 0,
        "left": None, "progress": None, "rows_per_s": None, "eta_s": None, "done": False,
        "chart": (), "buffered": 0, "held": 0, "capacity": 50_000, "refilling": False,
        "exhausted": False, "failed": False, "refill_error": None, "failing_s": None,
        "at_limit": False, "batch_size": 20_000, "waiting_for": (), "limits": None,
        "states": {}, "last_error": None,
    }  # fmt: skip
    fields.update(values)
    return SourceView(**fields)  # type: ignore[arg-type]


def sources() -> tuple[SourceView, ...]:
    """The sources on the page."""
    return (
        _source("shop.orders", "sql keyset", "dw.orders", rows_done=1_240_000,
                rows_done_run=1_240_000, left=760_000, progress=0.62, rows_per_s=4_000.0,
                eta_s=190.0, chart=_chart(3_900, 350), buffered=31_200, held=20_000,
                refilling=True, at_limit=True,
                limits=LimitsView(8_000.0, 4_000.0, 1.0, 8, 4, 4, 0.5, 0.0),
                states={"done": 62, "importing": 2, "claimed": 1}),
        _source("shop.order_lines", "sql keyset", "dw.order_lines", left=5_380_000,
                progress=0.0, rows_per_s=0.0, chart=(0.0,) * 60,
                waiting_for=("shop.orders",),
                limits=LimitsView(8_000.0, 4_000.0, 1.0, 8, 4, 0, 0.5, 0.0)),
        _source("shop.customers", "sql sweep", "dw.customers", rows_done=212_400,
                rows_done_run=212_400, left=0, progress=1.0, rows_per_s=0.0, eta_s=0.0,
                done=True, chart=(0.0,) * 60, exhausted=True, batch_size=5_000,
                limits=LimitsView(None, None, 1.0, None, None, 0, None, 0.0),
                states={"done": 43}),
        _source("billing.payments", "sql keyset", "dw.payments", rows_done=88_000,
                rows_done_run=88_000, left=41_600, progress=0.679, rows_per_s=0.0,
                chart=_chart(900, 700, 1.0)[:44] + (0.0,) * 16, refill_error=AWAY,
                failing_s=72.0, limits=LimitsView(2_000.0, 2_000.0, 1.0, 2, 2, 0, None, 0.0),
                states={"done": 44, "dead": 1}, last_error=AWAY),
        _source("clicks", "sqs", "lake.clicks", rows_done=1_951_300, rows_done_run=1_951_300,
                left=12_400, progress=0.994, rows_per_s=2_300.0, eta_s=5.4,
                chart=_chart(2_300, 600, 2.0), buffered=4_800, capacity=20_000,
                batch_size=10_000, states={"done": 196, "importing": 1}),
        _source("stock.inventory", "sql stream", "dw.inventory", rows_done=640_120,
                rows_done_run=640_120, progress=None, rows_per_s=380.0,
                chart=_chart(380, 120, 3.0), buffered=1_620, batch_size=2_000,
                limits=LimitsView(None, None, 1.0, 4, 4, 1, None, 0.0),
                states={"done": 88, "importing": 1}),
    )


def snapshot() -> StatusSnapshot:
    """The page's one snapshot."""
    shown = sources()
    counted = [s.left for s in shown if s.left is not None]
    rate = sum(s.rows_per_s or 0.0 for s in shown)
    version = sluice_version()
    stream = StreamView(
        source="stock.inventory", slot="sluice_inventory", publication="sluice_inventory",
        lag_s=42.0, caught_up=False, loaded=True, changes_read=96_480, changes_per_s=412.5,
        applied_per_s=380.0, waiting=1_620, retained_bytes=281_018_368,
        max_retained_wal=1 << 30, read_at=AT - 3,
    )  # fmt: skip
    return StatusSnapshot(
        at=AT, owner=OWNER, run_s=1_523.0, sources=shown,
        totals=Totals(sum(s.rows_done for s in shown), sum(counted), rate, sum(counted) / rate,
                      False),
        gate=GateView("open", "61,840 items pending, under max_pending 200,000", 61_840, None,
                      200_000, 150_000, 4, 6),
        dead=(DeadView("billing.payments", "payments-000045", 5, AWAY, AT - 95),),
        daemons=(DaemonView(OWNER, 0.4, True, True, version),
                 DaemonView("etl-2:9930:0b77d1c4", 1.8, True, False, version)),
        streams=(stream,),
    )  # fmt: skip


def status_config() -> str:
    """The config ``sluice status`` is shown with (its databases are never asked)."""
    return """\
ledger: sqlite:///ledger.db
sources:
  orders: {kind: sql, url: "sqlite:///shop.db", table: orders, key: id, target: dw.orders,
           limits: {max_rows_per_s: 2000}}
  customers: {kind: sql, url: "sqlite:///shop.db", table: customers, key: id, mode: sweep,
              target: dw.customers}
  payments: {kind: sql, url: "sqlite:///billing.db", table: payments, key: id,
             target: dw.payments}
  events: {kind: sqs, queue_url: "https://sqs.eu-west-1.amazonaws.com/123456789012/events",
           key: id, target: dw.events}
targets:
  dw: {kind: jdbc, url: "sqlite:///warehouse.db"}
batch: {max_items: 2000}
retry: {max_attempts: 3}
"""


def fill_ledger(cfg: SluiceConfig) -> None:
    """Fill ``cfg``'s ledger through the ledger's API, as a daemon would have over ten
    minutes up to :data:`AT`."""
    now = [AT - 600.0]
    ledger = Ledger(cfg.ledger, clock=lambda: now[0], owner=OWNER)
    retry = RetryConfig(max_attempts=3, backoff=1, max_backoff=1)
    try:
        ledger.owners.register()
        after = ledger.sources.register("orders", "o" * 64)
        for i in range(40):  # a batch of 2,000 keys done every 12 s
            batch = f"orders-{i:06d}"
            _, after = ledger.claim_range(batch, "orders", "dw.orders", after,
                                          [2_000 * (i + 1)], 2_000, begin=True)  # fmt: skip
            now[0] += 12.0
            ledger.finish(batch, rows=2_000 - (3 if i == 17 else 0), rejected=3 if i == 17 else 0)
        _, after = ledger.claim_range("orders-000040", "orders", "dw.orders", after, [82_000],
                                      2_000, begin=True)  # fmt: skip
        ledger.claim_range("orders-000041", "orders", "dw.orders", after, [84_000], 2_000)
        for i in range(9):  # the sweep: done, every key
            batch = f"customers-{i:06d}"
            ledger.claim_keys(batch, "customers", "dw.customers",
                              [[k] for k in range(500 * i, 500 * (i + 1))], begin=True)
            ledger.finish(batch, rows=500)
        after = ledger.sources.register("payments", "p" * 64)
        for i in range(3):
            batch = f"payments-{i:06d}"
            _, after = ledger.claim_range(batch, "payments", "dw.payments", after,
                                          [2_000 * (i + 1)], 2_000, begin=True)  # fmt: skip
            ledger.finish(batch, rows=2_000)
        _, after = ledger.claim_range("payments-000003", "payments", "dw.payments", after,
                                      [8_000], 2_000)  # fmt: skip
        now[0] = AT - 95
        for _ in range(retry.max_attempts):
            ledger.begin("payments-000003")
            ledger.fail("payments-000003", AWAY, retry)
        now[0] = AT - 60
        for i in range(20):
            batch = f"events-{i:06d}"
            ledger.claim_keys(batch, "events", "dw.events", [[f"m{i}-{k}"] for k in range(100)],
                              payloads=["{}"] * 100, begin=True)  # fmt: skip
            now[0] += 2.5
            ledger.finish(batch, rows=100)
        for i in range(2):
            ledger.sources.record_poison("events", f"m-bad-{i}", "{not json",
                                         "not JSON: Expecting property name (line 1 column 2)")
        now[0] = AT - 1
        ledger.owners.heartbeat()
    finally:
        ledger.close()
