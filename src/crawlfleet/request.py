"""What a spider asks for: :class:`Request` (a URL, its callback, method, body, headers, form,
pool), and the helpers that build one (form fields, query strings, pool names).

Below the spider and the response, which both name it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from crawlfleet.urls import join

FETCHERS = ("http", "impersonate", "browser", "auto")

Callback = Callable[..., Any] | str
#: a form's fields: a mapping (a list value repeats the field) or ``(name, value)`` pairs;
#: names and values are text or bytes (bytes are sent as they are)
FormData = Mapping[Any, Any] | Iterable[tuple[Any, Any]]
FORM_URLENCODED = "application/x-www-form-urlencoded"
#: one form field's name or value as it is sent
Field = str | bytes


def _field(value: object) -> Field:
    return value if isinstance(value, str | bytes) else str(value)


def form_pairs(form: FormData) -> list[tuple[Field, Field]]:
    """``form`` as ``(name, value)`` pairs in order (a list value gives one pair per item; bytes
    stay bytes, other values become text). Raises ``ValueError`` for anything that is neither a
    mapping nor ``(name, value)`` pairs."""
    if isinstance(form, str | bytes) or not isinstance(form, Mapping | Iterable):
        raise ValueError(_NOT_FORM_DATA.format(form))
    items: Iterable[Any] = form.items() if isinstance(form, Mapping) else form
    pairs: list[tuple[Field, Field]] = []
    for item in items:
        if isinstance(item, str | bytes) or not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(_NOT_FORM_DATA.format(form))
        name, value = item
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            pairs.append((_field(name), _field(value)))
        else:
            pairs.extend((_field(name), _field(v)) for v in value)
    return pairs


_NOT_FORM_DATA = "form data must be a mapping or an iterable of (name, value) pairs, not {!r}"


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


def _name_of(cb: Callback | None) -> str | None:
    if cb is None or isinstance(cb, str):
        return cb
    return getattr(cb, "__name__", None)


#: the key of a stored request's meta that holds its ``cb_kwargs`` and errback (never in a
#: ``Response.meta``)
STORED = "crawlfleet.request"


class RequestFailure:
    """What a request's errback is called with when the request ends dead (a dead letter):
    ``request`` (its URL, method, meta, ``cb_kwargs`` and callback's name, as stored),
    ``reason`` (the dead letter's: ``http_4xx``, ``too_many_retries``, ``robots``,
    ``blocked``...), ``error`` (its last error line, as ``dead list`` shows it) and ``status``
    (the HTTP status of the last answer, None when none came)."""

    __slots__ = ("error", "reason", "request", "status")

    def __init__(self, request: Request, reason: str, error: str, status: int | None) -> None:
        self.request = request
        self.reason = reason
        self.error = error
        self.status = status

    def __repr__(self) -> str:
        return f"<RequestFailure {self.reason} {self.request!r}: {self.error}>"


class Request:
    """A URL to crawl, with the callback that parses its response.

    ``url`` may be relative when ``base`` is given; it is joined lazily, so the links a page
    yields cost nothing until the worker needs them (and the worker caches joins it has seen),
    and as a browser joins it (WHATWG, :func:`crawlfleet.urls.join`), whatever its method.

    ``headers`` are sent with the request (stored with it, so any worker sends them; the
    session's cookies and user agent fill in what they do not name, and the address guard and
    redirect rules apply as to any request). ``form`` is a form's fields: a URL-encoded ``POST``
    body (``method="GET"``: the query string instead), ``Content-Type`` set. ``repr`` shows no
    header; ``Authorization`` and ``Cookie`` are masked wherever headers are printed or archived.

    ``cb_kwargs``: keyword arguments the callback is called with, besides the response (stored
    with the request, so they must be JSON-like, as ``meta``; ``response.cb_kwargs`` has them
    too). ``errback``: a spider method (or its name) called with a :class:`RequestFailure`
    when the request ends dead, on the worker that gave it up; what it returns or yields is
    not used (a warning says so).

    ``pool``: the route pool (a name, or a list of names) this request must leave through,
    whatever the spider's ``route_pools``; it is leased only on lanes of those pools' routes, on
    whichever tier they are. A name the worker's ``[[routes.pool]]`` does not have refuses this
    request alone (a warning line), not its page.

    ``lastmod``: when the page last changed as a sitemap says (epoch seconds; the sitemap
    reader sets it): a recrawl revisits a page whose ``lastmod`` moved, due or not.
    """

    __slots__ = (
        "_base",
        "_href",
        "_url",
        "body",
        "callback",
        "cb_kwargs",
        "errback",
        "fetcher",
        "headers",
        "lastmod",
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
        lastmod: float | None = None,
        cb_kwargs: Mapping[str, Any] | None = None,
        errback: Callback | None = None,
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
        self.lastmod = lastmod
        self.cb_kwargs = dict(cb_kwargs) if cb_kwargs else {}
        self.errback = errback

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
        self.lastmod = None
        self.cb_kwargs = {}
        self.errback = None
        return self

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = join(self._base or "", self._href)
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
        return _name_of(self.callback)

    @property
    def errback_name(self) -> str | None:
        return _name_of(self.errback)

    def stored_meta(self) -> dict[str, Any] | None:
        """``meta`` as the store keeps it: with ``cb_kwargs`` and the errback's name under
        :data:`STORED`, which the fetched page's ``Response`` takes out again."""
        errback = self.errback_name
        if not self.cb_kwargs and errback is None:
            return self.meta or None
        own: dict[str, Any] = {}
        if self.cb_kwargs:
            own["cb_kwargs"] = self.cb_kwargs
        if errback is not None:
            own["errback"] = errback
        return {**self.meta, STORED: own}

    def __repr__(self) -> str:
        from crawlfleet.urls import mask_credentials

        return f"<Request {self.method} {mask_credentials(self.url)}>"
