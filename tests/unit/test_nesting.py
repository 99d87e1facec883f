"""How deep a page nests, read off its tags before parsing: the bound that keeps a parse cheap."""

from __future__ import annotations

import time

import pytest
from selectolax.lexbor import LexborHTMLParser

from crawlfleet.errors import TooComplex
from crawlfleet.response import Response
from crawlfleet.selectors.nesting import _start_tags_at_most, measure, over


def nested(levels: int, tag: str = "div") -> str:
    inner = f"{f'<{tag}>' * levels}<p class=x>deep</p>{f'</{tag}>' * levels}"
    return f"<html><body>{inner}</body></html>"


@pytest.mark.parametrize(
    ("markup", "depth"),
    [
        ("<html><body><div><p>a</p><p>b</p></div></body></html>", 4),
        ("<body>" + "<p>text" * 5000, 2),  # each <p> closes the one before
        ("<ul>" + "<li>item" * 5000 + "</ul>", 2),
        ("<table>" + "<tr><td>a<td>b" * 3000 + "</table>", 3),
        ("<div>" + "<br><img src=x><input>" * 3000 + "</div>", 1),  # void elements
        ("<div>" + "<script>" + "<div>" * 5000 + "</script>" + "</div>", 1),  # raw text
        ("<noscript>" + "<div>" * 1500, 1501),  # parsed as elements, by both parsers
        ("<div><!--" + "<div>" * 5000 + "--></div>", 1),  # a comment
        ("<div><span></div>" * 5000, 2),  # an end tag closes what it matches, and all above
        ("<ul><li>" * 300, 600),  # a list in an item does not close the outer item
        (nested(3000), 3003),
        ("<div>" + "</zzz>" * 5000, 1),  # stray end tags cost nothing and close nothing
    ],
)
def test_measure__follows_the_parsers_stack_where_it_matters(markup: str, depth: int) -> None:
    assert measure(markup).depth == depth
    assert measure(markup.encode()).depth == depth
    # the gate that skips the walk is a bound: never below the depth, nor is its rough first
    # count, whatever settles it
    assert _start_tags_at_most(markup) >= depth <= _start_tags_at_most(markup.encode())
    for enough in (0, depth, 10**9):
        assert _start_tags_at_most(markup, enough) >= depth
        assert _start_tags_at_most(markup.encode(), enough) >= depth


def test_measure__agrees_with_lexbor_on_plain_nesting() -> None:
    tree = LexborHTMLParser(nested(200))
    node, levels = tree.css_first("p.x"), 0
    while node is not None and node.parent is not None:
        node, levels = node.parent, levels + 1
    assert measure(nested(200)).depth == levels


def test_over__names_the_bound_and_is_cheap_for_pages_with_few_tags() -> None:
    assert over(nested(100), 1000, 10**8) is None
    assert "nested more than 1000 levels" in (over(nested(5000), 1000, 10**8) or "")
    wide = "<body>" + ("<div>" * 900 + "</div>" * 900) * 50  # never deep, but costly
    assert "too costly" in (over(wide, 1000, 10**7) or "")
    started = time.perf_counter()
    assert over(nested(100_000).encode(), 1000, 10**8) is not None
    assert time.perf_counter() - started < 2.0, "linear: lexbor alone takes seconds here"


def test_response__a_page_past_the_nesting_bound_raises_too_complex_for_css_and_xpath() -> None:
    page = Response("http://a.test/", 200, {"content-type": "text/html"}, nested(5000).encode())
    with pytest.raises(TooComplex, match="nested more than 1000"):
        page.css("p.x::text").get()
    with pytest.raises(TooComplex):
        page.xpath("//p/text()").get()
    assert page.too_complex is not None
    fine = Response("http://a.test/", 200, {}, nested(900).encode())
    assert fine.css("p.x::text").get() == "deep"
    assert fine.xpath("//p/text()").get() == "deep", "lxml answers at this depth"
    assert fine.too_complex is None
