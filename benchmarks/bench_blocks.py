"""Microseconds per response for the block classifier (``policy.blocks.detect_block``), which
runs on every fetched page.

Run: ``PYTHONPATH=src:. .venv/bin/python benchmarks/bench_blocks.py``. The common case is a
45 KB shop page with navigation near the top (target: a few µs); the others show the paths a
page takes when it has little or no navigation, and what block pages cost.
"""

from __future__ import annotations

import time

from tests import block_pages as pages

from crawlfleet.policy.blocks import detect_block

HTML = {"content-type": "text/html; charset=utf-8"}
RUNS = 2_000
TEXT_PAGE = (
    b"<html><head><title>On boots</title></head><body><article>" + b"<p>Walking the hills "
    b"of Porto in good boots is a pleasure; the cobbles are wet most mornings.</p>" * 560
)[:45_000]


def per_page_us(body: bytes, status: int = 200, runs: int = RUNS) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        detect_block(status, HTML, body)
    return (time.perf_counter() - start) / runs * 1e6


def main() -> None:
    cases = [
        ("45 KB shop page (common path)", pages.shop_page(), "target < 5"),
        ("  navigation only after 16 KiB", pages.shop_page(head_bytes=17_000), ""),
        ("  45 KB of inline script, no link", pages.shop_page(head_bytes=46_000), "worst case"),
        ("45 KB of text, few links", TEXT_PAGE, ""),
        ("product page, few links", pages.PLAIN_PRODUCT.replace(pages.REVIEW_FORM, b""), ""),
        ("  with a reCAPTCHA review form", pages.PLAIN_PRODUCT, ""),
        ("article about captchas", pages.ARTICLE_ABOUT_CAPTCHAS, ""),
        ("Cloudflare challenge", pages.CLOUDFLARE_CHALLENGE, ""),
        ("reCAPTCHA login wall", pages.RECAPTCHA_LOGIN_WALL, ""),
        ("SPA shell", pages.SPA_SHELL, ""),
    ]
    for name, body, note in cases:
        print(f"{name:34} {len(body):6} B {per_page_us(body):8.2f} us/page  {note}")
    # hostile markup: openers without closers (linear scans; the patterns alone took seconds)
    hostile = [
        ("<script>x x 7,000, no closer", b"<html><body>" + b"<script>x" * 7000),
        ("<svg a x 10,000, no '>'", b"<svg a" * 10000),
        ("<!--x x 12,000, no '-->'", b"<!--x" * 12000),
    ]
    for name, body in hostile:
        for status in (200, 403):
            us = per_page_us(body, status, runs=20)
            print(f"{name:34} {len(body):6} B {us:8.0f} us/page  status {status}")


if __name__ == "__main__":
    main()
