"""Pure decisions, no I/O, time passed in: block classification, retries, pacing, trap guards.

``blocks`` tells block pages from data, ``classify`` says what an attempt's result means,
``retry`` what to do about a failure, ``pacing`` how fast to crawl a domain next, ``traps`` which
URLs not to crawl at all.
"""

from __future__ import annotations

from crawlfleet.policy.blocks import BlockKind, BlockVerdict, detect_block
from crawlfleet.policy.classify import (
    Classification,
    Outcome,
    classify,
    classify_response,
    outcome_for_error,
)
from crawlfleet.policy.pacing import PacingConfig, PacingState
from crawlfleet.policy.retry import RetryDecision, backoff, decide, parse_retry_after
from crawlfleet.policy.traps import TrapRules, check_url, url_pattern

__all__ = [
    "BlockKind",
    "BlockVerdict",
    "Classification",
    "Outcome",
    "PacingConfig",
    "PacingState",
    "RetryDecision",
    "TrapRules",
    "backoff",
    "check_url",
    "classify",
    "classify_response",
    "decide",
    "detect_block",
    "outcome_for_error",
    "parse_retry_after",
    "url_pattern",
]
