"""A repeated stop signal: the same stop within the grace (a supervisor's SIGTERM and its
forwarded copy), "exit now" after it, and at once for a second Ctrl-C."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.policy.stopping import STOP_GRACE, Stop, StopSignals


@pytest.mark.parametrize(
    ("gap", "terminal", "want"),
    [
        (0.0, False, Stop.SAME),  # systemd's control-group SIGTERM plus crawl's forwarded one
        (0.003, False, Stop.SAME),
        (STOP_GRACE - 1e-9, False, Stop.SAME),
        (STOP_GRACE, False, Stop.NOW),
        (1e9, False, Stop.NOW),
        (-5.0, False, Stop.SAME),  # a clock that stepped back
        (0.0, True, Stop.NOW),  # a second Ctrl-C
        (0.05, True, Stop.NOW),
    ],
)
def test_second_signal(gap: float, terminal: bool, want: Stop) -> None:
    signals = StopSignals()
    assert signals.read(100.0) is Stop.DRAIN
    assert signals.read(100.0 + gap, terminal=terminal) is want


def test_the_grace_runs_from_the_first_signal() -> None:
    signals = StopSignals(grace=2.0)
    assert [signals.read(t) for t in (10.0, 10.001, 11.0, 11.9, 12.0, 12.1)] == [
        Stop.DRAIN, Stop.SAME, Stop.SAME, Stop.SAME, Stop.NOW, Stop.NOW,
    ]  # fmt: skip


@given(
    st.lists(
        st.tuples(st.floats(-1e12, 1e12, allow_nan=False), st.booleans()), min_size=1, max_size=8
    )
)
def test_any_signals__the_first_drains_and_no_later_one_drains_again(
    signals: list[tuple[float, bool]],
) -> None:
    state = StopSignals()
    got = [state.read(now, terminal=t) for now, t in signals]
    assert got[0] is Stop.DRAIN and Stop.DRAIN not in got[1:]
    assert state.first_at is not None and math.isfinite(state.first_at)
