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

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlencode, urljoin, urlsplit

from pydantic import BaseModel

if TYPE_CHECKING:
    from crawlfleet.response import Response

FETCHERS = ("http", "browser", "auto")

Callback = Callable[..., Any] | str
#: a form's fields: a mapping (a list value repeats the field) or ``(name, value)`` pairs
FormData = Mapping[str, "str | Iterable[str]"] | Iterable[tuple[str, str]]
FORM_URLENCODED = "application/x-www-form-urlencoded"


def form_pairs(form: FormData) -> list[tuple[str, str]]:
    """``form`` as ``(name, value)`` pairs in order (a list value gives one pair per item)."""
    items: Iterable[Any] = form.items() if isinstance(form, Mapping) else form
    pairs: list[tuple[str, str]] = []
    for name, value in items:
        if isinstance(value, str) or not isinstance(value, Iterable):
            pairs.append((str(name), str(value)))
        else:
            pairs.extend((str(name), str(v)) for v in value)
    return pairs


#: headers the fetcher owns (framing, the target, the proxy's credentials): never a request's
_FETCHER_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "proxy-authorization"}
)


def _own_headers(headers: Mapping[str, str]) -> dict[str, str]:
    own = {str(k): str(v) for k, v in headers.items()}
    for name in own:
        if name.lower() in _FETCHER_HEADERS:
            raise ValueError(f"header {name!r} is the fetcher's to set, not a request's")
    return own


def with_query(url: str, query: str) -> str:
    """``url`` with its query replaced by ``query`` (as a browser submits a GET form)."""
    head = url.split("#", 1)[0].split("?", 1)[0]
    return f"{head}?{query}" if query else head


#: a route pool's name, as ``[[routes.pool]]`` spells it
POOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


def pool_names(pool: str | Sequence[str] | None) -> tuple[str, ...]:
    """``Request(pool=...)``: one pool's name or a list of names, as a tuple (empty: none asked).

    Raises ValueError for anything else: not a string, an empty list, a name pools cannot have.
    Whether the pools exist is the worker's to check (its ``crawlfleet.toml`` has them)."""
    if pool is None:
        return ()
    names = (pool,) if isinstance(pool, str) else tuple(pool)
    if not names:
        raise ValueError("pool must name at least one route pool (or be None)")
    for name in names:
        if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
            raise ValueError(f"pool must be a route pool's name or a list of them, not {name!r}")
    return tuple(dict.fromkeys(names))


class Request:
    """A URL to crawl, with the callback that parses its response.

    ``url`` may be relative when ``base`` is given; it is joined lazily, so the links a page
    yields cost nothing until the worker needs them (and the worker caches joins it has seen).

    ``headers`` are sent with the request (stored with it, so any worker sends them; the
    session's cookies and user agent fill in what they do not name, and the address guard and
    redirect rules apply as to any request). ``form`` is a form's fields: a URL-encoded ``POST``
    body (``method="GET"``: the query string instead), ``Content-Type`` set. ``repr`` shows no
    header; ``Authorization`` and ``Cookie`` are masked wherever headers are printed or archived.

    ``pool``: the route pool (a name, or a list of names) this request must leave through,
    whatever the spider's ``route_pools``; it is leased only on lanes of those pools' routes, on
    whichever tier they are. A name the worker's ``[[routes.pool]]`` does not have refuses this
    request alone (a warning line), not its page.
    """

    __slots__ = (
        "_base",
        "_href",
        "_url",
        "body",
        "callback",
        "fetcher",
        "headers",
        "max_attempts",
        "meta",
        "method",
        "pool",
        "priority",
    )

    def __init__(
        self,
        url: str,
        callback: Callback | None = None,
        *,
        priority: int = 0,
        meta: Mapping[str, Any] | None = None,
        fetcher: str | None = None,
        method: str | None = None,
        body: bytes | None = None,
        max_attempts: int | None = None,
        base: str | None = None,
        headers: Mapping[str, str] | None = None,
        form: FormData | None = None,
        pool: str | Sequence[str] | None = None,
    ) -> None:
        if fetcher is not None and fetcher not in FETCHERS:
            raise ValueError(f"fetcher must be one of {FETCHERS}, not {fetcher!r}")
        self.pool = pool_names(pool)
        self.headers = _own_headers(headers) if headers else None
        if form is not None:
            if body is not None:
                raise ValueError("Request takes form= or body=, not both")
            method = method or "POST"
            encoded = urlencode(form_pairs(form))
            if method.upper() == "GET":
                url = with_query(url, encoded)
            else:
                body = encoded.encode("ascii")
                if not any(k.lower() == "content-type" for k in self.headers or ()):
                    self.headers = {**(self.headers or {}), "Content-Type": FORM_URLENCODED}
        self._href = url
        self._base = base
        self._url: str | None = None if base else url
        self.callback = callback
        self.priority = priority
        self.meta = dict(meta) if meta else {}
        self.fetcher = fetcher
        self.method = (method or "GET").upper()
        self.body = body
        self.max_attempts = max_attempts

    @classmethod
    def link(cls, href: str, callback: Callback | None, base: str) -> Request:
        """``Request(href, callback, base=base)`` with every other field at its default, built
        without argument parsing: pages yield hundreds of these."""
        self = cls.__new__(cls)
        self._href = href
        self._base = base
        self._url = None
        self.callback = callback
        self.priority = 0
        self.meta = {}
        self.fetcher = None
        self.method = "GET"
        self.body = None
        self.max_attempts = None
        self.headers = None
        self.pool = ()
        return self

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = urljoin(self._base or "", self._href)
        return self._url

    @property
    def href(self) -> str:
        """The URL as written in the page (before joining with ``base``)."""
        return self._href

    @property
    def base(self) -> str | None:
        return self._base

    @property
    def callback_name(self) -> str | None:
        cb = self.callback
        if cb is None or isinstance(cb, str):
            return cb
        return getattr(cb, "__name__", None)

    def __repr__(self) -> str:
        from crawlfleet.urls import mask_credentials

        return f"<Request {self.method} {mask_credentials(self.url)}>"


