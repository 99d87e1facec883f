from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.model import DeadReason
from crawlfleet.policy.classify import Outcome
from crawlfleet.policy.retry import RetryDecision, backoff, decide, parse_retry_after

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("0", 0.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),
        ("Tuesday, 14-Nov-23 22:13:50 GMT", 30.0),  # RFC 850, still allowed by RFC 9110
        ("Tue Nov 14 22:13:25 2023", 5.0),  # asctime
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # in the past
        ("Tue, 14 Nov 2023 22:14:20 -0000", 60.0),
        ("Tue, 32 Nov 2023 22:14:20 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"),
    [
        (1, 0.0, 2.0),  # ceiling 4: half fixed
        (1, 0.5, 3.0),
        (1, 0.999, 3.998),
        (2, 0.0, 4.0),
        (3, 1.0, 16.0),
        (20, 0.0, 300.0),  # capped at 600: never less than half the cap
        (20, 0.999, 599.7),
        (10_000, 0.5, 450.0),  # no overflow
        (0, 0.0, 1.0),
    ],
)
def test_backoff(attempt: int, rand: float, expected: float) -> None:
    assert backoff(attempt, rand=rand) == pytest.approx(expected)


@given(st.integers(0, 200), st.floats(0, 1, exclude_max=True), st.floats(0.01, 10))
def test_backoff_grows_and_stays_under_cap(attempt: int, rand: float, base: float) -> None:
    delay = backoff(attempt, base=base, cap=600.0, rand=rand)
    assert 0 < delay <= 600.0
    # never above this attempt's ceiling, which grows with the attempts until the cap
    assert delay <= min(600.0, base * 2.0**attempt) + 1e-9
    assert backoff(attempt + 1, base=base, cap=600.0, rand=rand) >= delay - 1e-9


def _decide(outcome: Outcome, attempts: int = 1, **kw: Any) -> RetryDecision:
    args: dict[str, Any] = {"max_attempts": 5, "now": NOW, "rand": 0.5, **kw}
    return decide(outcome=outcome, attempts=attempts, **args)


@pytest.mark.parametrize(
    ("outcome", "attempts", "kw", "delay"),
    [
        (Outcome.RETRYABLE_ERROR, 1, {"status": 503}, 3.0),
        (Outcome.RETRYABLE_ERROR, 3, {"error_kind": "timeout"}, 12.0),
        (Outcome.BLOCKED, 1, {"status": 429}, 3.0),
        (Outcome.BLOCKED, 2, {"status": 429, "retry_after": 120.0}, 120.0),  # Retry-After wins
        (Outcome.BLOCKED, 4, {"status": 429, "retry_after": 1.0}, 24.0),  # backoff wins
        (Outcome.BLOCKED, 1, {"status": 429, "retry_after": 0.0}, 3.0),  # never immediate
        (Outcome.BLOCKED, 1, {"status": 429, "retry_after": 86_400.0}, 3600.0),  # capped
        (Outcome.BLOCKED, 1, {"retry_after": 900.0, "retry_after_cap": 60.0}, 60.0),
        (Outcome.RETRYABLE_ERROR, 1, {"rand": 0.0, "base": 5.0}, 5.0),
        (Outcome.RETRYABLE_ERROR, 1, {"rand": 0.0, "base": 5.0, "cap": 1.0}, 5.0),  # floor: base
        (Outcome.RETRYABLE_ERROR, 4, {"cap": 10.0}, 7.5),
    ],
)
def test_decide_retries_later(
    outcome: Outcome, attempts: int, kw: dict[str, Any], delay: float
) -> None:
    decision = _decide(outcome, attempts, **kw)
    assert decision.dead_reason is None
    assert decision.retry_at == pytest.approx(NOW + delay)


@given(
    st.integers(1, 4),
    st.floats(0, 1, exclude_max=True),
    st.none() | st.floats(0, 10**6),
    st.sampled_from([Outcome.BLOCKED, Outcome.RETRYABLE_ERROR]),
)
def test_a_retry_is_never_immediate(
    attempts: int, rand: float, retry_after: float | None, outcome: Outcome
) -> None:
    decision = _decide(outcome, attempts, rand=rand, status=429, retry_after=retry_after)
    assert decision.retry_at is not None
    assert decision.retry_at >= NOW + 2.0


@pytest.mark.parametrize(
    ("outcome", "attempts", "kw", "reason"),
    [
        (Outcome.RETRYABLE_ERROR, 5, {"status": 503}, DeadReason.TOO_MANY_RETRIES),
        (Outcome.RETRYABLE_ERROR, 7, {"error_kind": "timeout"}, DeadReason.TOO_MANY_RETRIES),
        (Outcome.BLOCKED, 5, {"status": 429}, DeadReason.BLOCKED),
        (Outcome.BLOCKED, 1, {"max_attempts": 1}, DeadReason.BLOCKED),
        (Outcome.PERMANENT_ERROR, 1, {"status": 404}, DeadReason.HTTP_4XX),
        (Outcome.PERMANENT_ERROR, 1, {"status": 410}, DeadReason.HTTP_4XX),
        (Outcome.PERMANENT_ERROR, 1, {"error_kind": "too_large"}, DeadReason.TOO_LARGE),
        (
            Outcome.PERMANENT_ERROR,
            1,
            {"error_kind": "too_many_redirects"},
            DeadReason.TOO_MANY_REDIRECTS,
        ),
        (Outcome.PERMANENT_ERROR, 1, {"error_kind": "address_refused"}, DeadReason.ADDRESS_REFUSED),
        (Outcome.PERMANENT_ERROR, 1, {"error_kind": "unsupported_scheme"}, DeadReason.UNSUPPORTED),
        (Outcome.PERMANENT_ERROR, 1, {"status": 304}, DeadReason.UNSUPPORTED),
        (Outcome.PERMANENT_ERROR, 1, {}, DeadReason.UNSUPPORTED),
        (Outcome.ROBOTS, 1, {}, DeadReason.ROBOTS),
        (Outcome.TRAP, 1, {}, DeadReason.TRAP),
    ],
)
def test_decide_gives_up(
    outcome: Outcome, attempts: int, kw: dict[str, Any], reason: DeadReason
) -> None:
    decision = _decide(outcome, attempts, **kw)
    assert decision.retry_at is None
    assert decision.dead_reason is reason
    assert decision.why


def test_why_names_the_cause() -> None:
    assert "http 503" in _decide(Outcome.RETRYABLE_ERROR, status=503).why
    assert "timeout" in _decide(Outcome.RETRYABLE_ERROR, 5, error_kind="timeout").why


@pytest.mark.parametrize(
    ("outcome", "kw"), [(Outcome.OK, {}), (Outcome.RETRYABLE_ERROR, {"base": 0.0})]
)
def test_decide_rejects(outcome: Outcome, kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        _decide(outcome, **kw)


@pytest.mark.parametrize(("retry_at", "reason"), [(None, None), (1.0, DeadReason.TRAP)])
def test_decision_has_exactly_one_result(retry_at: float | None, reason: DeadReason | None) -> None:
    with pytest.raises(ValueError):
        RetryDecision(retry_at, reason, "x")


def test_a_host_refusing_every_attempt__dead_as_host_unreachable() -> None:
    d = decide(
        outcome=Outcome.RETRYABLE_ERROR,
        attempts=5,
        max_attempts=5,
        now=0.0,
        rand=0.5,
        error_kind="host_unreachable",
    )
    assert d.dead_reason is DeadReason.HOST_UNREACHABLE
