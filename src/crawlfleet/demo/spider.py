"""The demo shop's spider and its record model.

``DemoShop`` has no start URL of its own (the shop runs on a free port): use
``make_spider(base_url)``, which returns a subclass pointed at a running shop.

The extraction lives in ``extract_product``, which needs only ``.css()`` returning Scrapy-style
selector lists, so the Scrapy benchmark spider uses the very same code and yields the same dicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, Field

from crawlfleet.spider import Spider

if TYPE_CHECKING:
    from crawlfleet.response import Response

# Which links the spider follows. The mega-menu and nav carry the duplicate spellings and the
# robots-disallowed links; footers are left alone.
LINK_CSS = "nav a, a.product-link, a.next, .megamenu a"


class Product(BaseModel):
    """A product record. Broken products on the shop fail here and go to quarantine."""

    sku: str = Field(pattern=r"^CF-\d{6}$")
    name: str = Field(min_length=1)
    price: float = Field(gt=0)
    category: str = Field(min_length=1)
    in_stock: bool


class _Selectable(Protocol):
    def css(self, query: str) -> Any: ...


def extract_product(page: _Selectable) -> dict[str, Any] | None:
    """The record dict of a product page, or None for any other page.

    Fields are taken as shown, not repaired: a price reading "Call us" stays a string and a
    missing price or name stays None, so the model rejects those records.
    """
    if not page.css("article.product"):
        return None
    return {
        "sku": page.css("article.product .sku::text").get(),
        "name": page.css("article.product h1::text").get(),
        "price": parse_price(page.css("article.product .price::text").get()),
        "category": page.css("article.product::attr(data-category)").get(),
        "in_stock": page.css("article.product .stock::attr(data-available)").get() == "true",
    }


def parse_price(text: str | None) -> float | str | None:
    """``"€1,234.50"`` → ``1234.5``; text that is not a number is returned unchanged (stripped)."""
    if text is None:
        return None
    cleaned = text.strip()
    try:
        return float(cleaned.lstrip("€").replace(",", ""))
    except ValueError:
        return cleaned


class DemoShop(Spider):
    """Crawls the demo shop: follows navigation, listings and pagination; yields products."""

    name: ClassVar[str] = "demo-shop"
    item: ClassVar[type[BaseModel] | None] = Product
    item_key: ClassVar[str | tuple[str, ...] | None] = "sku"
    # a local demo server: more parallel requests than the polite default of 8
    domain_concurrency: ClassVar[int] = 32

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(LINK_CSS)
        record = extract_product(response)
        if record is not None:
            yield record


def make_spider(base_url: str, **attrs: Any) -> type[DemoShop]:
    """A ``DemoShop`` subclass crawling the shop at ``base_url``; ``attrs`` override attributes."""
    start = base_url.rstrip("/") + "/"
    namespace: dict[str, Any] = {"start_urls": [start], **attrs}
    return type("DemoShopAt", (DemoShop,), namespace)
