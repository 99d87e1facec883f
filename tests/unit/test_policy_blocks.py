"""The block classifier against a table of real-looking pages (tests/block_pages.py)."""

from __future__ import annotations

import random
import re

import pytest
from tests import block_pages as pages

from crawlfleet.policy.blocks import (
    REASONS,
    BlockKind,
    BlockVerdict,
    detect_block,
    visible_text_length,
)

HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json"}
BLOCKED, SUSPECT, EMPTY, OK = BlockKind.BLOCKED, BlockKind.SUSPECT, BlockKind.EMPTY, BlockKind.OK


@pytest.mark.parametrize(
    ("body", "verdict", "reason"),
    [
        # vendor challenge and denial pages, served with status 200
        (pages.CLOUDFLARE_CHALLENGE, BLOCKED, "vendor:cloudflare"),
        (pages.CLOUDFLARE_1020, BLOCKED, "vendor:cloudflare"),
        (pages.DATADOME_CAPTCHA, BLOCKED, "vendor:datadome"),
        (pages.PERIMETERX_BLOCK, BLOCKED, "vendor:perimeterx"),
        (pages.AKAMAI_DENIED, BLOCKED, "vendor:akamai"),
        (pages.INCAPSULA_BLOCK, BLOCKED, "vendor:incapsula"),
        (pages.KASADA_SHELL, BLOCKED, "vendor:kasada"),
        (pages.SUCURI_BLOCK, BLOCKED, "vendor:sucuri"),
        (pages.DISTIL_BLOCK, BLOCKED, "vendor:distil"),
        # generic markers and structure, on small pages
        (pages.RECAPTCHA_LOGIN_WALL, BLOCKED, "generic:captcha"),
        (b"<div class=cf-turnstile></div>", BLOCKED, "generic:captcha"),
        (
            b"<html><body><div class='h-captcha' data-sitekey=x></div></body></html>",
            BLOCKED,
            "generic:captcha",
        ),
        (b"<title>Robot check</title><p>Are you a robot?</p>", BLOCKED, "generic:verify-human"),
        (
            b"<h1>ACCESS DENIED</h1><p>You don't have permission.</p>",
            BLOCKED,
            "generic:access-denied",
        ),
        (
            b"<p>Our systems have detected unusual traffic from your network.</p>",
            BLOCKED,
            "generic:unusual-traffic",
        ),
        (
            b"<p>Checking your browser before accessing shop.test.</p>",
            BLOCKED,
            "generic:checking-browser",
        ),
        (pages.SPA_SHELL, BLOCKED, "structure:scripts-only"),
        (
            b"<html><head><script src=/app.js></script></head><body></body></html>",
            BLOCKED,
            "structure:scripts-only",
        ),
        (
            b"<html><body>  &nbsp; <!-- nothing --> <div></div></body></html>",
            BLOCKED,
            "structure:no-text",
        ),
        (b"<html><body><div></div>" + b" " * 600 + b"</body></html>", BLOCKED, "structure:no-text"),
        # pages that are not blocks
        (pages.SOFT_404, OK, ""),
        (pages.SOFT_404_BARE, OK, ""),
        (pages.ARTICLE_ABOUT_CAPTCHAS, OK, ""),
        (pages.RICH_PRODUCT, OK, ""),
        (pages.PLAIN_PRODUCT, OK, ""),
        (pages.shop_page(), OK, ""),
        (b"<html><body><a href=/home>home</a></body></html>", OK, ""),
        (b"<html><body>Hello</body></html>", OK, ""),
        # a real page with a vendor's sensor script (loaded on every page of protected sites)
        (
            pages.PLAIN_PRODUCT.replace(
                b"</head>",
                b"<script>window._pxAppId='PX1';</script>"
                b"<script src=/_Incapsula_Resource?SWJIYLWA=1></script>"
                b"</head>",
            ),
            OK,
            "",
        ),
        # navigation after a big head still counts as navigation; past 64 KiB it does not
        (b"<script>x</script>" + b" " * 20_000 + pages.NAV + b"<div class=g-recaptcha>", OK, ""),
        # (and 64 KiB of nothing but a script is a shell)
        (b"<script>x</script>" + b" " * 70_000 + pages.NAV, BLOCKED, "structure:scripts-only"),
        (b"<div class=g-recaptcha></div>" + b" " * 70_000 + pages.NAV, BLOCKED, "generic:captcha"),
        # markers past the first 16 KiB are not looked at
        (b"<p>" + b"x" * 20_000 + b"</p><div class=g-recaptcha>", OK, ""),
        # empty pages are their own verdict
        (b"", EMPTY, "empty"),
        (b" \r\n\t ", EMPTY, "empty"),
    ],
)
def test_detect_block__pages(body: bytes, verdict: BlockKind, reason: str) -> None:
    assert detect_block(200, HTML, body) == BlockVerdict(verdict, reason)


