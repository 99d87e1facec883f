"""``crawlfleet shell``: a Python shell with a fetched page, to try selectors on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from crawlfleet.cli.common import fail, one_line_errors, pairs, run_loop, settings

if TYPE_CHECKING:
    from crawlfleet.cli.fetching import Page
    from crawlfleet.config import Settings
    from crawlfleet.spider import Spider

BANNER = """\
crawlfleet shell · {status}
  response    the page: response.css("h1::text").get(), response.xpath("//a/@href").getall()
  request     the Request that fetched it
  spider      {spider}
  fetch(url)  load another page (response and request follow it)
"""


@click.command()
@click.argument("url")
@click.option("--spider", "spider_ref", metavar="SPIDER.py", help="Bind this spider as spider.")
@click.option("-a", "spider_args", multiple=True, metavar="NAME=VALUE", help="Spider argument.")
@click.option("-s", "set_", multiple=True, metavar="KEY=VALUE", help="Setting (as for crawl).")
@click.option("--browser", is_flag=True, help="Fetch with the browser (the spider's fetcher too).")
@click.option("--python", "plain", is_flag=True, help="The plain Python shell even with IPython.")
@click.pass_context
@one_line_errors
def shell(
    ctx: click.Context,
    url: str,
    spider_ref: str | None,
    spider_args: tuple[str, ...],
    set_: tuple[str, ...],
    browser: bool,
    plain: bool,
) -> None:
    """Fetch URL through crawlfleet's fetcher and open a Python shell (IPython if installed)
    with response, request, the spider (--spider) and fetch(url) to load another page."""
    from crawlfleet.cli.fetching import run_settings, tool_spider
    from crawlfleet.spiders import spider_instance

    custom = pairs(set_, "-s")
    spider_cls = tool_spider(spider_ref, pairs(spider_args, "-a"), custom)
    s = settings(ctx, run_settings(custom))
    namespace: dict[str, Any] = {"spider": spider_instance(spider_cls) if spider_cls else None}
    loader = _Loader(namespace, s, spider_cls, browser)
    namespace["fetch"] = loader
    loader(url)
    if namespace.get("response") is None:
        fail(f"cannot open a shell: {url} could not be fetched", code=1)
    page = loader.page
    assert page is not None
    banner = BANNER.format(
        status=_status(page), spider=type(namespace["spider"]).__name__ if spider_cls else "None"
    )
    loader.started = True
    _interact(namespace, banner, plain)


class _Loader:
    """``fetch(url)`` in the shell: fetches, rebinds ``response`` and ``request``."""

    def __init__(
        self, namespace: dict[str, Any], s: Settings, spider: type[Spider] | None, browser: bool
    ) -> None:
        self.namespace, self.settings, self.spider, self.browser = namespace, s, spider, browser
        self.page: Page | None = None
        self.started = False  # in the shell: print each page's status line

    def __call__(self, url: str) -> None:
        from crawlfleet.cli.fetching import FetchFailed, fetch_page
        from crawlfleet.errors import UsageError
        from crawlfleet.spider import Request

        try:
            self.page = run_loop(fetch_page(url, self.settings, self.spider, browser=self.browser))
        except (FetchFailed, UsageError) as exc:  # in the shell: say it, keep the session
            print(f"error: {exc}")
            return
        self.namespace["response"] = self.page.response
        self.namespace["request"] = Request(url)
        if self.started:
            print(_status(self.page))

    def __repr__(self) -> str:
        return "fetch(url): load another page into response and request"


def _status(page: Page) -> str:
    from crawlfleet.cli.fetching import describe

    return describe(page)


def _interact(namespace: dict[str, Any], banner: str, plain: bool) -> None:
    if not plain:
        try:
            from IPython import start_ipython
        except ImportError:
            pass
        else:
            print(banner)
            start_ipython(argv=[], user_ns=namespace)
            return
    import code

    code.interact(banner=banner, local=namespace, exitmsg="")
