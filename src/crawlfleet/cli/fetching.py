"""One page fetched the way a crawl fetches it, for ``fetch``, ``shell``, ``parse`` and ``new``:
crawlfleet's HTTP fetcher with the settings (and the spider's, when one is named), the verdict
a crawl would give the response, and the ``Response`` a spider's callback would see."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawlfleet.config.custom_settings import for_spider
from crawlfleet.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from crawlfleet.config import Settings
    from crawlfleet.fetch.base import Fetcher, FetchResult
    from crawlfleet.fetch.http import FetchSettings
    from crawlfleet.response import Response
    from crawlfleet.spider import Spider


class FetchFailed(UsageError):
    """The page could not be fetched (the command exits 1 with the reason)."""


@dataclass(frozen=True)
class Page:
    """A fetched page: the fetcher's result, the Response a callback sees, and the verdict a
    crawl would give it (``ok``, ``blocked``...; ``reason`` for blocks)."""

    result: FetchResult
    response: Response
    outcome: str
    reason: str
    fetched_at: float


def tool_spider(
    ref: str | None, args: Mapping[str, str], custom: Mapping[str, str]
) -> type[Spider] | None:
    """The spider a tool names (``--spider``), configured with its ``-a`` and ``-s`` as a job's
    would be; None without one."""
    from crawlfleet.cli.crawl import job_settings
    from crawlfleet.spiders import configure, load_spider

    if ref is None:
        return None
    return configure(load_spider(ref), job_settings(args, custom))


def run_settings(custom: Mapping[str, str]) -> dict[str, object]:
    """The ``-s`` keys that are settings (Scrapy's mapped to them): for the fetcher."""
    from crawlfleet.config.custom_settings import split_custom_settings

    return dict(split_custom_settings(custom).settings)


def fetch_settings(settings: Settings, url: str, spider_cls: type[Spider] | None) -> FetchSettings:
    """The fetcher's settings: the worker's, the spider's ``custom_settings`` applied; the URL's
    host may be loopback or private (the user named it), as a crawl's start URLs may."""
    from crawlfleet.fetch.http import FetchSettings

    s = (
        for_spider(settings, spider_cls.custom_settings, spider_cls.name)
        if spider_cls
        else settings
    )
    hosts = {(urlsplit(url).hostname or "").lower()}
    if spider_cls is not None:
        from crawlfleet.spiders import spider_instance

        hosts |= spider_instance(spider_cls).seed_hosts()
    return FetchSettings(
        timeout=s.fetch_timeout,
        max_body=s.max_body,
        max_redirects=s.max_redirects,
        user_agent=s.user_agent,
        concurrency=4,
        allow_private_addresses=bool(spider_cls and spider_cls.allow_private_addresses),
        private_ok_hosts=frozenset(hosts),
    )


async def fetch_page(
    url: str,
    settings: Settings,
    spider_cls: type[Spider] | None = None,
    *,
    body: bytes | None = None,
    browser: bool = False,
) -> Page:
    """Fetch ``url`` with the HTTP fetcher, or the browser fetcher (``browser``, or a spider
    whose ``fetcher`` is ``"browser"``), or take ``body`` as its response (a saved page)."""
    from crawlfleet.errors import FetchError
    from crawlfleet.fetch.base import FetchRequest, FetchResult

    if urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"{url!r} is not an http(s) URL")
    if body is not None:
        headers = [("Content-Type", "text/html")]
        result = FetchResult(url, 200, "OK", "HTTP/1.1", headers, body, 0.0, None, [])
        return _page(result, url, spider_cls)
    fs = fetch_settings(settings, url, spider_cls)
    browser = browser or (spider_cls is not None and spider_cls.fetcher == "browser")
    fetcher = await _open_fetcher(fs, browser)
    try:
        result = await fetcher.fetch(FetchRequest(url))
    except FetchError as exc:
        raise FetchFailed(f"cannot fetch {url}: {exc} ({exc.kind})") from None
    finally:
        await fetcher.close()
    return _page(result, url, spider_cls)


async def _open_fetcher(fs: FetchSettings, browser: bool) -> Fetcher:
    """The HTTP fetcher, or the browser fetcher on a Chromium of its own (with the same
    address guard), started: the fetcher port, as a worker's pool holds them."""
    from crawlfleet.fetch.http import HttpClient, HttpFetcher

    if not browser:
        http = HttpFetcher(HttpClient(fs))
        await http.client.start()
        return http
    from crawlfleet.fetch.browser import BrowserFetcher, BrowserSettings

    chromium = BrowserFetcher(BrowserSettings(), guard=fs)
    await chromium.start()
    return chromium


def _page(result: FetchResult, url: str, spider_cls: type[Spider] | None) -> Page:
    from crawlfleet.policy.classify import classify
    from crawlfleet.response import Response
    from crawlfleet.urls import request_url

    rendered = getattr(result, "rendered_html", None)  # a browser fetch: the DOM is the page
    body = rendered.encode("utf-8", "surrogatepass") if rendered else result.body
    response = Response(
        result.url, result.status, result.header_map, body, request_url=request_url(url)
    )
    verdict = None
    if spider_cls is not None:
        verdict = spider_cls().is_blocked(response) if _has_block_hook(spider_cls) else None
    c = classify(result.status, result.header_map, result.body, spider_verdict=verdict)
    return Page(result, response, c.outcome.value, c.block.reason, time.time())


def _has_block_hook(spider_cls: type[Spider]) -> bool:
    from crawlfleet.spider import Spider

    return spider_cls.is_blocked is not Spider.is_blocked


def describe(page: Page) -> str:
    """``200 OK https://... · 12,345 bytes · 0.12s · HTTP/1.1 · ok`` (redirects, block reason)."""
    from crawlfleet.urls import mask_credentials

    r = page.result
    hops = f" · {len(r.redirects)} redirects" if r.redirects else ""
    dom = f" (rendered DOM {len(page.response.body):,})" if getattr(r, "rendered_html", "") else ""
    verdict = page.outcome + (f" ({page.reason})" if page.reason else "")
    return (
        f"{r.status} {r.reason} {mask_credentials(r.url)}{hops} · {len(r.body):,} bytes{dom} · "
        f"{r.elapsed:.2f}s · {r.http_version} · crawlfleet sees: {verdict}"
    )
