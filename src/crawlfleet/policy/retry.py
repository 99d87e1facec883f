"""Retries are decisions, not loops: when to try a failed request again, or why to give it up.

:func:`decide` is a pure function of the outcome, the attempt count, the clock and a random number
(all passed in), so every branch is a table test. The worker applies the decision through
``Frontier.fail``.
"""

from __future__ import annotations

import email.utils
import math
import re
from dataclasses import dataclass
from datetime import UTC
from typing import Final

from crawlfleet.model import DeadReason
from crawlfleet.policy.classify import Outcome

__all__ = ["RetryDecision", "backoff", "decide", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Retry at ``retry_at`` (epoch seconds), or dead with ``dead_reason``; ``why`` is for humans.

    Exactly one of ``retry_at`` and ``dead_reason`` is set.
    """

    retry_at: float | None
    dead_reason: DeadReason | None
    why: str

    def __post_init__(self) -> None:
        if (self.retry_at is None) == (self.dead_reason is None):
            raise ValueError("exactly one of retry_at and dead_reason must be set")


_DELTA_SECONDS: Final = re.compile(r"\d+(?:\.\d+)?")
#: a year: longer waits read as this (every caller caps far lower; the value stays finite)
_RETRY_AFTER_MAX: Final = 365 * 86400.0


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date.

    Returns a finite number >= 0 (a date in the past gives 0, more than a year gives a year), or
    None when the header is absent or unparseable. :func:`decide` and the pacing policy cap it
    further.
    """
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        return min(float(value), _RETRY_AFTER_MAX)  # 400 nines are a float's infinity
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" dates come back naive; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def backoff(attempt: int, *, base: float = 2.0, cap: float = 600.0, rand: float) -> float:
    """Capped exponential backoff with equal jitter: half of ``min(cap, base * 2**attempt)``
    fixed, half scaled by ``rand`` (in [0, 1), passed in so the function is pure).

    ``attempt`` is how many attempts were made so far (1 after the first failure).
    """
    exponent = min(max(attempt, 0), 62)  # beyond this the cap has long won; avoid overflow
    ceiling = min(cap, base * math.ldexp(1.0, exponent))
    return ceiling / 2 + ceiling / 2 * rand


# Permanent failures without a status: the fetch error's ``kind`` names the dead reason.
_DEAD_BY_KIND: Final[dict[str, DeadReason]] = {
    "too_large": DeadReason.TOO_LARGE,
    "too_many_redirects": DeadReason.TOO_MANY_REDIRECTS,
    "address_refused": DeadReason.ADDRESS_REFUSED,
    "robots": DeadReason.ROBOTS,
    "robots_unavailable": DeadReason.ROBOTS_UNAVAILABLE,
    "out_of_scope": DeadReason.OUT_OF_SCOPE,
    "unsupported_scheme": DeadReason.UNSUPPORTED,
    "tls_error": DeadReason.TLS_ERROR,
}


def _what(status: int | None, error_kind: str | None) -> str:
    if status is not None:
        return f"http {status}"
    return error_kind or "error"


def _permanent(status: int | None, error_kind: str | None) -> RetryDecision:
    reason = _DEAD_BY_KIND.get(error_kind or "")
    if reason is None:
        # A 4xx is the server saying "no"; a leftover 3xx or an unknown permanent error is a
        # response we cannot use.
        is_4xx = status is not None and 400 <= status < 500
        reason = DeadReason.HTTP_4XX if is_4xx else DeadReason.UNSUPPORTED
    return RetryDecision(None, reason, f"permanent: {_what(status, error_kind)}")


def decide(
    *,
    outcome: Outcome,
    attempts: int,
    max_attempts: int,
    now: float,
    rand: float,
    status: int | None = None,
    error_kind: str | None = None,
    retry_after: float | None = None,
    base: float = 2.0,
    cap: float = 600.0,
    retry_after_cap: float = 3600.0,
) -> RetryDecision:
    """Retry later or give up, for an attempt that did not end in :attr:`Outcome.OK`.

    ``attempts`` counts attempts made, this one included. Retryable errors and blocks wait the
    larger of the jittered backoff and ``Retry-After`` (capped at ``retry_after_cap``), and never
    less than ``base`` seconds (a 429 is never answered at once); once ``attempts`` reaches
    ``max_attempts`` they are dead (``too_many_retries``, or ``blocked`` for blocks). Permanent
    errors, robots refusals and traps are dead at once. Raises ``ValueError`` for ``OK`` or a
    non-positive ``base``.
    """
    if base <= 0:
        raise ValueError("base must be > 0: a retry is never immediate")
    what = _what(status, error_kind)
    match outcome:
        case Outcome.OK | Outcome.GONE:
            raise ValueError(f"an {outcome.value} outcome needs no retry decision")
        case Outcome.ROBOTS:
            return RetryDecision(None, DeadReason.ROBOTS, "disallowed by robots.txt")
        case Outcome.TRAP:
            return RetryDecision(None, DeadReason.TRAP, "crawler trap")
        case Outcome.PERMANENT_ERROR:
            return _permanent(status, error_kind)
    if attempts >= max_attempts:
        reason = DeadReason.TOO_MANY_RETRIES
        if outcome is Outcome.BLOCKED:
            reason = DeadReason.BLOCKED
        elif error_kind == "host_unreachable":  # refused / no DNS name every time
            reason = DeadReason.HOST_UNREACHABLE
        return RetryDecision(None, reason, f"gave up after {attempts} attempts: {what}")
    delay = max(base, backoff(attempts, base=base, cap=cap, rand=rand))
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_cap))
    why = f"retry {attempts + 1}/{max_attempts} in {delay:.1f}s: {what}"
    return RetryDecision(now + delay, None, why)
