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

    split = split_custom_settings(custom)
    out: dict[str, object] = dict(split.settings)
    for name in ("tls_verify", "impersonate"):  # spider attributes, and [fetch] keys
        if name in split.attributes:
            out[f"fetch.{name}"] = split.attributes[name]
    return out


def fetch_settings(settings: Settings, url: str, spider_cls: type[Spider] | None) -> FetchSettings:
    """The fetcher's settings: the worker's, the spider's ``custom_settings`` applied; the URL's
    host may be loopback or private (the user named it), as a crawl's start URLs may."""
    from crawlfleet.worker.jobs import fetch_settings_of

    s = (
        for_spider(settings, spider_cls.custom_settings, spider_cls.name)
        if spider_cls
        else settings
    )
    hosts = {(urlsplit(url).hostname or "").lower()}
    if spider_cls is not None:
        from crawlfleet.spiders import spider_instance

        hosts |= spider_instance(spider_cls).seed_hosts()
    return fetch_settings_of(s, spider_cls, hosts=hosts, concurrency=4)


async def fetch_page(
    url: str,
    settings: Settings,
    spider_cls: type[Spider] | None = None,
    *,
    body: bytes | None = None,
    browser: bool = False,
    fetcher: str | None = None,
) -> Page:
    """Fetch ``url`` with the HTTP fetcher, or the ``fetcher`` kind asked for (``browser``,
    ``impersonate``; a spider's own ``fetcher`` otherwise), or take ``body`` as its response
    (a saved page)."""
    from crawlfleet.errors import FetchError, TlsError
    from crawlfleet.fetch.base import FetchRequest, FetchResult

    if urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"{url!r} is not an http(s) URL")
    if body is not None:
        headers = [("Content-Type", "text/html")]
        result = FetchResult(url, 200, "OK", "HTTP/1.1", headers, body, 0.0, None, [])
        return _page(result, url, spider_cls)
    fs = fetch_settings(settings, url, spider_cls)
    kind = fetcher or ("browser" if browser else None)
    if kind is None and spider_cls is not None and spider_cls.fetcher != "auto":
        kind = spider_cls.fetcher
    opened = await _open_fetcher(fs, kind or "http")
    try:
        result = await opened.fetch(FetchRequest(url))
    except TlsError as exc:
        raise FetchFailed(
            f"cannot fetch {url}: tls_error: {exc}; trust its authority with [fetch] ca_file "
            "or SSL_CERT_FILE, or pass -s tls_verify=false"
        ) from None
    except FetchError as exc:
        raise FetchFailed(f"cannot fetch {url}: {exc} ({exc.kind})") from None
    finally:
        await opened.close()
    return _page(result, url, spider_cls)


async def _open_fetcher(fs: FetchSettings, kind: str) -> Fetcher:
    """The fetcher of ``kind`` (``http``, ``impersonate``, ``browser``: on a Chromium of its
    own, with the same address guard and trust), started: the fetcher port, as a worker's pool
    holds them."""
    from crawlfleet.fetch.http import HttpClient, HttpFetcher

    if kind == "impersonate":
        from crawlfleet.fetch.impersonate import ImpersonateClient, ImpersonateFetcher

        impersonating = ImpersonateFetcher(ImpersonateClient(fs))
        await impersonating.client.start()
        return impersonating
    if kind != "browser":
        http = HttpFetcher(HttpClient(fs))
        await http.client.start()
        return http
    from crawlfleet.fetch.browser import BrowserFetcher, BrowserSettings

    chromium = BrowserFetcher(BrowserSettings(ca_file=fs.ca_file), guard=fs)
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
