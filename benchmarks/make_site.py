"""Write the demo shop as static files, for a fast static server (nginx) to serve.

    python benchmarks/make_site.py OUTDIR --products 5000

The pages come from the same renderer as the live demo shop (``crawlfleet.demo.pages``) with
static link spelling: path-based pagination and fragment-only duplicates, so every URL maps to
one file (nginx: ``try_files $uri $uri.html``):

    /                          index.html
    /robots.txt                robots.txt
    /product/CF-000001         product/CF-000001.html
    /category/kitchen          category/kitchen.html
    /category/kitchen/page-2   category/kitchen/page-2.html
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from crawlfleet.demo import catalog as catalog_module
from crawlfleet.demo import pages as pages_module
from crawlfleet.demo.catalog import Catalog
from crawlfleet.demo.pages import Renderer, StaticLinks, robots_txt

MARKER = ".site.json"


def renderer_version() -> str:
    """A fingerprint of the code that renders the site: a cached site is stale when it changes."""
    digest = hashlib.blake2b(digest_size=8)
    for module in (catalog_module, pages_module):
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()


def build_site(outdir: Path, n_products: int = 5000, seed: int = 7) -> dict[str, Any]:
    """Render the whole shop into ``outdir`` (replaced); returns page count and total bytes."""
    catalog = Catalog(n_products=n_products, seed=seed)
    renderer = Renderer(catalog, StaticLinks())
    if outdir.exists():
        shutil.rmtree(outdir)
    (outdir / "product").mkdir(parents=True)
    pages = {"index.html": renderer.home()}
    for product in catalog.products:
        pages[f"product/{product.sku}.html"] = renderer.product(product.sku) or ""
    for category in catalog.categories:
        (outdir / "category" / category.slug).mkdir(parents=True)
        for n in range(1, catalog.page_count(category.slug) + 1):
            name = f"{category.slug}.html" if n == 1 else f"{category.slug}/page-{n}.html"
            pages[f"category/{name}"] = renderer.category(category.slug, n) or ""
    total = 0
    for rel, html in pages.items():
        data = html.encode()
        (outdir / rel).write_bytes(data)
        total += len(data)
    (outdir / "robots.txt").write_text(robots_txt())
    info = {
        "products": n_products,
        "seed": seed,
        "pages": len(pages),
        "bytes": total,
        "valid_records": len(catalog.expected_records()),
        "renderer": renderer_version(),
    }
    # Written last: its presence means the site is complete and may be reused.
    (outdir / MARKER).write_text(json.dumps(info))
    return info


def ensure_site(outdir: Path, n_products: int = 5000, seed: int = 7) -> dict[str, Any]:
    """Reuse the site in ``outdir`` if it was built with these parameters and this renderer."""
    marker = outdir / MARKER
    if marker.exists():
        info: dict[str, Any] = json.loads(marker.read_text())
        wanted = {"products": n_products, "seed": seed, "renderer": renderer_version()}
        if all(info.get(k) == v for k, v in wanted.items()):
            return info
    return build_site(outdir, n_products, seed)


GZIP_MARKER = ".gzipped.json"


def ensure_gzipped(outdir: Path, level: int = 6) -> int:
    """Write a gzipped twin (``page.html.gz``, ``level``) beside every page of the site in
    ``outdir`` unless the site's marker says they are there already; nginx's ``gzip_static``
    sends them to clients that accept gzip, so the server spends no CPU compressing during a
    benchmark. Returns the compressed bytes of all pages."""
    marker, site = outdir / GZIP_MARKER, (outdir / MARKER).read_text()
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("site") == site and info.get("level") == level:
            return int(info["bytes"])
    total = 0
    for page in sorted(outdir.rglob("*.html")):
        data = gzip.compress(page.read_bytes(), compresslevel=level, mtime=0)
        page.with_name(page.name + ".gz").write_bytes(data)
        total += len(data)
    marker.write_text(json.dumps({"site": site, "level": level, "bytes": total}))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the demo shop as static files.")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--products", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    info = build_site(args.outdir, args.products, args.seed)
    elapsed = time.perf_counter() - started
    print(
        f"wrote {info['pages']} pages ({info['bytes'] / 1e6:.1f} MB, "
        f"{info['bytes'] / info['pages'] / 1e3:.1f} KB/page) to {args.outdir} in {elapsed:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
