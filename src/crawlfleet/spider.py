"""``Spider`` and ``Request``: what a user writes against.

A spider is a class; anyone who knows Scrapy should be at home::

    class Shop(Spider):
        name = "shop"
        start_urls = ["https://shop.example/"]
        item = Product
        item_key = "sku"

        def parse(self, response):
            yield from response.follow_all("nav a, a.next")
            yield {"sku": response.css(".sku::text").get(), ...}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from crawlfleet.model import DEFAULT, Default
from crawlfleet.request import FETCHERS, Callback, FormData, Request

if TYPE_CHECKING:
    from crawlfleet.response import Response

__all__ = [
    "FETCHERS",
    "SITEMAP_CALLBACK",
    "Callback",
    "FormData",
    "Request",
    "Spider",
    "session_params_of",
]

#: the callback of sitemap requests (``sitemap_urls`` and the sitemaps they list)
SITEMAP_CALLBACK = "_parse_sitemap"
#: a sitemap (and what sitemaps list) goes before the pages found by following links
SITEMAP_PRIORITY = 1

log = logging.getLogger("crawlfleet.sitemap")


class Spider:
    """Base class of every spider. Override ``parse``; set the class attributes you need.

    Attributes (all optional but ``name`` and ``start_urls``):

    * ``item``: a pydantic model; every record is validated against it (invalid → quarantine).
    * ``item_key``: field name (or tuple of names) identifying a record; a refetch updates it.
    * ``fetcher``: ``"http"`` | ``"impersonate"`` (a browser's TLS and HTTP/2 fingerprint,
      without a browser) | ``"browser"`` | ``"auto"`` (the cheapest that works, learnt per
      domain and page type: http, then impersonate, then the browser).
    * ``impersonate``: the impersonating fetcher's browser (``"chrome"``, ``"safari"``,
      ``"firefox"`` or a curl_cffi target); None: ``[fetch] impersonate``.
    * ``tls_verify``: False accepts any certificate (a warning once per host); None:
      ``[fetch] tls_verify``.
    * ``allowed_domains``: hosts (and their subdomains) the crawl may follow links to; defaults to
      the hosts of ``start_urls``.
    * ``domain_concurrency`` / ``domain_rate``: politeness, enforced across the whole fleet.
    * ``obey_robots``, ``max_attempts`` (a ``Request`` may set its own),
      ``allow_private_addresses``.
    * Trap guards: ``max_depth``, ``max_url_length``, ``max_repeated_segments``,
      ``host_page_budget`` (requests per host), ``pattern_budget`` (requests per URL shape); a
      link over one of them is kept as ``dead(trap)``, never fetched, and a crawl that ran into
      a budget says so in its summary and exits 3. ``max_links_per_page``: most new links one
      page adds (the rest are dropped, counted and logged). Left as they are, each takes its
      ``[traps]`` setting; ``None`` means no limit.
    * ``field_coverage``: the least share of each run's records that must have a field filled
      (``{"price": 1.0}``); the other quality thresholds are ``[quality]`` keys, which
      ``custom_settings`` may set for the spider (``"quality.item_drop": 0.5``).
    * ``custom_settings``: settings of this spider's jobs: crawlfleet's per-job keys
      (``worker.fetch_timeout``...), spider attributes, and Scrapy's names where crawlfleet has
      an equivalent (``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS``...; others are refused).
    * Arguments (``crawl -a name=value``) are passed to ``__init__`` as keyword arguments, and
      the default ``__init__`` makes them attributes, as in Scrapy.
    * ``process_record(record)``: every record passes here before validation and storage;
      return it (changed, or another one), or ``None`` to drop it.
    * Sessions (cookies): a form a page submits names the session that fetched the page once it
      holds cookies, and a named session's pages name it in their requests
      (``meta["cookiejar"]``, as in Scrapy): a login's cookie reaches every request after it,
      on every worker (see ``crawlfleet.routes.identities``).
    * ``session_params``: names of this site's session-id parameters (``["sessionkey"]``), left
      out of fingerprints whatever their value, besides the names only sessions use
      (``jsessionid``, ``phpsessid``...) and ``sid``/``session``/``sess`` with a token value.
    * ``skip_duplicate_content``: do not parse a page whose body this worker already parsed under
      another URL. Off by default, and right only when a page's records and links do not depend on
      its URL (relative links, ``response.url``, records keyed by page): every fetched page is
      parsed otherwise. Duplicates are archived once either way (WARC ``revisit`` records).
    * Recurring crawls (``crawl --recrawl``, schedules): every run revisits every known page by
      default, with its validators (a ``304`` costs no parse). ``revisit_min`` / ``revisit_max``
      (seconds, or ``"6h"``, ``"7d"``) make the revisit adaptive per page (``policy.revisit``),
      ``revisit_rules = {"parse_product": ("1h", "1d")}`` per callback. ``record_history``: how
      many earlier versions of a record are kept (1: the previous one).
      ``skip_unchanged_content``: a 200 whose body is the one of the last run is not parsed (its
      records are carried over); off by default.
    * Sitemaps, as Scrapy's ``SitemapSpider`` has them: ``sitemap_urls`` (sitemaps, indexes, or
      a robots.txt whose ``Sitemap:`` lines are read), ``sitemap_rules = [(regex, callback)]``
      (the first whose regex matches a URL parses it; default ``[("", "parse")]``),
      ``sitemap_follow`` (regexes of the sitemaps an index lists that are read; default all),
      ``sitemap_alternate_links`` (follow ``hreflang`` alternates too), ``sitemap_filter``.
    """

    name: ClassVar[str] = ""
    start_urls: ClassVar[list[str]] = []
    allowed_domains: ClassVar[list[str] | None] = None
    item: ClassVar[type[BaseModel] | None] = None
    item_key: ClassVar[str | tuple[str, ...] | None] = None
    fetcher: ClassVar[str] = "http"
    custom_settings: ClassVar[dict[str, Any]] = {}
    domain_concurrency: ClassVar[int] = 8
    domain_rate: ClassVar[float | None] = None
    obey_robots: ClassVar[bool] = True
    max_attempts: ClassVar[int] = 5
    allow_private_addresses: ClassVar[bool] = False
    skip_duplicate_content: ClassVar[bool] = False
    tls_verify: ClassVar[bool | None] = None
    impersonate: ClassVar[str | None] = None
    #: browser pages (``fetcher = "browser"`` or ``"auto"``): a CSS selector the browser waits
    #: for before the DOM is read (a request's ``meta["wait_for"]`` overrides it); several
    #: selectors separated by commas wait for whichever appears first
    wait_for: ClassVar[str | None] = None
    #: the route pools (``[[routes.pool]]`` names) this spider's requests may leave by; None: the
    #: pools that name its domains or it, else the general ones (see ``crawlfleet.routes.pools``)
    route_pools: ClassVar[list[str] | None] = None
    # Trap guards; DEFAULT (left as is) takes [traps] from crawlfleet.toml, None is no limit
    # (see policy.traps.TrapRules).
    max_depth: ClassVar[int | Default | None] = DEFAULT
    max_url_length: ClassVar[int | Default | None] = DEFAULT
    max_repeated_segments: ClassVar[int | Default | None] = DEFAULT
    host_page_budget: ClassVar[int | Default | None] = DEFAULT
    pattern_budget: ClassVar[int | Default | None] = DEFAULT
    max_links_per_page: ClassVar[int | Default | None] = DEFAULT
    # Recurring crawls (see crawlfleet.policy.revisit): None revisits every page every run.
    revisit_min: ClassVar[str | float | None] = None
    revisit_max: ClassVar[str | float | None] = None
    revisit_rules: ClassVar[dict[str, tuple[str | float, str | float]]] = {}
    record_history: ClassVar[int] = 1
    skip_unchanged_content: ClassVar[bool] = False
    # Sitemaps (see crawlfleet.sitemap), as Scrapy's SitemapSpider has them.
    sitemap_urls: ClassVar[list[str]] = []
    sitemap_rules: ClassVar[list[tuple[str, str]]] = [("", "parse")]
    sitemap_follow: ClassVar[list[str]] = [""]
    sitemap_alternate_links: ClassVar[bool] = False
    #: least coverage of fields of ``item`` in each run (share of records where the field is
    #: filled): ``{"price": 1.0, "rating": 0.9}``; a run below it alerts (``[quality]``)
    field_coverage: ClassVar[dict[str, float]] = {}
    #: query and path parameter names that are this site's session ids (any case): left out of
    #: a request's fingerprint whatever their value, besides crawlfleet's own
    #: (``crawlfleet.urls.DEFAULT_SESSION_PARAMS``, and ``sid``... with a token-like value)
    session_params: ClassVar[list[str]] = []

    def __init__(self, **kwargs: Any) -> None:
        for name, value in kwargs.items():
            setattr(self, name, value)

    @property
    def logger(self) -> logging.Logger:
        """A logger named after the spider (Scrapy's ``self.logger``): its warnings and errors
        show in ``crawl``'s output with the workers' lines, info and debug with ``-v``/``-vv``."""
        return logging.getLogger(self.name or type(self).__name__)

    def start_requests(self) -> Iterable[Request]:
        for url in self.start_urls:
            yield Request(url, priority=1)
        for url in self.sitemap_urls:
            yield Request(url, callback=SITEMAP_CALLBACK, priority=SITEMAP_PRIORITY)

    def sitemap_filter(self, entries: Iterable[Any]) -> Iterable[Any]:
        """The entries of a sitemap (:class:`crawlfleet.sitemap.SitemapEntry`: ``loc``,
        ``lastmod``, ``alternates``) that are crawled; override to drop some (all by default)."""
        return entries

    def _parse_sitemap(self, response: Response) -> Iterator[Request]:
        """A sitemap, a sitemap index or a robots.txt of ``sitemap_urls`` (or that one of them
        lists): the pages it lists go to their ``sitemap_rules`` callback, the sitemaps it lists
        are read in turn (``sitemap_follow``). Pages of hosts other than the sitemap's are
        refused unless the robots.txt that listed it is theirs (sitemaps.org's cross-host rule).
        Raises :class:`~crawlfleet.errors.SitemapError` for a page that is not a sitemap."""
        from crawlfleet.sitemap import allowed_hosts, open_sitemap, sitemaps_in_robots

        parts = urlsplit(response.url)
        host = (parts.hostname or "").lower()
        listed_by = [str(h) for h in response.meta.get("sitemap_hosts", ())]
        if parts.path == "/robots.txt":
            for url in sitemaps_in_robots(response.text):
                meta = {"sitemap_hosts": sorted({host, *listed_by})}
                yield Request(url, callback=SITEMAP_CALLBACK, priority=SITEMAP_PRIORITY, meta=meta)
            return
        sitemap = open_sitemap(response.body)
        allowed = allowed_hosts(host, listed_by)
        refused = 0
        index = sitemap.kind == "sitemapindex"
        follow = [re.compile(x) for x in self.sitemap_follow]
        rules = [(re.compile(r), c) for r, c in self.sitemap_rules]
        for entry in self.sitemap_filter(sitemap):
            for loc in entry.locs(self.sitemap_alternate_links and not index):
                if (urlsplit(loc).hostname or "").lower() not in allowed:
                    refused += 1
                    continue
                if index:
                    if any(x.search(loc) for x in follow):
                        yield Request(
                            loc,
                            callback=SITEMAP_CALLBACK,
                            priority=SITEMAP_PRIORITY,
                            meta={"sitemap_hosts": listed_by} if listed_by else None,
                        )
                    continue
                for regex, callback in rules:
                    if regex.search(loc):
                        yield Request(loc, callback=callback, lastmod=entry.lastmod)
                        break
        if refused:
            log.warning(
                "sitemap %s: %d URLs of other hosts refused (a sitemap lists its own host's "
                "pages, or those of the robots.txt that listed it)",
                response.url,
                refused,
            )

    def parse(self, response: Response) -> Iterator[Any] | None:
        raise NotImplementedError(f"{type(self).__name__}.parse is not defined")

    async def page_actions(self, page: Any) -> None:
        """Browser pages: act on the Playwright ``page`` once it is ready and before its DOM is
        read (scroll, click, wait). Does nothing by default."""
        return

    def process_record(self, record: Any) -> Any:
        """Every record the spider yields goes through here before validation and storage:
        return it (changed, or another one) to keep it, ``None`` to drop it. An exception is a
        parse error of the page, as one in ``parse`` is."""
        return record

    def is_blocked(self, response: Response) -> bool | None:
        """Return True if ``response`` is a block page the generic tests miss (None: no opinion)."""
        return None

    def scope_hosts(self) -> list[str]:
        """Hosts this spider may crawl: ``allowed_domains``, or the hosts of ``start_urls`` (as
        this spider has them: ``__init__`` may set them, Scrapy's way with ``-a``)."""
        if self.allowed_domains is not None:
            return [d.lower().lstrip(".") for d in self.allowed_domains]
        hosts = []
        for url in [*self.start_urls, *self.sitemap_urls]:
            host = (urlsplit(url).hostname or "").lower()
            if host and host not in hosts:
                hosts.append(host)
        return hosts

    def seed_hosts(self) -> set[str]:
        """Hosts named in ``start_urls`` and ``sitemap_urls`` (this spider's, ``__init__`` may
        set them): these may be loopback or private (the user asked)."""
        urls = [*self.start_urls, *self.sitemap_urls]
        return {(urlsplit(u).hostname or "").lower() for u in urls}


def session_params_of(spider: Spider | type[Spider]) -> frozenset[str]:
    """The parameter names a spider's requests leave out of their fingerprints whatever the
    value: crawlfleet's and its ``session_params``."""
    from crawlfleet.urls import DEFAULT_SESSION_PARAMS

    own = spider.session_params
    if isinstance(own, str):  # one name given as a string, not a list of its letters
        own = [own]
    return DEFAULT_SESSION_PARAMS | {str(name).lower() for name in own}
