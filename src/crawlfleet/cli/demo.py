"""``crawlfleet demo``: the bundled demo shop, served and crawled end to end."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crawlfleet.cli.common import fail, options, run, settings, verbosity
from crawlfleet.cli.crawl import with_workers

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.local.pool import LocalWorkers


@click.command()
@click.option("--products", default=2000, show_default=True, type=click.IntRange(10, 100_000))
@click.option("-w", "--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "-o",
    "--output",
    default="demo-records.jsonl",
    show_default=True,
    help="Where the records go (replaced; format by extension).",
)
@click.option(
    "--dir",
    "workdir",
    default=".crawlfleet-demo",
    show_default=True,
    help="Store and WARC directory of the demo (wiped at start).",
)
@verbosity
@click.pass_context
def demo(ctx: click.Context, products: int, workers: int, output: str, workdir: str) -> None:
    """Serve the bundled demo shop on a free loopback port and crawl it end to end.

    The shop has products with invalid data (quarantined), pages disallowed by robots.txt,
    duplicate URLs and duplicate content. Records go to --output, the store and the WARC files
    to --dir.
    """
    base = Path(workdir)
    if base.exists():
        if not (base / "queue.db").exists() and any(base.iterdir()):
            fail(f"{workdir} exists and is not a crawlfleet demo directory")
        shutil.rmtree(base)
    overrides = {"queue": f"sqlite:///{base / 'queue.db'}", "store.raw": str(base / "warc")}
    s = settings(ctx, overrides)

    async def go(pool: LocalWorkers) -> int:
        return await _demo(ctx, s, overrides, products, workers, output, pool)

    sys.exit(run(with_workers(workers, options(ctx), go)))


async def _demo(
    ctx: click.Context,
    s: Settings,
    overrides: dict[str, str],
    products: int,
    workers: int,
    output: str,
    pool: LocalWorkers,
) -> int:
    from crawlfleet.cli.crawl import make_plan, output_of, run_plan
    from crawlfleet.demo.catalog import Catalog
    from crawlfleet.demo.faults import Faults
    from crawlfleet.demo.server import start_demo_server

    base_url, server = await start_demo_server(Catalog(products), Faults())
    click.echo(f"demo shop with {products} products at {base_url}", err=True)
    try:
        plan = make_plan(
            ctx,
            "crawlfleet.demo.spider:DemoShop",
            s,
            workers=workers,
            job="demo-shop",
            job_settings={"start_urls": [base_url + "/"]},
            worker_overrides=overrides,
            output=output_of(output, None, overwrite=True),
        )
        return await run_plan(plan, options(ctx), pool)
    finally:
        await server.cleanup()
