"""``Response`` and its selectors: parsel-equivalent CSS, decoding, links."""

from __future__ import annotations

import json
from typing import Any

import parsel
import pytest
from multidict import CIMultiDict

from crawlfleet.response import Headers, Response, detect_encoding
from crawlfleet.selectors import Selector, SelectorList, compile_css

URL = "https://shop.test/catalog/shoes/item-7?color=red"

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Trail Runner &amp; Co | Shop</title>
<link rel="canonical" href="https://shop.test/catalog/shoes/item-7">
<link rel="next" href="?page=2">
</head>
<body class="page product-page">
<nav class="menu" id="top">
  <ul>
    <li><a href="/women" class="menu-link">Women</a></li>
    <li><a href="/men" class="menu-link">Men &rsaquo; All</a></li>
    <li><a href="/kids/" class="menu-link">Kids</a></li>
    <li><a class="menu-link">No link</a></li>
  </ul>
</nav>
<!-- a comment between sections -->
<article class="product" data-sku="SKU-7">
  <h1>Trail Runner <em data-x>4711</em> Pro</h1>
  <span class="sku">SKU-7</span>
  <div class="offer">
    Price: <span class="price">&euro;129.95</span>
    <span class="old price">&euro;149.95</span>
    <p> </p>
  </div>
  <p class="desc">Light &amp; durable. <b>Water-proof</b>, <i>breathable</i>.&nbsp;Done.</p>
  <form action="/cart"><input type="hidden" name="sku" value="SKU-7">
  <input type="checkbox" name="gift" checked><button>Add</button></form>
  <ul class="related">
    <li class="card"><a class="product-link" href="item-8">Item 8</a> <span>&euro;10</span></li>
    <li class="card"><a class="product-link" href="../boots/item-9#reviews">Item 9</a></li>
    <li class="card"><a class="product-link" href="">Empty</a></li>
  </ul>
