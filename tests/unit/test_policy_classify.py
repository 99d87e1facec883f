from __future__ import annotations

import time

import pytest

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
from crawlfleet.policy.classify import (
    Outcome,
    classify_response,
    looks_like_block_page,
    outcome_for_error,
)

HTML = {"Content-Type": "text/html; charset=utf-8"}
NAV = b"".join(b'<li><a href="/c/%d">Category %d</a></li>' % (i, i) for i in range(40))
PAGE = b"<html><head><title>Shoes</title></head><body><ul>" + NAV + b"</ul>"
PAGE += b"<p>Good shoes for every season.</p>" * 1300 + b"</body></html>"
SMALL_PAGE = b"<html><body><h1>Red shoe</h1><p>Size 42, in stock.</p></body></html>"
CAPTCHA = (
    b"<html><head><script src='https://www.google.com/recaptcha/api.js'></script></head>"
    b"<body><form><div class='g-recaptcha' data-sitekey='x'></div></form>" + b" " * 600 + b"</body>"
)
CF_CHALLENGE = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
    b"<script src='/cdn-cgi/challenge-platform/h/b/orchestrate/jsch/v1'></script>"
    + b"<noscript>Enable JavaScript and cookies to continue</noscript>" * 20
    + b"</body></html>"
)


@pytest.mark.parametrize(
    ("body", "blocked"),
    [
        (PAGE, False),
        (SMALL_PAGE, False),
        (CAPTCHA, True),
        (CF_CHALLENGE, True),
        (b"<html><body><div class='h-captcha'></div>" + b"\n" * 600 + b"</body></html>", True),
        (b"<div class=cf-turnstile></div>" + b" " * 600, True),
        (b"<h1>ACCESS DENIED</h1><p>You don't have permission to access this server.</p>", True),
        (b"<title>Robot check</title><p>Are you a robot?</p>" + b" " * 600, True),
        (b"<p>Our systems have detected unusual traffic from your network.</p>", True),
        (b"<p>Checking your browser before accessing shop.test.</p>" + b" " * 600, True),
        (b"<title>Pardon Our Interruption</title>" + b" " * 600, True),
        # nearly empty shells: no link and no visible text
        (b"", True),
        (b"<html><head><script src=/app.js></script></head><body></body></html>", True),
        (b"<html><body>  &nbsp; <!-- nothing --> <div></div></body></html>", True),
        (b"<html><body><a href=/home>home</a></body></html>", False),
        (b"<html><body>Hello</body></html>", False),
        (b"<html><body><div></div>" + b" " * 600 + b"</body></html>", False),  # not tiny
        # a content page with rich navigation that embeds a captcha in a form is still a page
        (PAGE.replace(b"</ul>", b"</ul><div class='g-recaptcha'></div>"), False),
        # navigation after a big head still counts
        (b"<script>captcha</script>" + b" " * 20_000 + NAV, False),
        (b"<script>captcha</script>" + b" " * 70_000 + NAV, True),
        # markers past the first 16 KiB are not looked at
        (b"<p>" + b"x" * 20_000 + b"captcha</p>", False),
    ],
)
def test_looks_like_block_page(body: bytes, blocked: bool) -> None:
    assert looks_like_block_page(body) is blocked


@pytest.mark.parametrize(
    ("status", "headers", "body", "outcome"),
    [
        (200, HTML, PAGE, Outcome.OK),
        (200, HTML, CAPTCHA, Outcome.BLOCKED),
        (200, {}, CF_CHALLENGE, Outcome.BLOCKED),  # no Content-Type: sniffed as HTML
        (200, {"content-type": "TEXT/HTML"}, b"", Outcome.BLOCKED),
        (200, {"content-type": "application/json"}, b'{"captcha": false}', Outcome.OK),
        (200, {"content-type": "application/json"}, b"", Outcome.OK),
        (200, {}, b'{"ok": true}', Outcome.OK),
        (204, HTML, b"", Outcome.OK),
        (206, HTML, PAGE, Outcome.OK),
        (403, HTML, SMALL_PAGE, Outcome.BLOCKED),
        (429, {}, b"", Outcome.BLOCKED),
        (503, HTML, b"", Outcome.RETRYABLE_ERROR),
        (503, HTML, b"<h1>Service Unavailable</h1>", Outcome.RETRYABLE_ERROR),
        (503, HTML, CF_CHALLENGE, Outcome.BLOCKED),
        (503, HTML, CAPTCHA, Outcome.BLOCKED),
        (500, HTML, b"", Outcome.RETRYABLE_ERROR),
        (502, HTML, CAPTCHA, Outcome.RETRYABLE_ERROR),
        (504, {}, b"", Outcome.RETRYABLE_ERROR),
        (408, {}, b"", Outcome.RETRYABLE_ERROR),
        (404, HTML, SMALL_PAGE, Outcome.PERMANENT_ERROR),
        (410, {}, b"", Outcome.PERMANENT_ERROR),
        (400, {}, b"", Outcome.PERMANENT_ERROR),
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
        (503, CF_CHALLENGE, False, Outcome.RETRYABLE_ERROR),
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
        "blocked",
        "retryable_error",
        "permanent_error",
        "robots",
        "trap",
    ]


def test_block_check_is_cheap_on_a_normal_page() -> None:
    # Runs on every response. Generous bound (the target is < 20 µs) so slow CI does not flake.
    assert len(PAGE) > 45_000
    runs = 200
    start = time.perf_counter()
    for _ in range(runs):
        classify_response(200, HTML, PAGE)
    per_call = (time.perf_counter() - start) / runs
    assert per_call < 200e-6
