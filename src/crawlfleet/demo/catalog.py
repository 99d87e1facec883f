"""The demo shop's data: categories and products, generated deterministically from a seed.

Pure: no I/O, no clock. The same ``Catalog(n_products, seed)`` is the same shop on every machine,
so tests can compute what a crawl must produce (``expected_records``) without crawling.

About 2% of products are deliberately broken for the spider's model (price shown as "Call us",
price missing, or an empty name): a correct crawl puts them in quarantine, never in the records.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

INVALID_FRACTION = 0.02
PRODUCTS_PER_PAGE = 24

CATEGORIES: tuple[tuple[str, str], ...] = (
    ("kitchen", "Kitchen & Dining"),
    ("garden", "Garden & Outdoor"),
    ("tools", "Tools & Hardware"),
    ("lighting", "Lighting"),
    ("bath", "Bath & Laundry"),
    ("office", "Office Supplies"),
    ("toys", "Toys & Games"),
    ("sports", "Sports & Fitness"),
    ("audio", "Audio & Hi-Fi"),
    ("books", "Books & Stationery"),
    ("pets", "Pet Supplies"),
    ("travel", "Travel & Luggage"),
)

# Filter facets each category offers in the mega-menu (links to the category page + fragment).
FACETS: tuple[str, ...] = (
    "new-arrivals",
    "best-sellers",
    "on-sale",
    "eco",
    "premium",
    "under-20",
    "gift-ideas",
    "clearance",
)

_ADJECTIVES = (
    "Compact", "Deluxe", "Classic", "Rustic", "Modern", "Foldable", "Heavy-Duty", "Smart",
    "Portable", "Vintage", "Ergonomic", "Solar", "Cordless", "Nordic", "Bamboo", "Copper",
    "Stainless", "Ceramic", "Woven", "Magnetic",
)  # fmt: skip
_NOUNS = (
    "Kettle", "Lantern", "Trowel", "Stapler", "Speaker", "Backpack", "Planter", "Desk Lamp",
    "Notebook", "Scale", "Grinder", "Hammock", "Puzzle", "Leash", "Towel Set", "Headphones",
    "Toolbox", "Yoga Mat", "Suitcase", "Clock", "Frying Pan", "Bird Feeder", "Drill", "Mug",
)  # fmt: skip
_WORDS = (
    "durable", "lightweight", "designed", "everyday", "comfort", "quality", "materials",
    "crafted", "performance", "reliable", "easy", "clean", "storage", "perfect", "gift",
    "warranty", "tested", "sustainable", "finish", "premium", "versatile", "home", "outdoor",
    "simple", "assembly", "included", "compact", "size", "colour", "range", "season",
)  # fmt: skip
_INVALID_KINDS = ("price_text", "price_missing", "empty_name")


@dataclass(frozen=True, slots=True)
class Category:
    slug: str
    name: str


@dataclass(frozen=True, slots=True)
class Product:
    """One product as the shop shows it.

    ``price`` is ``None`` when the page shows no number (``price_text`` then holds what it shows,
    e.g. "Call us", or ``None`` when the price element is missing altogether).
    """

    sku: str
    name: str
    price: float | None
    price_text: str | None
    category: str
    in_stock: bool
    description: tuple[str, ...]
    invalid_reason: str | None = None

    @property
    def valid(self) -> bool:
        """True if the spider's model accepts this product's record."""
        return self.invalid_reason is None

    @property
    def path(self) -> str:
        return f"/product/{self.sku}"

    def record(self) -> dict[str, Any]:
        """The record the demo spider yields for this product (valid products only)."""
        return {
            "sku": self.sku,
            "name": self.name,
            "price": self.price,
            "category": self.category,
            "in_stock": self.in_stock,
        }


@dataclass(slots=True)
class Catalog:
    """The whole shop: categories, products, and what a correct crawl yields."""

    n_products: int = 2000
    seed: int = 7
    categories: tuple[Category, ...] = field(init=False)
    products: tuple[Product, ...] = field(init=False)
    _by_sku: dict[str, Product] = field(init=False, repr=False, compare=False)
    _by_category: dict[str, tuple[Product, ...]] = field(init=False, repr=False, compare=False)
    _listings: dict[tuple[str, str], tuple[Product, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.n_products < 1:
            raise ValueError("a catalog needs at least one product")
        rng = random.Random(self.seed)
        self.categories = tuple(Category(slug, name) for slug, name in CATEGORIES)
        invalid = _pick_invalid(rng, self.n_products)
        self.products = tuple(
            _make_product(rng, i, self.categories, invalid.get(i))
            for i in range(1, self.n_products + 1)
        )
        self._by_sku = {p.sku: p for p in self.products}
        self._by_category = {
            c.slug: tuple(p for p in self.products if p.category == c.slug) for c in self.categories
        }
        self._listings = {}

    def product(self, sku: str) -> Product | None:
        return self._by_sku.get(sku)

    def category(self, slug: str) -> Category | None:
        return next((c for c in self.categories if c.slug == slug), None)

    def in_category(self, slug: str, sort: str = "name") -> tuple[Product, ...]:
        """Products of a category in listing order (``sort``: "name" or "price")."""
        listing = self._listings.get((slug, sort))
        if listing is None:
            products = self._by_category.get(slug, ())
            if sort == "price":
                listing = tuple(
                    sorted(products, key=lambda p: (p.price is None, p.price or 0.0, p.sku))
                )
            else:
                listing = tuple(sorted(products, key=lambda p: (p.name, p.sku)))
            self._listings[slug, sort] = listing
        return listing

    def page_count(self, slug: str) -> int:
        """Listing pages of a category (at least one, even when empty)."""
        n = len(self._by_category.get(slug, ()))
        return max(1, -(-n // PRODUCTS_PER_PAGE))

    def expected_records(self) -> list[dict[str, Any]]:
        """Every valid product's record, exactly as the demo spider must produce it, by sku."""
        return [p.record() for p in self.products if p.valid]

    def invalid_skus(self) -> list[str]:
        """Skus whose records the spider's model rejects (they belong in quarantine)."""
        return [p.sku for p in self.products if not p.valid]


def _pick_invalid(rng: random.Random, n: int) -> dict[int, str]:
    """Product numbers that are broken on purpose, each with how it is broken."""
    count = max(1, round(n * INVALID_FRACTION))
    chosen = sorted(rng.sample(range(1, n + 1), count))
    return {num: _INVALID_KINDS[k % len(_INVALID_KINDS)] for k, num in enumerate(chosen)}


def _make_product(
    rng: random.Random, num: int, categories: tuple[Category, ...], invalid: str | None
) -> Product:
    name = f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} {num % 97 + 1}"
    # Whole cents, so the rendered "€12.34" parses back to exactly the same float.
    cents = rng.randrange(199, 49999)
    price: float | None = cents / 100
    price_text: str | None = f"€{cents / 100:.2f}"
    if invalid == "price_text":
        price, price_text = None, "Call us"
    elif invalid == "price_missing":
        price, price_text = None, None
    elif invalid == "empty_name":
        name = ""
    return Product(
        sku=f"CF-{num:06d}",
        name=name,
        price=price,
        price_text=price_text,
        category=categories[rng.randrange(len(categories))].slug,
        in_stock=rng.random() < 0.85,
        description=tuple(_paragraph(rng) for _ in range(rng.randint(4, 6))),
        invalid_reason=invalid,
    )


def _paragraph(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(40, 70))]
    return " ".join(words).capitalize() + "."
