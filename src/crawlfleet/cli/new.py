"""``crawlfleet new``: a spider file to start from, a saved page and a test of its parse."""

from __future__ import annotations

import re
from pathlib import Path

import click

from crawlfleet.cli.common import fail, one_line_errors, run_loop, settings

SPIDER = '''\
"""{name}: a crawlfleet spider.

    crawlfleet parse {url} --spider {name}.py     one page through parse
    crawlfleet crawl {name}.py -o {name}.jsonl    the whole crawl
    python -m pytest test_{name}.py               parse on the saved page
"""

from pydantic import BaseModel

from crawlfleet import Response, Spider


class {model}(BaseModel):
    """One record: every record is validated against this model (invalid ones are quarantined
    with the reasons, never stored as records)."""

    url: str
    title: str


class {cls}(Spider):
    name = "{name}"
    start_urls = [{url!r}]
    item = {model}
    item_key = "url"  # one record per URL: a refetch updates it, never duplicates it
    # allowed_domains = [...]  # default: the hosts of start_urls
    # domain_concurrency = 8   # most requests in flight to one domain, fleet-wide
    # domain_rate = None       # most requests per second to one domain
    # obey_robots = True

    def parse(self, response: Response):
        # links first: a record that fails to build ends the page's output there
        yield from response.follow_all("a")
        yield {model}(url=response.url, title=response.css("title::text").get("").strip())
'''

TEST = '''\
"""{name}.py's parse on a saved page ({page}): python -m pytest test_{name}.py

Save another page over {page} (crawlfleet fetch URL -o {page}) to test what it yields.
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
URL = {url!r}


def parse(page: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "crawlfleet", "parse", URL, "--spider", str(HERE / "{name}.py"),
         "--page", str(page), "--json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_parse__the_saved_page_gives_valid_records() -> None:
    out = parse(HERE / "{page}")
    assert out["records"], "the page gave no record"
    assert not out["quarantined"], out["quarantined"]
    assert all(record["url"] for record in out["records"])
'''

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@click.command()
@click.argument("name")
@click.argument("url")
@click.option("--dir", "where", default=".", show_default=True, help="Where to write the files.")
@click.option("--force", is_flag=True, help="Replace files that exist.")
@click.option("--no-fetch", is_flag=True, help="Do not fetch URL to save a page for the test.")
@click.pass_context
@one_line_errors
def new(ctx: click.Context, name: str, url: str, where: str, force: bool, no_fetch: bool) -> None:
    """Write NAME.py, a spider for URL (a pydantic model, item_key, parse with follow_all),
    and test_NAME.py, which runs parse on URL's page saved as NAME.page.html."""
    if not _NAME.fullmatch(name):
        fail(f"spider name {name!r}: letters, digits and _ only, not starting with a digit")
    if not url.startswith(("http://", "https://")):
        fail(f"{url!r} is not an http(s) URL")
    base = Path(where)
    files = {
        base / f"{name}.py": SPIDER.format(
            name=name, url=url, cls=_camel(name) + "Spider", model=_camel(name) + "Page"
        ),
        base / f"test_{name}.py": TEST.format(name=name, url=url, page=f"{name}.page.html"),
    }
    taken = [str(p) for p in files if p.exists()]
    if taken and not force:
        fail(f"{' and '.join(taken)} already there (--force replaces)")
    base.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
        click.echo(f"wrote {path}")
    if not no_fetch:
        _save_page(ctx, url, base / f"{name}.page.html")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "My"


def _save_page(ctx: click.Context, url: str, path: Path) -> None:
    from crawlfleet.cli.fetching import FetchFailed, fetch_page

    try:
        page = run_loop(fetch_page(url, settings(ctx)))
    except FetchFailed as exc:
        click.echo(f"{exc}: save a page as {path} for the test", err=True)
        return
    path.write_bytes(page.result.body)
    click.echo(f"wrote {path} ({page.result.status}, {len(page.result.body):,} bytes)")