class Spider:
    """Base class of every spider. Override ``parse``; set the class attributes you need.

    Attributes (all optional but ``name`` and ``start_urls``):

    * ``item``: a pydantic model; every record is validated against it (invalid → quarantine).
    * ``item_key``: field name (or tuple of names) identifying a record; a refetch updates it.
    * ``fetcher``: ``"http"`` | ``"browser"`` | ``"auto"``.
    * ``allowed_domains``: hosts (and their subdomains) the crawl may follow links to; defaults to
      the hosts of ``start_urls``.
    * ``domain_concurrency`` / ``domain_rate``: politeness, enforced across the whole fleet.
    * ``obey_robots``, ``max_attempts`` (a ``Request`` may set its own),
      ``allow_private_addresses``.
    * Trap guards: ``max_depth``, ``max_url_length``, ``max_repeated_segments``,
      ``host_page_budget`` (requests per host), ``pattern_budget`` (requests per URL shape); a
      link over one of them is kept as ``dead(trap)``, never fetched. ``max_links_per_page``:
      most new links one page adds (the rest are dropped, counted and logged).
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
    * ``skip_duplicate_content``: do not parse a page whose body this worker already parsed under
      another URL. Off by default, and right only when a page's records and links do not depend on
      its URL (relative links, ``response.url``, records keyed by page): every fetched page is
      parsed otherwise. Duplicates are archived once either way (WARC ``revisit`` records).
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
    #: browser pages (``fetcher = "browser"`` or ``"auto"``): a CSS selector the browser waits
    #: for before the DOM is read (a request's ``meta["wait_for"]`` overrides it); several
    #: selectors separated by commas wait for whichever appears first
    wait_for: ClassVar[str | None] = None
    #: the route pools (``[[routes.pool]]`` names) this spider's requests may leave by; None: the
    #: pools that name its domains or it, else the general ones (see ``crawlfleet.routes.pools``)
    route_pools: ClassVar[list[str] | None] = None
    # Trap guards; None takes [traps] from crawlfleet.toml (see policy.traps.TrapRules).
    max_depth: ClassVar[int | None] = None
    max_url_length: ClassVar[int | None] = None
    max_repeated_segments: ClassVar[int | None] = None
    host_page_budget: ClassVar[int | None] = None
    pattern_budget: ClassVar[int | None] = None
    max_links_per_page: ClassVar[int | None] = None

    def __init__(self, **kwargs: Any) -> None:
        for name, value in kwargs.items():
            setattr(self, name, value)

    def start_requests(self) -> Iterable[Request]:
        for url in self.start_urls:
            yield Request(url, priority=1)

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

    @classmethod
    def scope_hosts(cls) -> list[str]:
        """Hosts this spider may crawl: ``allowed_domains``, or the hosts of ``start_urls``."""
        if cls.allowed_domains is not None:
            return [d.lower().lstrip(".") for d in cls.allowed_domains]
        hosts = []
        for url in cls.start_urls:
            host = (urlsplit(url).hostname or "").lower()
            if host and host not in hosts:
                hosts.append(host)
        return hosts

    @classmethod
    def seed_hosts(cls) -> set[str]:
        """Hosts named in ``start_urls``: these may be loopback or private (the user asked)."""
        return {(urlsplit(u).hostname or "").lower() for u in cls.start_urls}