@pytest.mark.parametrize(
    ("status", "headers", "body", "verdict", "reason"),
    [
        (429, {}, b"", BLOCKED, "status:429"),
        (429, JSON, b'{"error": "slow down"}', BLOCKED, "status:429"),
        (403, HTML, pages.SOFT_404_BARE, BLOCKED, "status:403"),
        (403, HTML, pages.CLOUDFLARE_1020, BLOCKED, "vendor:cloudflare"),  # named by markers
        (403, HTML, pages.DATADOME_CAPTCHA, BLOCKED, "vendor:datadome"),
        (403, {}, b"<h1>Forbidden</h1>", BLOCKED, "status:403"),  # sniffed as HTML
        (403, JSON, b'{"error": "forbidden"}', OK, ""),  # an API's answer: a 4xx, not a block
        (403, HTML, b"", OK, ""),
        (503, HTML, pages.CLOUDFLARE_CHALLENGE, BLOCKED, "vendor:cloudflare"),
        (503, HTML, b"<h1>Service Unavailable</h1>", BLOCKED, "status:503"),
        (503, HTML, b"", OK, ""),  # plain maintenance: the status rules retry it
        (503, JSON, b'{"error": "maintenance"}', OK, ""),
        (500, HTML, pages.RECAPTCHA_LOGIN_WALL, OK, ""),  # errors are errors, not blocks
        (404, HTML, pages.AKAMAI_DENIED, OK, ""),
        (204, HTML, b"", OK, ""),
        (205, HTML, b"", OK, ""),
        (206, HTML, pages.shop_page(), OK, ""),
        (200, {}, pages.CLOUDFLARE_CHALLENGE, BLOCKED, "vendor:cloudflare"),  # sniffed
        (200, {"content-type": "TEXT/HTML"}, b"", EMPTY, "empty"),
        (200, {}, b"", EMPTY, "empty"),
        (
            200,
            {"content-type": "application/xhtml+xml"},
            pages.SPA_SHELL,
            BLOCKED,
            "structure:scripts-only",
        ),
        # JSON and other non-HTML bodies never meet the HTML heuristics
        (200, JSON, b'{"captcha": true, "message": "access denied"}', OK, ""),
        (200, JSON, b"", OK, ""),
        (200, {}, b'{"html": "<div class=g-recaptcha>"}', OK, ""),
        (200, {"content-type": "text/plain"}, b"verify you are human", OK, ""),
    ],
)
def test_detect_block__statuses_and_types(
    status: int, headers: dict[str, str], body: bytes, verdict: BlockKind, reason: str
) -> None:
    assert detect_block(status, headers, body) == BlockVerdict(verdict, reason)


@pytest.mark.parametrize(
    ("status", "body", "spider", "expected"),
    [
        (200, pages.shop_page(), True, BlockVerdict(BLOCKED, "spider")),
        (404, pages.SOFT_404, True, BlockVerdict(BLOCKED, "spider")),
        (200, pages.RECAPTCHA_LOGIN_WALL, False, BlockVerdict(OK)),
        (200, b"", False, BlockVerdict(OK)),  # the spider knows its empty pages
        (503, pages.CLOUDFLARE_CHALLENGE, False, BlockVerdict(BLOCKED, "status:503")),
        (403, pages.SOFT_404_BARE, False, BlockVerdict(BLOCKED, "status:403")),
        (429, b"", False, BlockVerdict(BLOCKED, "status:429")),
    ],
)
def test_spider_verdict(status: int, body: bytes, spider: bool, expected: BlockVerdict) -> None:
    assert detect_block(status, HTML, body, spider_verdict=spider) == expected


def test_a_block_page_holding_the_expected_content_is_suspect_not_dropped() -> None:
    calls: list[bytes] = []

    def has_product(body: bytes) -> bool:
        calls.append(body)
        return b'class="product"' in body

    # A product page (few links) that a vendor's challenge script was injected into.
    page = pages.PLAIN_PRODUCT.replace(b"</article>", b"<div id=px-captcha></div></article>")
    verdict = detect_block(200, HTML, page, has_expected=lambda: has_product(page))
    assert verdict == BlockVerdict(SUSPECT, "vendor:perimeterx")
    # The challenge itself has no product: blocked.
    body = pages.PERIMETERX_BLOCK
    assert detect_block(200, HTML, body, has_expected=lambda: has_product(body)).blocked
    # The check runs only when the heuristics call a page a block, never on the common path or
    # against the server's own word.
    calls.clear()
    for status, body in [(200, pages.RICH_PRODUCT), (429, pages.PLAIN_PRODUCT)]:
        detect_block(status, HTML, body, has_expected=lambda b=body: has_product(b))
    assert calls == []


