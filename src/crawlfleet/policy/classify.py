"""What a fetch result means: data, a block, or an error worth (or not worth) retrying.

Blocks are not data. A 429, a 403 or 503 page, or a status-200 page that is really a captcha, a
JavaScript challenge, an "access denied" notice or an empty shell is :attr:`Outcome.BLOCKED`
(the tiers are in :mod:`crawlfleet.policy.blocks`): the worker does not parse it, retires the
session and the retry policy tries again later, maybe over another route. Everything here is
pure and cheap enough to run on every response.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from crawlfleet.errors import FetchError, PermanentFetchError
from crawlfleet.model import Outcome
from crawlfleet.policy.blocks import BlockKind, BlockVerdict, detect_block

__all__ = [
    "EMPTY_ATTEMPTS",
    "GONE_STATUSES",
    "Classification",
    "Outcome",
    "classify",
    "classify_response",
    "outcome_for_error",
]


#: Attempts an empty 2xx HTML page gets in all: one retry catches a backend hiccup; a page that
#: is empty twice is empty, and goes to the dead letters (visible, replayable) rather than
#: costing every attempt the request has.
EMPTY_ATTEMPTS: Final = 2


@dataclass(frozen=True, slots=True)
class Classification:
    """An attempt's :class:`Outcome` and the block verdict behind it (its kind and reason)."""

    outcome: Outcome
    block: BlockVerdict


def classify(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    spider_verdict: bool | None = None,
    has_expected: Callable[[], bool] | None = None,
    attempts: int = 1,
) -> Classification:
    """The outcome of a response that arrived (redirects already followed), with its verdict.

    Blocks (see :func:`~crawlfleet.policy.blocks.detect_block`) are ``BLOCKED``; a suspect page
    is ``OK`` (parse it; the verdict says to report it); an empty page is ``RETRYABLE_ERROR``
    until ``attempts`` (this one included) reaches :data:`EMPTY_ATTEMPTS`, then
    ``PERMANENT_ERROR``. Other responses follow their status: 2xx ``OK``; final 4xx answers
    (:data:`GONE_STATUSES`: 404, 410, ...) ``GONE``; 408 and 5xx ``RETRYABLE_ERROR``; other 4xx
    and leftover 3xx ``PERMANENT_ERROR``.
    """
    verdict = detect_block(
        status, headers, body, spider_verdict=spider_verdict, has_expected=has_expected
    )
    match verdict.kind:
        case BlockKind.BLOCKED:
            return Classification(Outcome.BLOCKED, verdict)
        case BlockKind.EMPTY:
            final = attempts >= EMPTY_ATTEMPTS
            outcome = Outcome.PERMANENT_ERROR if final else Outcome.RETRYABLE_ERROR
            return Classification(outcome, verdict)
    return Classification(_by_status(status), verdict)


#: 4xx answers that are final: the page is not there (or never will be for this request), and
#: replaying it after a fix brings nothing. They end ``done`` with their status (counted as
#: gone), not in the dead letters. 401/407 (credentials can be fixed), 403 and 429 (blocks),
#: 408 (retried) and the rest of 4xx stay errors.
GONE_STATUSES: Final = frozenset({400, 404, 405, 406, 410, 411, 413, 414, 415, 416, 422, 451})


def _by_status(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.OK
    if status in GONE_STATUSES:
        return Outcome.GONE
    if status == 408 or 500 <= status < 600:
        return Outcome.RETRYABLE_ERROR
    # Other 4xx, a 3xx left over after redirect handling (304, no Location), anything odd.
    return Outcome.PERMANENT_ERROR


def classify_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    spider_verdict: bool | None = None,
) -> Outcome:
    """The outcome of a response that arrived: :func:`classify` without the verdict, for a
    first attempt (an empty page is ``RETRYABLE_ERROR``: the request's own attempts bound it).

    ``spider_verdict`` is the spider's own block test: True makes any response a block; False
    turns the body heuristics off (429, and 403/503 with an HTML body, stay blocks: they are the
    server's own word).
    """
    return classify(status, headers, body, spider_verdict=spider_verdict).outcome


def outcome_for_error(exc: FetchError) -> Outcome:
    """Permanent errors (too large, refused address, ...) are final; every other fetch error,
    including ones of no known branch, is worth a later retry."""
    if isinstance(exc, PermanentFetchError):
        return Outcome.PERMANENT_ERROR
    return Outcome.RETRYABLE_ERROR
