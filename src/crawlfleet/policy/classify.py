"""What a fetch result means: data, a block, or an error worth (or not worth) retrying.

Blocks are not data. A 403/429, a 503 challenge, or a status-200 page that is really a captcha, a
JavaScript challenge, an "access denied" notice or an almost empty shell is :attr:`Outcome.BLOCKED`:
the worker does not parse it, retires the session and the retry policy tries again later, maybe
over another route. Everything here is pure and cheap enough to run on every response.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from crawlfleet.errors import FetchError, PermanentFetchError

__all__ = ["Outcome", "classify_response", "looks_like_block_page", "outcome_for_error"]


class Outcome(StrEnum):
    """The verdict on one attempt; stable names, used in metrics and attempt history."""

    OK = "ok"
    BLOCKED = "blocked"
    RETRYABLE_ERROR = "retryable_error"
    PERMANENT_ERROR = "permanent_error"
    ROBOTS = "robots"
    TRAP = "trap"


# Block markers sit near the top of a page; scanning further costs time on every response.
_SCAN_BYTES: Final = 16 * 1024
# A page with this many links in its first 64 KiB is a real page with navigation: challenge and
# captcha interstitials are bare. Checking this first keeps the common case cheap (a 45 KB shop
# page costs a few µs instead of ~100 µs of regex) and spares content pages that merely embed a
# captcha in a comment or login form. The window is wider than the marker scan because modern
# pages often carry more than 16 KiB of inline script and style before the first link.
_LINK_RICH: Final = 30
_LINK_SCAN_BYTES: Final = 64 * 1024
# "An HTML body that is nearly empty": smaller than this, no link and no visible text.
_BARE_BYTES: Final = 512

# Matched against the lower-cased head of the body. "captcha" also covers g-recaptcha, h-captcha,
# px-captcha and friends.
_BLOCK_MARKERS: Final = re.compile(
    rb"captcha|cf-turnstile|cf-chl-|challenge-platform|checking your browser"
    rb"|access denied|are you a (?:robot|human)|unusual traffic|just a moment\.\.\."
    rb"|pardon our interruption|_incapsula_resource|request unsuccessful"
)
_NOT_TEXT: Final = re.compile(
    rb"<(script|style|noscript)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>|&nbsp;|\s+", re.DOTALL
)


def _link_rich(body: bytes) -> bool:
    pos = 0
    for _ in range(_LINK_RICH):
        pos = body.find(b"<a", pos, _LINK_SCAN_BYTES)
        if pos < 0:
            return False
        pos += 2
    return True


def _is_bare(head: bytes) -> bool:
    lowered = head.lower()
    return b"<a" not in lowered and not _NOT_TEXT.sub(b"", lowered)


def _has_block_marker(head: bytes) -> bool:
    return _BLOCK_MARKERS.search(head.lower()) is not None


def looks_like_block_page(body: bytes) -> bool:
    """Whether an HTML body is a block page (captcha, JS challenge, access denied, bare shell).

    Looks for markers in the first 16 KiB only, case-insensitively. Pages with rich navigation
    (30 links in the first 64 KiB) are taken as real pages without looking for markers.
    """
    head = body[:_SCAN_BYTES]
    if len(body) < _BARE_BYTES and _is_bare(head):
        return True
    if _link_rich(body):
        return False
    return _has_block_marker(head)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value


def _is_html(headers: Mapping[str, str], body: bytes) -> bool:
    content_type = _header(headers, "content-type")
    if content_type is not None:
        return "html" in content_type.lower()
    # No Content-Type: sniff. An empty body counts, so an empty 200 is caught as a bare page.
    return body.lstrip()[:1] in (b"", b"<")


def classify_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    spider_verdict: bool | None = None,
) -> Outcome:
    """The outcome of a response that arrived (redirects already followed).

    ``spider_verdict`` is the spider's own block test: True makes any response a block; False
    turns the body heuristics off (403 and 429 stay blocks: they are the server's own word).
    """
    if spider_verdict:
        return Outcome.BLOCKED
    heuristics = spider_verdict is None
    if 200 <= status < 300:
        if (
            heuristics
            and status not in (204, 205)
            and _is_html(headers, body)
            and looks_like_block_page(body)
        ):
            return Outcome.BLOCKED
        return Outcome.OK
    if status in (403, 429):
        return Outcome.BLOCKED
    if status == 503:
        # Only markers here: an empty 503 is plain maintenance, worth a retry, not a block.
        if heuristics and _has_block_marker(body[:_SCAN_BYTES]):
            return Outcome.BLOCKED
        return Outcome.RETRYABLE_ERROR
    if status == 408 or 500 <= status < 600:
        return Outcome.RETRYABLE_ERROR
    # Other 4xx, a 3xx left over after redirect handling (304, no Location), anything odd.
    return Outcome.PERMANENT_ERROR


def outcome_for_error(exc: FetchError) -> Outcome:
    """Permanent errors (too large, refused address, ...) are final; every other fetch error,
    including ones of no known branch, is worth a later retry."""
    if isinstance(exc, PermanentFetchError):
        return Outcome.PERMANENT_ERROR
    return Outcome.RETRYABLE_ERROR
