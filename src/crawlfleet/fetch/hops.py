"""The rules every hop of an HTTP fetch follows, whichever client sends it (the HTTP and the
impersonating fetchers share them):

* a URL is parsed and refused before anything is sent when no hop may reach it: another
  scheme, no host, a private or loopback literal the crawl does not allow
  (:func:`checked_url`; a name is checked when it is resolved);
* a redirect is followed as RFC 9110 §15.4 says (:func:`redirected`): 303, and 301/302 of a
  POST, become a GET without body; ``Authorization`` and ``Cookie`` are dropped when the hop
  leaves the origin; the session's cookies for the new URL go along.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import ada_url
from multidict import CIMultiDict
from yarl import URL

from crawlfleet.errors import InvalidURL, UnsupportedScheme
from crawlfleet.fetch.base import mask_url
from crawlfleet.fetch.guard import GuardSettings, check_literal_host
from crawlfleet.fetch.tls import warn_unverified

if TYPE_CHECKING:
    from crawlfleet.routes.sessions import Session

__all__ = ["REDIRECT_STATUSES", "Hop", "as_given", "checked_url", "redirected"]

REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
_SCHEMES: Final = frozenset({"http", "https"})
# Credentials for one origin must not travel to another (RFC 9110 §15.4, httpx, requests).
_ORIGIN_BOUND_HEADERS: Final = ("Authorization", "Cookie")
_BODY_HEADERS: Final = ("Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding")


class HopSettings(GuardSettings, Protocol):
    """What the hop rules read of a fetcher's settings (``FetchSettings`` has it all)."""

    @property
    def tls_verify(self) -> bool: ...


@dataclass(slots=True)
class Hop:
    """One request of a fetch: the first, or one a redirect asks for."""

    url: URL
    method: str
    headers: CIMultiDict[str] | None
    body: bytes | None


def checked_url(url: str | URL, settings: HopSettings) -> URL:
    """Parse ``url`` and refuse what no hop may reach: other schemes, private literals."""
    try:
        parsed = url if isinstance(url, URL) else URL(url)
    except (ValueError, TypeError) as exc:
        raise InvalidURL(f"cannot parse URL {url!r}") from exc
    if parsed.scheme not in _SCHEMES:
        raise UnsupportedScheme(f"scheme {parsed.scheme!r} is not http(s)")
    if not parsed.host:
        raise InvalidURL(f"URL {mask_url(str(url))} has no host")
    check_literal_host(parsed.host, settings)
    if parsed.scheme == "https" and not settings.tls_verify:
        warn_unverified(parsed.host)
    return parsed


def as_given(url: str) -> URL | str:
    """``url`` as the request sends it: its WHATWG serialisation (what a browser sends), taken
    as already encoded so nothing in it is rewritten. A string ada cannot parse is left to yarl
    (which refuses it, or reads it its own way)."""
    try:
        href = ada_url.normalize_url(url)
    except ValueError:
        return url
    return URL(href, encoded=True)


def origin(url: URL) -> tuple[str, str | None, int | None]:
    return url.scheme, url.host, url.port


def redirected(
    request: Hop, status: int, location: str, settings: HopSettings, jar: Session | None = None
) -> Hop:
    """The request a redirect asks for (RFC 9110 §15.4), re-checked like a new one."""
    try:  # joined as a browser joins it (WHATWG), and sent as it is
        target = URL(ada_url.join_url(str(request.url), location), encoded=True)
    except (ValueError, TypeError) as exc:
        raise InvalidURL(f"bad redirect Location {location!r}") from exc
    target = checked_url(target.with_fragment(None), settings)
    headers = request.headers.copy() if request.headers else CIMultiDict()
    if origin(target) != origin(request.url):
        for name in _ORIGIN_BOUND_HEADERS:
            headers.popall(name, None)
    method, body = request.method, request.body
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body = "GET", None
        for name in _BODY_HEADERS:
            headers.popall(name, None)
    if jar is not None:  # the session's cookies for where the hop goes, not the last's
        headers.popall("Cookie", None)
        cookie = jar.cookie_header(str(target), time.time())
        if cookie is not None:
            headers["Cookie"] = cookie
    return Hop(url=target, method=method, headers=headers, body=body)
