from __future__ import annotations

import pytest
from multidict import CIMultiDict

from crawlfleet.policy.mime import content_type, extract_mime_type
from crawlfleet.response import Response


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["text/html"], "text/html"),
        (["TEXT/HTML;CHARSET=UTF-8"], "text/html; charset=UTF-8"),
        # the last type wins (Fetch standard, and Scrapy)
        (
            ["text/plain; charset=utf-8", "text/html; charset=iso-8859-1"],
            "text/html; charset=iso-8859-1",
        ),
        (["text/html, text/plain"], "text/plain"),
        # ... keeping an earlier charset only for the same type
        (["text/html; charset=shift_jis", "text/html"], "text/html; charset=shift_jis"),
        (["text/html; charset=gbk", "text/plain"], "text/plain"),
        # what is no type is skipped
        (["text/html", "*/*"], "text/html"),
        (["text/html", "nonsense", ""], "text/html"),
        (['text/html; charset="a,b"'], "text/html; charset=a,b"),
        (["nonsense"], None),
        ([], None),
    ],
)
def test_extract_mime_type(values: list[str], expected: str | None) -> None:
    assert extract_mime_type(values) == expected


def test_content_type_reads_every_header_of_a_multidict_and_plain_mappings() -> None:
    two = CIMultiDict([("Content-Type", "text/plain"), ("content-type", "text/html")])
    assert content_type(two) == "text/html"
    assert content_type({"CONTENT-TYPE": "application/json"}) == "application/json"
    assert content_type({}) is None


def test_a_response_decodes_by_its_last_content_type() -> None:
    headers = CIMultiDict(
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Type", "text/html; charset=koi8-r"),
        ]
    )
    response = Response("http://h.test/", 200, headers, "<p>привет</p>".encode("koi8-r"))
    assert response.encoding == "koi8-r"
    assert response.css("p::text").get() == "привет"