</article>
<div class="pager"><a class="prev" href="?page=0">&laquo; Prev</a>
<a class="next" href="?page=2">Next &raquo;</a></div>
<script>var x = "<a href='/not-a-link'>";</script>
<footer><p>&copy; 2026 Shop &mdash; <a href="mailto:help@shop.test">Mail</a></p></footer>
</body>
</html>
"""

HTML_HEADERS = {"Content-Type": "text/html; charset=utf-8"}


def response(
    body: str | bytes = PAGE, headers: dict[str, str] | None = None, **kw: Any
) -> Response:
    data = body.encode() if isinstance(body, str) else body
    return Response(URL, 200, HTML_HEADERS if headers is None else headers, data, **kw)


# -- CSS: the same answers as parsel --------------------------------------------------------

EQUIVALENT_QUERIES = [
    "h1::text",
    "h1 ::text",
    "h1 *::text",
    "title::text",
    "a::attr(href)",
    "a::attr( href )",
    "*::attr(data-x)",
    "nav a",
    "nav a, a.next, a.product-link",
    "a.next, nav a",
    ".price::text",
    ".offer::text",
    ".offer ::text",
    ".offer > ::text",
    ".offer > span::text",
    ".desc ::text",
    ".desc::text",
    "p::text",
    "li",
    "li.card > a",
    "ul.related li:nth-child(2) a::attr(href)",
    "a:not(.menu-link)::attr(href)",
    "article::attr(data-sku)",
    "article ::attr(class)",
    "span.price, h1::text",
    "h1::text, span.price::text",
    "a::attr(href), a::attr(class)",
    "footer ::text",
    "footer *",
    "script::text",
    "[data-sku] .sku::text",
    "meta[charset]",
    "article *::text",
    "a[href$='item-8']::text",
    "nothing-matches",
    "nothing-matches::text",
]


@pytest.mark.parametrize("query", EQUIVALENT_QUERIES)
def test_css_matches_parsel(query: str) -> None:
    expected = parsel.Selector(PAGE).css(query).getall()
    assert response().css(query).getall() == expected


CHAINED_QUERIES = [
    ("li.card", "a::attr(href)"),
    ("li.card", "li"),
    ("li.card", "::text"),
    ("li.card", "*::text"),
    ("li.card", " ::text"),
    ("article", "li a::text"),
    ("article", ".offer span::text"),
    ("article .offer", "article span"),
    ("li.card a", "li a"),
    ("ul.related", "li:first-child a::text"),
    ("nav", "a"),
    ("nav li", "a::text, a::attr(href)"),
    ("article", "div > ::text"),
    ("article", "::attr(class)"),
]


@pytest.mark.parametrize(("outer", "inner"), CHAINED_QUERIES)
def test_chained_css_matches_parsel(outer: str, inner: str) -> None:
    expected = parsel.Selector(PAGE).css(outer).css(inner).getall()
    assert response().css(outer).css(inner).getall() == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (".price::text", "€129.95"),
        ("title::text", "Trail Runner & Co | Shop"),
        (".offer > p::text", " "),
        ("nav a::text", "Women"),
        ("a.next::text", "Next »"),
        ("footer p::text", "© 2026 Shop — "),
    ],
)
def test_text_entities_and_whitespace(query: str, expected: str) -> None:
    assert response().css(query).get() == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("span.sku", '<span class="sku">SKU-7</span>'),
        ("a.next", '<a class="next" href="?page=2">Next »</a>'),
    ],
)
def test_get_of_an_element_is_its_outer_html(query: str, expected: str) -> None:
    assert response().css(query).get() == expected


@pytest.mark.parametrize(
    "query",
    ["h1::text span", "a::attr(href)::text", "", "  ", "a,", "a::nope", "a[", ":not("],
)
def test_bad_css_is_a_value_error(query: str) -> None:
    with pytest.raises(ValueError):
        response().css(query)


@pytest.mark.parametrize(
    ("query", "css", "pseudo", "deep"),
    [
        ("h1::text", "h1", "text", False),
        ("h1 ::text", "h1", "text", True),
        ("h1 *::text", "h1", "text", True),
        ("h1 > ::text", "h1 > *", "text", False),
        ("::text", "*", "text", False),
        ("*::attr(id)", "*", "attr", False),
        ('a[title="x::text"]', 'a[title="x::text" s]', "", False),
        ("a:is(.b, .c)::text", "a:is(.b, .c)", "text", False),
    ],
)
def test_compile_css(query: str, css: str, pseudo: str, deep: bool) -> None:
    (group,) = compile_css(query).groups
    assert (group.css, group.pseudo, group.deep) == (css, pseudo, deep)


def test_compile_css_splits_top_level_commas_only() -> None:
    groups = compile_css('a[title="x, y"], :is(h1, h2)::text').groups
    assert [g.css for g in groups] == ['a[title="x, y" s]', ":is(h1, h2)"]


# -- Selector and SelectorList --------------------------------------------------------------


def test_selector_list_helpers() -> None:
    cards = response().css("li.card")
    assert isinstance(cards, SelectorList)
    assert isinstance(cards[1:], SelectorList)
    assert len(cards[1:]) == 2
    assert isinstance(cards[0], Selector)
    assert cards.attrib == {"class": "card"}
    assert response().css("nothing").attrib == {}
    assert response().css("nothing").get() is None
    assert response().css("nothing").get("dflt") == "dflt"
    assert response().css("input[name=gift]").attrib == {
        "type": "checkbox",
        "name": "gift",
        "checked": "checked",  # as lxml reads a boolean attribute written without a value
    }


@pytest.mark.parametrize(
    ("regex", "expected"),
    [
        (r"[\d.]+", ["129.95", "149.95"]),
        (r"€(\d+)\.(\d+)", ["129", "95", "149", "95"]),
        (r"(?P<extract>\d+)\.", ["129", "149"]),
        (r"nope", []),
    ],
)
def test_re_matches_parsel(regex: str, expected: list[str]) -> None:
    ours = response().css(".offer span::text")
    assert ours.re(regex) == expected == parsel.Selector(PAGE).css(".offer span::text").re(regex)
    assert ours.re_first(regex) == (expected[0] if expected else None)


def test_re_replaces_entities_like_parsel() -> None:
    query = "p.desc"
    assert response().css(query).re(r"Light &amp; \w+") == ["Light &amp; durable"]
    assert response().css(query).re(r"Light &amp; \w+") == parsel.Selector(PAGE).css(query).re(
        r"Light &amp; \w+"
    )


def test_string_selectors() -> None:
    sel = response().css(".sku::text")[0]
    assert sel.root == "SKU-7"
    assert sel.get() == "SKU-7"
    assert sel.getall() == ["SKU-7"]
    assert sel.attrib == {}
    assert sel.css("a") == []
    assert sel.xpath(".").getall() == ["SKU-7"]  # parsel's answer for a string
    assert sel.xpath("..") == []


# -- XPath ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "//h1/text()",
        "//a/@href",
        "//li[@class='card']/a",
        "count(//a)",
        "//span[contains(@class, 'price')]/text()",
    ],
)
def test_xpath_matches_parsel(query: str) -> None:
    assert response().xpath(query).getall() == parsel.Selector(PAGE).xpath(query).getall()


def test_xpath_variables_and_chaining_from_css() -> None:
    page = response()
    assert page.xpath("//a[@class=$cls]/@href", cls="next").getall() == ["?page=2"]
    cards = page.css("li.card")
    assert cards.xpath("./a/@href").getall() == ["item-8", "../boots/item-9#reviews", ""]
    assert cards[0].xpath(".//span/text()").get() == "€10"
    assert page.xpath("//article").css("h1::text").getall() == ["Trail Runner ", " Pro"]
    assert page.xpath("//article")[0].attrib["data-sku"] == "SKU-7"


# -- decoding ------------------------------------------------------------------------------

CP1251_PAGE = '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251")


@pytest.mark.parametrize(
    ("body", "content_type", "declared", "codec", "bom"),
    [
        (b"<p>x</p>", None, None, "utf-8", 0),
        (b"\xef\xbb\xbf<p>x</p>", "text/html; charset=cp1251", None, "utf-8", 3),
        (b"\xff\xfe<\x00p\x00>\x00", None, None, "utf-16-le", 2),
        (b"<p>x</p>", "text/html; charset=ISO-8859-1", None, "cp1252", 0),
        (b"<p>x</p>", 'text/html; charset="utf-8"', None, "utf-8", 0),
        (CP1251_PAGE, "text/html", None, "cp1251", 0),
        (CP1251_PAGE, "text/html; charset=utf-8", None, "utf-8", 0),
        (
            b'<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">',
            None,
            None,
            "koi8-r",
            0,
        ),
        (b" " * 2100 + b'<meta charset="cp1251">', None, None, "utf-8", 0),
        (b"<p>x</p>", "text/html; charset=bogus-enc", None, "utf-8", 0),
        (b"<p>x</p>", "text/html; charset=base64", None, "utf-8", 0),
        (b'<meta charset="utf-16">', None, None, "utf-8", 0),
        (b"<p>x</p>", "text/html; charset=cp1251", "koi8-r", "koi8-r", 0),
        (b"<p>x</p>", None, "no-such-codec", "utf-8", 0),
    ],
)
def test_detect_encoding(
    body: bytes, content_type: str | None, declared: str | None, codec: str, bom: int
) -> None:
    assert detect_encoding(body, content_type, declared) == (codec, bom)


@pytest.mark.parametrize(
    ("body", "headers", "text"),
    [
        (CP1251_PAGE, {}, '<meta charset="windows-1251"><p>Привет</p>'),
        (b"\xef\xbb\xbfcaf\xc3\xa9", {}, "café"),
        (b"caf\xe9 \xff", {"content-type": "text/plain"}, "caf\ufffd \ufffd"),
        ("café".encode("latin-1"), {"CONTENT-TYPE": "text/plain; charset=latin-1"}, "café"),
    ],
)
def test_text_decodes_and_never_raises(body: bytes, headers: dict[str, str], text: str) -> None:
    assert response(body, headers).text == text


def test_css_on_a_non_utf8_page() -> None:
    page = response(CP1251_PAGE, {})
    assert page.css("p::text").get() == "Привет"
    assert page.xpath("//p/text()").get() == "Привет"


def test_json() -> None:
    data = {"sku": "A1", "price": 9.5, "name": "café"}
    assert response(b"\xef\xbb\xbf" + json.dumps(data).encode(), {}).json() == data
    with pytest.raises(ValueError):
        response(b"<html>", {}).json()


# -- headers, attributes ---------------------------------------------------------------------


def test_headers_are_case_insensitive_and_kept() -> None:
    page = response(headers={"Content-Type": "text/html", "Set-Cookie": "sid=secret"})
    assert page.headers["content-type"] == "text/html"
    assert page.headers.get("CONTENT-TYPE") == "text/html"
    assert "set-cookie" in page.headers
    assert list(page.headers) == ["Content-Type", "Set-Cookie"]
    assert "secret" not in repr(page.headers)
    multi = CIMultiDict([("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
    assert response(headers=multi).headers is multi  # type: ignore[arg-type]
    assert isinstance(response(headers={}).headers, Headers)


def test_attributes() -> None:
    page = Response(URL, 404, {}, b"", meta={"k": 1}, depth=3, request_url="https://shop.test/old")
    assert (page.url, page.status, page.body, page.meta, page.depth) == (URL, 404, b"", {"k": 1}, 3)
    assert page.request_url == "https://shop.test/old"
    assert response().request_url == URL
    assert page.css("p") == []
    assert "user:[secure]@" in repr(Response("https://user:pw@h.test/", 200, {}, b""))


# -- links ---------------------------------------------------------------------------------


def test_follow_all_with_a_css_query() -> None:
    requests = list(response().follow_all("nav a, a.next, a.product-link"))
    # document order, as parsel's union; the <a> without href and the empty href are skipped
    assert [r.href for r in requests] == [
        "/women",
        "/men",
        "/kids/",
        "item-8",
        "../boots/item-9#reviews",
        "?page=2",
    ]
    assert {r.base for r in requests} == {URL}
    assert requests[0].url == "https://shop.test/women"
    assert requests[5].url == "https://shop.test/catalog/shoes/item-7?page=2"


@pytest.mark.parametrize(
    ("anchor", "href"),
    [
        ('<a href=" /kids/\n">k</a>', "/kids/"),
        ('<a href="\t">k</a>', None),
        ("<a>k</a>", None),
        ('<a href="?q=a&amp;b=1">k</a>', "?q=a&b=1"),
        ('<area href="/map">', "/map"),
    ],
)
def test_follow_all_strips_and_skips_hrefs(anchor: str, href: str | None) -> None:
    hrefs = [r.href for r in response(f"<body>{anchor}</body>").follow_all("a, area")]
    assert hrefs == ([href] if href else [])


@pytest.mark.parametrize(
    ("kwargs", "hrefs"),
    [
        ({"css": "a.next"}, ["?page=2"]),
        ({"css": "link"}, ["https://shop.test/catalog/shoes/item-7", "?page=2"]),
        ({"css": "li.card"}, []),
        ({"css": "a.next::attr(href), a.prev::attr(href)"}, ["?page=0", "?page=2"]),
        ({"css": "li.card a::text"}, ["Item 8", "Item 9", "Empty"]),
        ({"xpath": "//a[@class='next']"}, ["?page=2"]),
        (
            {"xpath": "//li/a/@href"},
            ["/women", "/men", "/kids/", "item-8", "../boots/item-9#reviews"],
        ),
        ({"xpath": "//h1"}, []),
    ],
)
def test_follow_all_sources(kwargs: dict[str, str], hrefs: list[str]) -> None:
    assert [r.href for r in response().follow_all(**kwargs)] == hrefs


def test_follow_all_with_urls_and_selectors_and_kwargs() -> None:
    page = response()
    items: list[str | Selector] = ["/a", "", *page.css("li.card a"), *page.css("h1")]
    requests = list(page.follow_all(items, "parse_item", priority=5, meta={"m": 1}))
    assert [r.href for r in requests] == ["/a", "item-8", "../boots/item-9#reviews"]
    assert all(r.callback == "parse_item" and r.priority == 5 for r in requests)
    assert requests[0].meta == {"m": 1}


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"css_or_urls": "a", "css": "a"}, {"css": "a", "xpath": "//a"}, {"css_or_urls": []}],
)
def test_follow_all_needs_exactly_one_source(kwargs: dict[str, Any]) -> None:
    if kwargs == {"css_or_urls": []}:
        assert list(response().follow_all(**kwargs)) == []
        return
    with pytest.raises(ValueError):
        response().follow_all(**kwargs)


@pytest.mark.parametrize(
    ("target", "href"),
    [
        ("item-8", "item-8"),
        ("https://other.test/x", "https://other.test/x"),
        ("a.next", "?page=2"),
        ("a.next::attr(href)", "?page=2"),
        ("nav li:nth-child(3) a", "/kids/"),
        ("link[rel=next]", "?page=2"),
    ],
)
def test_follow(target: str, href: str) -> None:
    page = response()
    arg: str | Selector = (
        target if target in {"item-8", "https://other.test/x"} else page.css(target)[0]
    )
    request = page.follow(arg, callback="cb", fetcher="browser")
    assert (request.href, request.base, request.callback, request.fetcher) == (
        href,
        URL,
        "cb",
        "browser",
    )


@pytest.mark.parametrize("query", ["h1", "nav li:nth-child(4) a"])
def test_follow_refuses_selectors_without_a_link(query: str) -> None:
    page = response()
    with pytest.raises(ValueError):
        page.follow(page.css(query)[0])


@pytest.mark.parametrize(
    ("head", "link", "joined"),
    [
        ("", "x", "https://shop.test/catalog/shoes/x"),
        ('<base href="/deep/dir/">', "x", "https://shop.test/deep/dir/x"),
        ('<BASE HREF=" https://cdn.test/b/ ">', "x", "https://cdn.test/b/x"),
        ('<base target="_blank">', "x", "https://shop.test/catalog/shoes/x"),
        ('<base href="">', "/y", "https://shop.test/y"),
    ],
)
def test_base_href(head: str, link: str, joined: str) -> None:
    html = f'<html><head>{head}</head><body><a href="{link}">l</a></body></html>'
    assert response(html).urljoin(link) == joined
    parsed = response(html)
    (request,) = parsed.follow_all("a")
    assert request.url == joined


def test_parse_size_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Response, "max_parse_size", 64)
    html = '<p><a href="/early">e</a></p>' + " " * 100 + '<a href="/late">l</a>'
    page = response(html)
    assert [r.href for r in page.follow_all("a")] == ["/early"]
    assert page.xpath("//a/@href").getall() == ["/early", "/late"]  # lxml sees the whole page


NESTED = """<html><body><div class="x">a<div class="x">b<p>c</p>d</div>e<span>f</span>g</div>
<div><script>s</script>h</div></body></html>"""


@pytest.mark.parametrize(
    "query",
    [
        "div::text",
        "div.x::text",
        "div > div::text",
        "*:not(script)::text",
        "div::text, p::text",
        "body > div ::text",
        "div.x::attr(class)",
    ],
)
def test_nested_matches_keep_document_order(query: str) -> None:
    expected = parsel.Selector(NESTED).css(query).getall()
    assert response(NESTED).css(query).getall() == expected


@pytest.mark.parametrize(
    ("html", "query", "parsels"),
    [
        # lexbor builds the browser's (HTML5) tree, libxml2 another; the answers are parsel's
        ("<input checked>", "input::attr(checked)", ["checked"]),
        ("<table><tr><td>1</td></tr></table>", "table > tbody > tr td::text", []),
        ("<html>\n<head></head><body>x</body>\n</html>", "html::text", ["\n", "\n"]),
    ],
)
def test_parser_differences_give_parsels_answer(html: str, query: str, parsels: list[str]) -> None:
    assert parsel.Selector(html).css(query).getall() == parsels
    assert response(html).css(query).getall() == parsels


def test_parse_truncated__says_when_selectors_read_a_cut_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Response, "max_parse_size", 200)  # the documented knob, scaled down
    head = b'<html><body><a href="/near">near</a>'
    tail = b"<p>filler</p>" * 30 + b'<a href="/far">far</a></body></html>'
    cut = Response("https://shop.test/", 200, {"Content-Type": "text/html"}, head + tail)
    assert not cut.parse_truncated  # nothing parsed yet
    hrefs = [r.url for r in cut.follow_all("a")]
    assert hrefs == ["https://shop.test/near"]  # what the cap costs: the far link is not seen
    assert cut.parse_truncated
    whole = Response("https://shop.test/", 200, {"Content-Type": "text/html"}, head)
    assert len(list(whole.follow_all("a"))) == 1
    assert not whole.parse_truncated