def test_every_reason_is_in_the_bounded_set() -> None:
    bodies = [getattr(pages, n) for n in dir(pages) if n.isupper() and n != "CSS"]
    reasons = {detect_block(s, HTML, b).reason for s in (200, 403, 429) for b in [*bodies, b""]}
    reasons.add(detect_block(200, HTML, b"", spider_verdict=True).reason)
    assert reasons - {""} <= REASONS
    assert {r.partition(":")[0] for r in REASONS} == {
        "vendor",
        "generic",
        "structure",
        "status",
        "spider",
        "empty",
    }


@pytest.mark.parametrize(
    ("html", "length"),
    [
        (b"", 0),
        (b"<p>Hello world</p>", 10),
        (b"<script>var a = '<p>not text</p>';</script><p>ab</p>", 2),
        (b"<STYLE>p{color:red}</STYLE><!-- <p>hidden</p> --><p>a&amp;b</p>", 2),
        (b"<noscript>enable js</noscript><svg><text>x</text></svg>", 0),
    ],
)
def test_visible_text_length(html: bytes, length: int) -> None:
    assert visible_text_length(html) == length
    assert visible_text_length(html, stop_at=10_000) == length


def test_visible_text_length__chunked_count_sees_scripts_across_chunk_edges() -> None:
    script = b"<script>" + b"var x = 1;" * 1000 + b"</script>"  # 10 KB, spans chunks
    html = (b"<p>word</p>" + script) * 3 + b"<!--" + b"<p>gone</p>" * 500 + b"--><p>end</p>"
    assert visible_text_length(html, stop_at=10_000) == visible_text_length(html) == 15
    assert visible_text_length(b"<p>" + b"x" * 50_000 + b"</p>", stop_at=1500) >= 1500


# the patterns the linear scans stand for (searching on from every opener without a closer)
_REFERENCE_BLOCKS = re.compile(
    rb"<(script|style|noscript|template|svg)\b.*?</\1\s*>|<!--.*?-->", re.DOTALL | re.IGNORECASE
)
_REFERENCE_TAGS = re.compile(rb"<[^>]*>")


def _reference_text_length(html: bytes) -> int:
    text = _REFERENCE_TAGS.sub(b" ", _REFERENCE_BLOCKS.sub(b" ", html))
    text = re.sub(rb"&#?\w{1,8};", b" ", text)
    return len(text.translate(None, b" \t\n\r\f\v"))


_PIECES = [
    b"<script>",
    b"</script>",
    b"<SCRIPT a=1>",
    b"</Script >",
    b"<svg",
    b"</svg>",
    b"<style>",
    b"</style>",
    b"<!--",
    b"-->",
    b"<p>",
    b"</p>",
    b"<",
    b">",
    b"word",
    b" ",
    b"&amp;",
    b"<noscript>",
    b"</noscript>",
    b"<template>",
    b"</template>",
    b"<scripts>",
    b"-",
    b"x<y",
]


@pytest.mark.parametrize("seed", range(40))
def test_visible_text_length__the_same_as_the_patterns_on_any_markup(seed: int) -> None:
    rng = random.Random(seed)
    html = b"".join(rng.choice(_PIECES) for _ in range(rng.randrange(1, 400)))
    assert visible_text_length(html) == _reference_text_length(html), html


@pytest.mark.parametrize(
    "html",
    [
        b"<html><body>" + b"<script>x" * 7000,  # openers without closers: seconds a page before
        b"<svg a" * 10000,
        b"<!--x" * 12000,
        b"<p>words</p>" + b"<a" * 20000,  # a tag never closed by '>'
    ],
    ids=["unclosed-scripts", "unclosed-svg-tags", "unclosed-comments", "unclosed-tags"],
)
def test_pages_of_unclosed_blocks__judged_as_the_patterns_judge_them(html: bytes) -> None:
    # the patterns take seconds on 64 KiB of these: compared on the first 8 KiB
    assert visible_text_length(html[:8192]) == _reference_text_length(html[:8192])
    assert detect_block(200, HTML, html) == BlockVerdict(OK, "")  # text the patterns see
    assert detect_block(403, HTML, html) == BlockVerdict(BLOCKED, "status:403")
