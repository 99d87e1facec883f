"""Pure decisions, no I/O, time passed in: block classification, retries, pacing, trap guards.

``classify`` says what an attempt's result means, ``retry`` what to do about a failure, ``pacing``
how fast to crawl a domain next, ``traps`` which URLs not to crawl at all.
"""

from __future__ import annotations

from crawlfleet.policy.classify import (
    Outcome,
    classify_response,
    looks_like_block_page,
    outcome_for_error,
)
from crawlfleet.policy.pacing import PacingConfig, PacingState
from crawlfleet.policy.retry import RetryDecision, backoff, decide, parse_retry_after
from crawlfleet.policy.traps import TrapRules, check_url, url_pattern

__all__ = [
    "Outcome",
    "PacingConfig",
    "PacingState",
    "RetryDecision",
    "TrapRules",
    "backoff",
    "check_url",
    "classify_response",
    "decide",
    "looks_like_block_page",
    "outcome_for_error",
    "parse_retry_after",
    "url_pattern",
]
