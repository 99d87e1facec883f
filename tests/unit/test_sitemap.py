"""The sitemap reader: urlsets and indexes, gzip, lastmod, alternates, malformed files as one
named error, 50,000 entries read with flat memory."""

from __future__ import annotations

import gzip

import pytest

from crawlfleet.errors import SitemapError
from crawlfleet.sitemap import (
    SitemapEntry,
    allowed_hosts,
    open_sitemap,
    parse_lastmod,
    sitemaps_in_robots,
)

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XHTML = 'xmlns:xhtml="http://www.w3.org/1999/xhtml"'


def urlset(*entries: str, ns: str = NS) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>{"".join(entries)}</urlset>'.encode()
    )


def test_a_urlset() -> None:
    body = urlset(
        "<url><loc> https://a.test/p/1 </loc><lastmod>2024-05-01</lastmod></url>",
        "<url><loc>https://a.test/p/2</loc><changefreq>daily</changefreq></url>",
        "<url><loc></loc></url>",  # no loc: nothing
        "<url><loc>https://a.test/p/3</loc><lastmod>yesterday</lastmod></url>",
    )
    sitemap = open_sitemap(body)
    assert sitemap.kind == "urlset"
    assert list(sitemap) == [
        SitemapEntry("https://a.test/p/1", 1_714_521_600.0),
        SitemapEntry("https://a.test/p/2"),
        SitemapEntry("https://a.test/p/3"),  # a bad lastmod is ignored
    ]


def test_an_index_gzipped() -> None:
    body = gzip.compress(
        f"<sitemapindex {NS}><sitemap><loc>https://a.test/s1.xml.gz</loc>"
        "<lastmod>2024-05-01T10:00:00+02:00</lastmod></sitemap>"
        "<sitemap><loc>https://a.test/s2.xml</loc></sitemap></sitemapindex>".encode()
    )
    sitemap = open_sitemap(body)
    assert sitemap.kind == "sitemapindex"
    assert [(e.loc, e.lastmod) for e in sitemap] == [
        ("https://a.test/s1.xml.gz", 1_714_550_400.0),
        ("https://a.test/s2.xml", None),
    ]


def test_alternates_and_no_namespace() -> None:
    body = urlset(
        "<url><loc>https://a.test/en</loc>"
        '<xhtml:link rel="alternate" hreflang="de" href="https://a.test/de"/>'
        '<xhtml:link rel="alternate" hreflang="en" href="https://a.test/en"/>'
        '<xhtml:link rel="canonical" href="https://a.test/x"/></url>',
        ns=XHTML,
    )
    (entry,) = open_sitemap(body)
    assert entry.alternates == ("https://a.test/de",)
    assert entry.locs() == ["https://a.test/en"]
    assert entry.locs(alternate=True) == ["https://a.test/en", "https://a.test/de"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "empty"),
        (b"<html><body>Not found</body></html>", "not a sitemap: no <urlset>"),
        (b"<html><urlset><url><loc>https://a.test/</loc></url></urlset></html>", "root element"),
        (b"User-agent: *\nDisallow:", "malformed XML"),
        (urlset("<url><loc>https://a.test/1</loc></url>")[:-12], "malformed XML"),  # cut short
        (gzip.compress(urlset("<url><loc>https://a.test/1</loc></url>"))[:-12], "gzip"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
    ],
)
def test_what_is_not_a_sitemap_is_one_named_error(body: bytes, why: str) -> None:
    with pytest.raises(SitemapError, match=why):
        list(open_sitemap(body))


def test_entities_are_never_expanded() -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY x SYSTEM "file:///etc/passwd">'
        b'<!ENTITY b "bbbbbbbbbbbbbbbbbbbbbbbb">]>'
        b"<urlset><url><loc>https://a.test/&x;&b;</loc></url></urlset>"
    )
    entries = list(open_sitemap(body))
    assert all("root:" not in e.loc and "bbbb" not in e.loc for e in entries)


def test_a_bomb_stops_at_the_cap() -> None:
    body = gzip.compress(urlset(*["<url><loc>https://a.test/x</loc></url>"] * 20_000))
    with pytest.raises(SitemapError, match="larger than 100,000 bytes"):
        list(open_sitemap(body, max_size=100_000))


def test_fifty_thousand_urls_are_read_with_flat_memory() -> None:
    n = 50_000
    xml = urlset(
        *(
            f"<url><loc>https://a.test/product/{i}</loc><lastmod>2024-01-02</lastmod></url>"
            for i in range(n)
        )
    )
    body = gzip.compress(xml)
    assert len(xml) > 3_500_000  # ~3.9 MB once inflated
    sitemap = open_sitemap(body)
    count = held = 0
    for entry in sitemap:
        count += 1
        held = max(held, sitemap.held)
        assert entry.lastmod == 1_704_153_600.0
    assert count == n
    # the tree never grows: an entry goes once read; it holds only what the parser read ahead
    # (one chunk of the stream, a few hundred entries), whatever the file's size
    assert held < 1_000


def test_sitemaps_in_robots() -> None:
    text = (
        "User-agent: *\nDisallow: /cart\n"
        "Sitemap: https://a.test/sitemap.xml\nsitemap:https://cdn.test/s2.xml.gz\n"
    )
    assert sitemaps_in_robots(text) == ["https://a.test/sitemap.xml", "https://cdn.test/s2.xml.gz"]
    assert sitemaps_in_robots("User-agent: *\n") == []


def test_allowed_hosts() -> None:
    assert allowed_hosts("A.test") == {"a.test"}
    assert allowed_hosts("cdn.test", ["a.test", ""]) == {"cdn.test", "a.test"}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2024", 1_704_067_200.0),
        ("2024-05", 1_714_521_600.0),
        ("2024-05-01", 1_714_521_600.0),
        ("2024-05-01T00:00Z", 1_714_521_600.0),
        ("2024-05-01T02:00:00+02:00", 1_714_521_600.0),
        ("2024-05-01T00:00:00.5Z", 1_714_521_600.5),
        (" 2024-05-01 ", 1_714_521_600.0),
        ("", None),
        (None, None),
        ("May 1st", None),
        ("2024-13-01", None),
    ],
)
def test_parse_lastmod(text: str | None, seconds: float | None) -> None:
    assert parse_lastmod(text) == seconds
