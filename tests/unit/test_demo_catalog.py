"""The demo shop's catalog and pages: deterministic, realistic, with known broken products."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.pages import DynamicLinks, LinkStyle, Renderer, StaticLinks, robots_txt
from crawlfleet.demo.spider import Product, parse_price

HREF = re.compile(r'<a [^>]*href="([^"]*)"')


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog()


def test_same_seed_same_shop(catalog: Catalog) -> None:
    again = Catalog()
    assert again.products == catalog.products
    assert Catalog(seed=8).products != catalog.products


def test_about_two_percent_invalid(catalog: Catalog) -> None:
    invalid = catalog.invalid_skus()
    assert len(invalid) == 40
    reasons = {p.invalid_reason for p in catalog.products if not p.valid}
    assert reasons == {"price_text", "price_missing", "empty_name"}
    assert len(catalog.expected_records()) == len(catalog.products) - len(invalid)


def test_expected_records_pass_the_model(catalog: Catalog) -> None:
    records = catalog.expected_records()
    assert len({r["sku"] for r in records}) == len(records)
    for record in records:
        assert Product.model_validate(record).model_dump() == record


@pytest.mark.parametrize("reason", ["price_text", "price_missing", "empty_name"])
def test_invalid_products_fail_the_model(catalog: Catalog, reason: str) -> None:
    product = next(p for p in catalog.products if p.invalid_reason == reason)
    record = product.record() | {"price": parse_price(product.price_text)}
    if reason == "empty_name":
        record["name"] = None
    with pytest.raises(ValidationError):
        Product.model_validate(record)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("€12.34", 12.34), (" €1,234.50 ", 1234.5), ("Call us", "Call us"), (None, None)],
)
def test_parse_price(text: str | None, expected: float | str | None) -> None:
    assert parse_price(text) == expected


@pytest.mark.parametrize("links", [DynamicLinks(), StaticLinks()], ids=["dynamic", "static"])
def test_product_page_weight_and_links(catalog: Catalog, links: LinkStyle) -> None:
    renderer = Renderer(catalog, links)
    for product in catalog.products[:50]:
        html = renderer.product(product.sku)
        assert html is not None
        assert 40_000 <= len(html.encode()) <= 50_000
        hrefs = HREF.findall(html)
        assert 215 <= len(hrefs) <= 245
        assert f"/cart/add?sku={product.sku}" in hrefs
        assert 'type="application/ld+json"' in html
        assert html.count('class="product-link"') >= 6


def test_pages_link_duplicate_spellings(catalog: Catalog) -> None:
    renderer = Renderer(catalog, DynamicLinks())
    html = renderer.product(catalog.products[0].sku)
    assert html is not None
    hrefs = HREF.findall(html)
    assert any("#" in h for h in hrefs)
    assert any("?sid=" in h for h in hrefs)
    assert any(";jsessionid=" in h for h in hrefs)
    assert "/category/kitchen?page=1&sort=name" in hrefs
    assert "/category/kitchen?sort=name&page=1" in hrefs


def test_listing_pages_cover_every_product(catalog: Catalog) -> None:
    renderer = Renderer(catalog, StaticLinks())
    seen: set[str] = set()
    for category in catalog.categories:
        for page in range(1, catalog.page_count(category.slug) + 1):
            html = renderer.category(category.slug, page)
            assert html is not None
            seen.update(re.findall(r'class="product-link" href="/product/(CF-\d{6})', html))
        assert renderer.category(category.slug, catalog.page_count(category.slug) + 1) is None
    assert seen == {p.sku for p in catalog.products}


def test_robots_disallows_cart() -> None:
    lines = robots_txt().splitlines()
    assert "User-agent: *" in lines
    assert "Disallow: /cart/" in lines


def test_trap_links_only_when_on(catalog: Catalog) -> None:
    assert "/calendar/" not in (Renderer(catalog, DynamicLinks()).home())
    trapped = Renderer(catalog, DynamicLinks(), trap=True)
    assert 'href="/calendar/2024/01"' in trapped.home()
    assert 'class="next" href="/calendar/2025/01"' in trapped.calendar(2024, 12)


def test_spider_extraction_matches_the_catalog(catalog: Catalog) -> None:
    """``extract_product`` on rendered pages: valid products give their expected record,
    broken ones a dict the model rejects."""
    from parsel import Selector

    from crawlfleet.demo.spider import extract_product

    renderer = Renderer(catalog, DynamicLinks())
    broken = {p.sku for p in catalog.products if not p.valid}
    for product in [*catalog.products[:100], *(catalog.product(s) for s in broken)]:
        assert product is not None
        html = renderer.product(product.sku)
        assert html is not None
        record = extract_product(Selector(text=html))
        assert record is not None
        if product.valid:
            assert record == product.record()
        else:
            with pytest.raises(ValidationError):
                Product.model_validate(record)
    home = renderer.home()
    assert extract_product(Selector(text=home)) is None
