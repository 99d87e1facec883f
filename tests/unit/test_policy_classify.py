from __future__ import annotations

import pytest
from tests import block_pages as pages

from crawlfleet.errors import (
    AddressRefused,
    ConnectError,
    DataLoss,
    FetchError,
    FetchTimeout,
    TooLarge,
    TooManyRedirects,
    UnsupportedScheme,
)
from crawlfleet.policy.blocks import BlockKind, BlockVerdict
from crawlfleet.policy.classify import (
    EMPTY_ATTEMPTS,
    Classification,
    Outcome,
    classify,
    classify_response,
    outcome_for_error,
)

HTML = {"Content-Type": "text/html; charset=utf-8"}
PAGE = pages.shop_page()
SMALL_PAGE = b"<html><body><h1>Red shoe</h1><p>Size 42, in stock.</p></body></html>"
CAPTCHA = pages.RECAPTCHA_LOGIN_WALL
CF_CHALLENGE = pages.CLOUDFLARE_CHALLENGE


@pytest.mark.parametrize(
    ("status", "headers", "body", "outcome"),
    [
        (200, HTML, PAGE, Outcome.OK),
        (200, HTML, CAPTCHA, Outcome.BLOCKED),
        (200, {}, CF_CHALLENGE, Outcome.BLOCKED),  # no Content-Type: sniffed as HTML
        (200, {"content-type": "TEXT/HTML"}, b"", Outcome.RETRYABLE_ERROR),  # empty
        (200, {"content-type": "application/json"}, b'{"captcha": false}', Outcome.OK),
        (200, {"content-type": "application/json"}, b"", Outcome.OK),
        (200, {}, b'{"ok": true}', Outcome.OK),
        (204, HTML, b"", Outcome.OK),
        (206, HTML, PAGE, Outcome.OK),
        (403, HTML, SMALL_PAGE, Outcome.BLOCKED),
        (403, {"content-type": "application/json"}, b"{}", Outcome.PERMANENT_ERROR),
        (429, {}, b"", Outcome.BLOCKED),
        (503, HTML, b"", Outcome.RETRYABLE_ERROR),
        (503, HTML, b"<h1>Service Unavailable</h1>", Outcome.BLOCKED),
        (503, {"content-type": "application/json"}, b"{}", Outcome.RETRYABLE_ERROR),
        (503, HTML, CF_CHALLENGE, Outcome.BLOCKED),
        (503, HTML, CAPTCHA, Outcome.BLOCKED),
        (500, HTML, b"", Outcome.RETRYABLE_ERROR),
        (502, HTML, CAPTCHA, Outcome.RETRYABLE_ERROR),
        (504, {}, b"", Outcome.RETRYABLE_ERROR),
        (408, {}, b"", Outcome.RETRYABLE_ERROR),
        (404, HTML, SMALL_PAGE, Outcome.GONE),  # a final answer: done, not a dead letter
        (410, {}, b"", Outcome.GONE),
        (400, {}, b"", Outcome.GONE),
        (401, {}, b"", Outcome.PERMANENT_ERROR),  # credentials can be fixed: replayable
        (409, {}, b"", Outcome.PERMANENT_ERROR),
        (301, {}, b"", Outcome.PERMANENT_ERROR),
        (304, {}, b"", Outcome.PERMANENT_ERROR),
        (199, {}, b"", Outcome.PERMANENT_ERROR),
    ],
)
def test_classify_response(
    status: int, headers: dict[str, str], body: bytes, outcome: Outcome
) -> None:
    assert classify_response(status, headers, body) is outcome


@pytest.mark.parametrize(
    ("status", "body", "verdict", "outcome"),
    [
        (200, PAGE, True, Outcome.BLOCKED),
        (404, SMALL_PAGE, True, Outcome.BLOCKED),
        (200, CAPTCHA, False, Outcome.OK),
        (200, b"", False, Outcome.OK),
        (503, CF_CHALLENGE, False, Outcome.BLOCKED),  # 503 with an HTML body: the status says
        (403, SMALL_PAGE, False, Outcome.BLOCKED),  # the server's own word, not a heuristic
        (429, b"", False, Outcome.BLOCKED),
    ],
)
def test_spider_verdict(status: int, body: bytes, verdict: bool, outcome: Outcome) -> None:
    assert classify_response(status, HTML, body, spider_verdict=verdict) is outcome


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (FetchTimeout("t"), Outcome.RETRYABLE_ERROR),
        (ConnectError("c"), Outcome.RETRYABLE_ERROR),
        (DataLoss("d"), Outcome.RETRYABLE_ERROR),
        (FetchError("unknown"), Outcome.RETRYABLE_ERROR),
        (TooLarge("big"), Outcome.PERMANENT_ERROR),
        (TooManyRedirects("r"), Outcome.PERMANENT_ERROR),
        (AddressRefused("a"), Outcome.PERMANENT_ERROR),
        (UnsupportedScheme("s"), Outcome.PERMANENT_ERROR),
    ],
)
def test_outcome_for_error(exc: FetchError, outcome: Outcome) -> None:
    assert outcome_for_error(exc) is outcome


def test_outcome_names_are_stable() -> None:
    assert [o.value for o in Outcome] == [
        "ok",
        "gone",
        "blocked",
        "retryable_error",
        "permanent_error",
        "robots",
        "trap",
    ]


@pytest.mark.parametrize(
    ("attempts", "outcome"),
    [
        (1, Outcome.RETRYABLE_ERROR),
        (EMPTY_ATTEMPTS, Outcome.PERMANENT_ERROR),
        (9, Outcome.PERMANENT_ERROR),
    ],
)
def test_classify__an_empty_page_gets_a_bounded_retry_then_is_final(
    attempts: int, outcome: Outcome
) -> None:
    empty = BlockVerdict(BlockKind.EMPTY, "empty")
    assert classify(200, HTML, b"", attempts=attempts) == Classification(outcome, empty)


@pytest.mark.parametrize(
    ("status", "body", "outcome", "verdict"),
    [
        (200, PAGE, Outcome.OK, BlockVerdict(BlockKind.OK)),
        (200, CF_CHALLENGE, Outcome.BLOCKED, BlockVerdict(BlockKind.BLOCKED, "vendor:cloudflare")),
        (429, b"", Outcome.BLOCKED, BlockVerdict(BlockKind.BLOCKED, "status:429")),
        (404, SMALL_PAGE, Outcome.GONE, BlockVerdict(BlockKind.OK)),
        (502, CAPTCHA, Outcome.RETRYABLE_ERROR, BlockVerdict(BlockKind.OK)),
    ],
)
def test_classify__outcome_and_verdict(
    status: int, body: bytes, outcome: Outcome, verdict: BlockVerdict
) -> None:
    assert classify(status, HTML, body) == Classification(outcome, verdict)


def test_classify__a_suspect_page_is_parsed() -> None:
    page = pages.PLAIN_PRODUCT.replace(b"</article>", b"<div id=px-captcha></div></article>")
    result = classify(200, HTML, page, has_expected=lambda: True)
    assert result == Classification(
        Outcome.OK, BlockVerdict(BlockKind.SUSPECT, "vendor:perimeterx")
    )
    assert classify(200, HTML, page, has_expected=lambda: False).outcome is Outcome.BLOCKED
