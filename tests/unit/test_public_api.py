"""The public API is a contract: this pins what ``import crawlfleet`` offers."""

from __future__ import annotations

import crawlfleet


def test_public_api__is_exactly_the_documented_names() -> None:
    assert sorted(crawlfleet.__all__) == [
        "CrawlfleetError",
        "Request",
        "Response",
        "Selector",
        "SelectorList",
        "Spider",
        "__version__",
    ]
    for name in crawlfleet.__all__:
        assert getattr(crawlfleet, name) is not None


def test_public_api__the_design_example_imports() -> None:
    from crawlfleet import Response, Spider

    assert issubclass(Spider, object)
    assert Response.__name__ == "Response"
