"""``crawlfleet parse``: one page through a spider's callback, as a crawl would run it."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import async_command, fail, pairs, settings

if TYPE_CHECKING:
    from crawlfleet.cli.fetching import Page
    from crawlfleet.worker.extract import PageOutput


@click.command()
@click.argument("url")
@click.option("--spider", "spider_ref", required=True, metavar="SPIDER.py", help="The spider.")
@click.option("-c", "--callback", help="The callback to run (default: parse).")
@click.option(
    "--page",
    type=click.Path(exists=True, dir_okay=False),
    help="Parse this saved page as URL's response instead of fetching it.",
)
@click.option("-a", "spider_args", multiple=True, metavar="NAME=VALUE", help="Spider argument.")
@click.option("-s", "set_", multiple=True, metavar="KEY=VALUE", help="Setting (as for crawl).")
@click.option("--browser", is_flag=True, help="Fetch with the browser (the spider's fetcher too).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
@async_command
async def parse(
    ctx: click.Context,
    url: str,
    spider_ref: str,
    callback: str | None,
    page: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
    browser: bool,
    as_json: bool,
) -> None:
    """Fetch URL (or take --page) and run one callback of the spider on it.

    The page is fetched as the spider's fetcher would (the browser's rendered DOM for a spider
    with fetcher = "browser", or with --browser).

    Prints the records with their verdict (valid, or quarantined with the validation errors)
    and the links the crawl would follow (in scope, not traps; robots.txt is not read). A
    callback that raises prints its traceback and exits 1. Nothing is written to any store.
    """
    from crawlfleet.cli.fetching import FetchFailed, fetch_page, run_settings, tool_spider

    custom = pairs(set_, "-s")
    spider_cls = tool_spider(spider_ref, pairs(spider_args, "-a"), custom)
    assert spider_cls is not None
    s = settings(ctx, run_settings(custom))
    body = _read(page) if page else None
    try:
        fetched = await fetch_page(url, s, spider_cls, body=body, browser=browser)
    except FetchFailed as exc:
        fail(str(exc), code=1)
    output, error = _run(fetched, spider_cls, s, callback)
    if as_json:
        click.echo(json.dumps(_as_json(fetched, output, error), ensure_ascii=False, default=str))
    else:
        _print(fetched, output)
    if error is not None:
        click.echo(error, err=True)
        sys.exit(1)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _run(
    page: Page, spider_cls: Any, s: Any, callback: str | None
) -> tuple[PageOutput | None, str | None]:
    """The callback's output through the job runtime a worker uses, or its traceback."""
    import time

    from crawlfleet.data.captures import Provenance
    from crawlfleet.errors import ParseError, TooComplex, TooManyItems
    from crawlfleet.model import Job, JobState
    from crawlfleet.spiders import spider_instance
    from crawlfleet.worker.extract import JobRuntime

    spider_instance(spider_cls)  # a spider that cannot be built: one line, before anything else
    job = Job(0, spider_cls.name, spider_cls.__module__, JobState.RUNNING, {}, time.time())
    traps = s.trap_rules(
        max_depth=spider_cls.max_depth,
        max_url_length=spider_cls.max_url_length,
        max_repeated_segments=spider_cls.max_repeated_segments,
    )
    runtime = JobRuntime(job, spider_cls, traps)
    try:
        out = runtime.process(
            page.response,
            page_url=page.response.request_url,
            callback=callback,
            depth=0,
            fetched_at=page.fetched_at,
            warc=Provenance(),
        )
    except (TooComplex, TooManyItems) as exc:  # what a crawl ends the page with, by name
        reason = "too_complex" if isinstance(exc, TooComplex) else "too_many_items"
        return None, f"error: {reason}: {exc}"
    except ParseError as exc:
        cause = exc.__cause__
        if cause is None:
            return None, f"error: {exc}"
        lines = traceback.format_exception(type(cause), cause, cause.__traceback__)
        return None, "".join(lines).rstrip()
    return out, None


def _as_json(page: Page, out: PageOutput | None, error: str | None) -> dict[str, Any]:
    return {
        "url": page.result.url,
        "status": page.result.status,
        "crawlfleet_sees": page.outcome,
        "records": [dict(r.data) for r in out.records] if out else [],
        "quarantined": [{"data": q.data, "errors": list(q.errors)} for q in out.quarantined]
        if out
        else [],
        "links": [
            {"url": r.url, "callback": r.callback, "method": r.method}
            for r in out.discovered
            if not r.trap
        ]
        if out
        else [],
        "traps": [{"url": r.url, "why": r.trap} for r in out.discovered if r.trap] if out else [],
        "error": error,
    }


def _print(page: Page, out: PageOutput | None) -> None:
    from crawlfleet.cli.fetching import describe

    click.echo(describe(page), err=True)
    if page.outcome not in ("ok",):
        click.echo(
            f"note: a crawl would not parse this page ({page.outcome}); it is parsed here anyway",
            err=True,
        )
    if out is None:
        return
    records: list[tuple[str, Any, Sequence[Mapping[str, Any]]]] = [
        ("valid", r.data, ()) for r in out.records
    ]
    records += [("quarantined", q.data, q.errors) for q in out.quarantined]
    click.echo(f"records ({len(records)}):")
    for verdict, data, errors in records:
        click.echo(f"  {verdict:<11} {json.dumps(data, ensure_ascii=False, default=str)}")
        for e in errors:
            where = ".".join(str(part) for part in e.get("loc", ())) or "record"
            click.echo(f"              {where}: {e.get('msg', e)}")
    links = [r for r in out.discovered if not r.trap]
    click.echo(f"links to follow ({len(links)}):")
    for r in links:
        method = "" if r.method == "GET" else f"{r.method} "  # a form's submission
        click.echo(f"  {method}{r.url}" + (f"  → {r.callback}" if r.callback else ""))
    traps = [r for r in out.discovered if r.trap]
    if traps:
        click.echo(f"traps ({len(traps)}, kept as dead(trap)):")
        for r in traps:
            click.echo(f"  {r.url}  ({r.trap})")
