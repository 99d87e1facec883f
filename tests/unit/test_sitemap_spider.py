"""A spider's sitemaps (Scrapy's SitemapSpider attributes): rules, follow, alternates, robots.txt
Sitemap: lines, the cross-host rule, lastmod on the requests; and what a sitemap page yields is
listed: no links cap, no URL-shape budget, its sitemaps judged by the sitemap rules."""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from crawlfleet.data.captures import Provenance
from crawlfleet.errors import SitemapError
from crawlfleet.response import Response
from crawlfleet.spider import SITEMAP_CALLBACK, Request, Spider

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


class Shop(Spider):
    name = "shop"
    sitemap_urls = ["https://a.test/robots.txt"]
    sitemap_rules = [("/product/", "parse_product"), ("/category/", "parse")]
    sitemap_follow = ["products"]

    def parse_product(self, response: Response) -> Any:
        return None


def page(url: str, body: bytes, **meta: Any) -> Response:
    return Response(url, 200, {}, body, meta=meta)


def urlset(*locs: str, extra: str = "") -> bytes:
    entries = "".join(
        f"<url><loc>{loc}</loc><lastmod>2024-05-01</lastmod>{extra}</url>" for loc in locs
    )
    return gzip.compress(f"<urlset {NS}>{entries}</urlset>".encode())


def test_start_requests_name_the_sitemaps() -> None:
    (req,) = Shop().start_requests()
    assert (req.url, req.callback_name) == ("https://a.test/robots.txt", SITEMAP_CALLBACK)
    assert Shop().scope_hosts() == ["a.test"] and Shop().seed_hosts() == {"a.test"}


def test_robots_txt_lines_become_sitemap_requests_that_carry_its_host() -> None:
    robots = b"User-agent: *\nSitemap: https://cdn.test/index.xml\n"
    (req,) = Shop()._parse_sitemap(page("https://a.test/robots.txt", robots))
    assert (req.url, req.callback_name) == ("https://cdn.test/index.xml", SITEMAP_CALLBACK)
    assert req.meta == {"sitemap_hosts": ["a.test"]}


def test_an_index_follows_what_sitemap_follow_names() -> None:
    body = (
        f"<sitemapindex {NS}><sitemap><loc>https://cdn.test/products-1.xml.gz</loc></sitemap>"
        "<sitemap><loc>https://cdn.test/blog.xml</loc></sitemap>"
        "<sitemap><loc>https://evil.test/products-2.xml</loc></sitemap></sitemapindex>"
    ).encode()
    reqs = list(
        Shop()._parse_sitemap(page("https://cdn.test/index.xml", body, sitemap_hosts=["a.test"]))
    )
    # products-1 only: blog is not followed, evil.test is neither the sitemap's host nor the
    # robots.txt's
    assert [(r.url, r.callback_name, r.meta) for r in reqs] == [
        ("https://cdn.test/products-1.xml.gz", SITEMAP_CALLBACK, {"sitemap_hosts": ["a.test"]})
    ]


def test_a_urlset_goes_to_the_rules_with_lastmod_and_the_cross_host_rule() -> None:
    body = urlset(
        "https://a.test/product/1",
        "https://a.test/category/toys",
        "https://a.test/about",  # no rule: not crawled
        "https://cdn.test/product/2",  # the sitemap's own host
        "https://other.test/product/3",  # refused
    )
    reqs: list[Request] = list(
        Shop()._parse_sitemap(
            page("https://cdn.test/products-1.xml.gz", body, sitemap_hosts=["a.test"])
        )
    )
    assert [(r.url, r.callback_name, r.lastmod) for r in reqs] == [
        ("https://a.test/product/1", "parse_product", 1_714_521_600.0),
        ("https://a.test/category/toys", "parse", 1_714_521_600.0),
        ("https://cdn.test/product/2", "parse_product", 1_714_521_600.0),
    ]


def test_without_robots_a_sitemap_lists_its_own_host_only() -> None:
    body = urlset("https://a.test/product/1", "https://b.test/product/2")
    reqs = list(Shop()._parse_sitemap(page("https://a.test/s.xml.gz", body)))
    assert [r.url for r in reqs] == ["https://a.test/product/1"]


def test_alternates_when_asked() -> None:
    class Alt(Shop):
        sitemap_alternate_links = True

    link = '<xhtml:link xmlns:xhtml="http://www.w3.org/1999/xhtml" rel="alternate" hreflang="de" href="https://a.test/de/product/1"/>'
    body = urlset("https://a.test/product/1", extra=link)
    assert [r.url for r in Shop()._parse_sitemap(page("https://a.test/s.xml", body))] == [
        "https://a.test/product/1"
    ]
    assert [r.url for r in Alt()._parse_sitemap(page("https://a.test/s.xml", body))] == [
        "https://a.test/product/1",
        "https://a.test/de/product/1",
    ]


def test_sitemap_filter_drops_entries() -> None:
    class Filtered(Shop):
        def sitemap_filter(self, entries: Any) -> Any:
            return (e for e in entries if not e.loc.endswith("/1"))

    body = urlset("https://a.test/product/1", "https://a.test/product/2")
    reqs = list(Filtered()._parse_sitemap(page("https://a.test/s.xml", body)))
    assert [r.url for r in reqs] == ["https://a.test/product/2"]


def test_not_a_sitemap_is_a_sitemap_error() -> None:
    with pytest.raises(SitemapError, match="not a sitemap"):
        list(Shop()._parse_sitemap(page("https://a.test/s.xml", b"<html><body>404</body></html>")))


def test_what_a_sitemap_lists_is_listed_and_not_capped() -> None:
    from crawlfleet.model import Job, JobState
    from crawlfleet.policy.traps import TrapRules
    from crawlfleet.worker.extract import JobRuntime

    job = Job(1, "shop", "shop.py", JobState.RUNNING, {}, 0.0)
    rt = JobRuntime(job, Shop, TrapRules(max_links_per_page=2))
    body = urlset(*(f"https://a.test/product/{n}" for n in range(5)))
    response = page("https://a.test/s.xml", body)
    out = rt.process(
        response,
        page_url="https://a.test/s.xml",
        callback=SITEMAP_CALLBACK,
        depth=0,
        fetched_at=0.0,
        warc=Provenance(),
        found_by=7,
    )
    assert len(out.discovered) == 5 and out.links_dropped == 0  # no max_links_per_page
    assert all(r.listed and r.found_by == 7 and r.lastmod for r in out.discovered)
