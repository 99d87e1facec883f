"""The fetcher port: how the attempt pipeline asks for a page, whatever fetches it.

::

    class Fetcher(Protocol):
        kind: str                        # "http" | "browser"
        async def fetch(self, request: FetchRequest, *, route=None, session=None) -> FetchResult
        async def close(self) -> None

A fetcher returns a :class:`FetchResult` (any status: non-2xx are results)
or raises a :class:`~crawlfleet.errors.FetchError`. ``route`` says how the request leaves (direct,
or a proxy), ``session`` which identity it carries (cookies, user agent, headers). The HTTP fetcher
(:class:`crawlfleet.fetch.http.HttpFetcher`), the browser fetcher and the scripted one for tests
(:class:`crawlfleet.fetch.scripted.ScriptedFetcher`) all sit behind it; :class:`FetcherPool`
picks one by the request's fetcher kind among those a worker runs (``worker --kind``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from crawlfleet.errors import ConfigError
from crawlfleet.model import KINDS, kind_of

if TYPE_CHECKING:
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session

__all__ = [
    "HOP_BODY_MAX",
    "KINDS",
    "Exchange",
    "FetchRequest",
    "Fetcher",
    "FetcherPool",
    "HopCheck",
    "kind_of",
]

#: called with every redirect target before it is fetched; raises a FetchError to refuse it
HopCheck = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """What to fetch. ``max_body``/``truncate`` override the fetcher's size cap (robots.txt is
    read up to a cap and cut there); ``check_hop`` sees every redirect target first."""

    url: str
    method: str = "GET"
    body: bytes | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    max_body: int | None = None
    truncate: bool = False
    check_hop: HopCheck | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and the redirect that answered it, as archived: the response's headers and
    body as received (``body`` may be cut at :data:`HOP_BODY_MAX`: ``truncated``)."""

    url: str
    method: str
    request_headers: list[tuple[str, str]] = field(repr=False)
    request_body: bytes | None = field(repr=False)
    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]] = field(repr=False)
    body: bytes = field(repr=False)
    remote_ip: str | None
    truncated: bool = False


#: most bytes of a redirect's body read and archived (the rest is not read: a redirect's body
#: is a line of text for people whose client does not follow it)
HOP_BODY_MAX: Final = 64 * 1024


@dataclass(slots=True)
class FetchResult:
    """One response, after redirects (kept in ``hops``) and content decoding (the body as
    received kept in ``raw_body``)."""

    url: str
    """The final URL (after redirects)."""
    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]]
    """Response header pairs as received (order and duplicates kept)."""
    body: bytes
    """Decoded body (``Content-Encoding`` undone): what is parsed and hashed."""
    elapsed: float
    remote_ip: str | None
    request_headers: list[tuple[str, str]] = field(repr=False)
    """The headers sent on the final request (for WARC request records)."""
    redirects: list[str] = field(default_factory=list)
    """URLs that answered with a redirect, in order; ``url`` is where they led."""
    nbytes_wire: int = 0
    """Body bytes as received (before content decoding)."""
    truncated: bool = False
    """The body was cut at the cap because the caller asked for ``truncate=True``."""
    hop_cookies: list[tuple[str, str]] = field(default_factory=list, repr=False)
    """``(url, Set-Cookie value)`` of the redirect hops before ``url`` (a login's answer is
    often a redirect that sets the cookie): the session learns them with the final ones."""
    raw_body: bytes | None = field(default=None, repr=False)
    """The body as received (``Content-Encoding`` not undone), archived as it came; None when
    ``body`` is that already (no content-coding), or the fetcher only has the decoded body (a
    browser)."""
    hops: list[Exchange] = field(default_factory=list, repr=False)
    """The redirect exchanges before this response, in order (archived each as its own)."""
    method: str = ""
    """The method of the final request ("": the one asked for; a 303 makes it a GET)."""
    _header_map: CIMultiDictProxy[str] | None = field(default=None, repr=False, compare=False)

    @property
    def header_map(self) -> CIMultiDictProxy[str]:
        """Case-insensitive view of ``headers`` (``getall`` for repeated ones)."""
        if self._header_map is None:
            self._header_map = CIMultiDictProxy(CIMultiDict(self.headers))
        return self._header_map

    def header(self, name: str, default: str | None = None) -> str | None:
        """First value of header ``name`` (case-insensitive), or ``default``."""
        return self.header_map.get(name, default)

    def __repr__(self) -> str:
        return f"<FetchResult {self.status} {mask_url(self.url)} {len(self.body)} bytes>"


def mask_url(url: str) -> str:
    parsed = URL(url)
    return str(parsed.with_password("[secure]")) if parsed.password else url


class Fetcher(Protocol):
    """Fetches one request over a route, as a session; see the module docstring."""

    kind: str

    async def fetch(
        self,
        request: FetchRequest,
        *,
        route: Route | None = None,
        session: Session | None = None,
    ) -> FetchResult: ...

    async def close(self) -> None: ...


class FetcherPool:
    """The fetchers one worker runs, by kind; a request goes to the one of its kind."""

    def __init__(self, fetchers: Sequence[Fetcher]) -> None:
        self._by_kind = {f.kind: f for f in fetchers}

    @property
    def kinds(self) -> list[str]:
        return sorted(self._by_kind)

    def for_request(self, fetcher: str | None) -> Fetcher:
        kind = kind_of(fetcher)
        found = self._by_kind.get(kind)
        if found is None:
            # the lease only hands a worker requests of its kinds: this is a bug, not input
            raise ConfigError(f"this worker runs no {kind} fetcher (it runs {self.kinds})")
        return found

    async def close(self) -> None:
        for fetcher in self._by_kind.values():
            await fetcher.close()
