"""``crawlfleet fetch``: one URL, as crawlfleet's fetcher sees it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crawlfleet.cli.common import fail, one_line_errors, pairs, run_loop, settings


@click.command()
@click.argument("url")
@click.option("-o", "--output", metavar="FILE", help="Write the body here (default: stdout).")
@click.option("--no-body", is_flag=True, help="Status and headers only.")
@click.option("--spider", metavar="SPIDER.py", help="Fetch with this spider's settings.")
@click.option(
    "-s",
    "set_",
    multiple=True,
    metavar="KEY=VALUE",
    help="Setting: worker.user_agent=..., DOWNLOAD_TIMEOUT=5, ... Repeatable.",
)
@click.option(
    "--browser",
    is_flag=True,
    help="Fetch with the browser fetcher (the system's Chromium); the body is the rendered DOM.",
)
@click.option(
    "--impersonate",
    is_flag=True,
    help="Fetch with the impersonating fetcher: a browser's TLS and HTTP/2 fingerprint and "
    "headers, without a browser (-s impersonate=safari picks the browser).",
)
@click.pass_context
@one_line_errors
def fetch(
    ctx: click.Context,
    url: str,
    output: str | None,
    no_body: bool,
    spider: str | None,
    set_: tuple[str, ...],
    browser: bool,
    impersonate: bool,
) -> None:
    """Fetch URL through crawlfleet's HTTP fetcher and show what a crawl would see.

    A certificate the fetcher does not trust is one line saying why (tls_error: self-signed
    certificate, certificate expired, hostname mismatch...): trust its authority with
    [fetch] ca_file or SSL_CERT_FILE, or pass -s tls_verify=false.

    The status line, the verdict a crawl would give the page (ok, blocked and why, gone,
    retryable_error...) and the headers go to stderr; the body (decompressed; with --browser,
    the rendered DOM a spider parses) to stdout or --output.
    Redirects, size caps and the address guard apply as in a crawl (the URL's own host may be
    loopback or private); robots.txt is not read.
    """
    from crawlfleet.cli.fetching import FetchFailed, describe, fetch_page, run_settings, tool_spider

    custom = pairs(set_, "-s")
    spider_cls = tool_spider(spider, {}, custom)
    s = settings(ctx, run_settings(custom))
    try:
        kind = "browser" if browser else "impersonate" if impersonate else None
        page = run_loop(fetch_page(url, s, spider_cls, fetcher=kind))
    except FetchFailed as exc:
        fail(str(exc), code=1)
    click.echo(describe(page), err=True)
    for name, value in page.result.headers:
        click.echo(f"{name}: {value}", err=True)
    if no_body:
        return
    if output:
        try:
            Path(output).write_bytes(page.response.body)
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror or exc}")
        click.echo(f"{len(page.response.body):,} bytes → {output}", err=True)
    else:
        sys.stdout.buffer.write(page.response.body)
        sys.stdout.buffer.flush()
