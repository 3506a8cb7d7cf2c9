"""The backpressure gate against a downstream that takes N items per tick."""

from __future__ import annotations

import pytest

from scheduler.gate import BackpressureGate


@pytest.mark.parametrize("drain_per_tick", [50, 500, 5_000])
def test_pending_never_exceeds_max_and_resumes_below(drain_per_tick: int) -> None:
    gate = BackpressureGate(max_pending=10_000, resume_below=4_000)
    pending, peak, resumed_at = 0, 0, []
    was_open = True
    for _ in range(2_000):
        room = gate.room(pending)
        if room and not was_open:
            resumed_at.append(pending)
        was_open = room > 0
        pending += min(room, 3_000)  # the loop feeds at most a batch per tick
        gate.observe(pending)
        peak = max(peak, pending)
        pending = max(0, pending - drain_per_tick)
    assert peak <= 10_000
    assert all(p < 4_000 for p in resumed_at)
    if drain_per_tick < 3_000:
        assert resumed_at, "the gate must close and reopen under load"


def test_gate_rejects_inverted_thresholds() -> None:
    with pytest.raises(ValueError, match="resume_below"):
        BackpressureGate(max_pending=10, resume_below=20)


def test_zero_resume_threshold_reopens_when_empty() -> None:
    gate = BackpressureGate(max_pending=10, resume_below=0)
    assert gate.room(10) == 0
    assert gate.room(0) == 10
