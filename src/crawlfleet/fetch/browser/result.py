"""What a browser fetch returns, and how the browser's failures map onto the error tree."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.errors import (
    AddressRefused,
    BrowserError,
    ConnectError,
    DataLoss,
    FetchError,
    FetchTimeout,
    InvalidURL,
    NotRenderable,
    TooManyRedirects,
)
from crawlfleet.fetch.base import FetchResult
from crawlfleet.urls import mask_credentials


@dataclass(frozen=True, slots=True)
class XhrResponse:
    """One XHR/``fetch()`` response with a JSON content type that the page received."""

    url: str
    status: int
    content_type: str
    body: bytes | None
    """The body, or None when it was over ``max_xhr_body`` / the per-page total, or could not
    be read (the page dropped it)."""
    method: str = "GET"

    def __repr__(self) -> str:
        size = "dropped" if self.body is None else f"{len(self.body)} bytes"
        return f"<XhrResponse {self.status} {mask_credentials(self.url)} {size}>"


@dataclass(slots=True)
class PageTimings:
    """Where the seconds of one browser fetch went."""

    admission: float = 0.0
    """Waiting for a context (all busy, memory tight, a restart in progress)."""
    navigation: float = 0.0
    """``goto`` until ``wait_until``, redirects included."""
    wait: float = 0.0
    """Waiting for the ``wait_for`` selector."""
    actions: float = 0.0
    """The caller's page actions (scrolling, clicks)."""
    capture: float = 0.0
    """Reading the document, the rendered DOM and the XHR bodies."""
    total: float = 0.0


@dataclass(slots=True, repr=False)
class BrowserResult(FetchResult):
    """A :class:`~crawlfleet.fetch.base.FetchResult` for the document, plus what the browser
    made of it.

    ``body`` and ``headers`` are the document response as received (decoded), so the result
    goes into a WARC response record like an HTTP fetch. ``http_version`` is always
    ``HTTP/1.1``: the browser does not report the protocol it used.
    """

    rendered_html: str = ""
    """The DOM after scripts ran (``page.content()``), when the page was read."""
    xhr: list[XhrResponse] = field(default_factory=list)
    """JSON responses to the page's XHR/``fetch()`` calls, in the order they arrived."""
    xhr_dropped: int = 0
    """XHR JSON responses not kept at all (past ``max_xhr``)."""
    timings: PageTimings = field(default_factory=PageTimings)
    page_url: str = ""
    """``location.href`` when the DOM was read (may differ from ``url`` after pushState)."""
    cookies: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """The context's cookies after the page (Playwright's form: name, value, domain, path,
    expires, secure, ...) when it carries a session: what the session's jar should become,
    cookies set by scripts included."""

    def __repr__(self) -> str:
        return (
            f"<BrowserResult {self.status} {mask_credentials(self.url)} {len(self.body)} bytes,"
            f" DOM {len(self.rendered_html)} chars, {len(self.xhr)} XHR>"
        )


# Chromium's net error names (net/base/net_error_list.h) as Playwright reports them.
_NET_ERROR = re.compile(r"net::(ERR_[A-Z_]+)")
_NET_ERRORS: dict[str, type[FetchError]] = {
    "ERR_TIMED_OUT": FetchTimeout,
    "ERR_CONNECTION_TIMED_OUT": FetchTimeout,
    "ERR_EMPTY_RESPONSE": DataLoss,
    "ERR_CONNECTION_CLOSED": DataLoss,
    "ERR_CONNECTION_RESET": DataLoss,
    "ERR_INCOMPLETE_CHUNKED_ENCODING": DataLoss,
    "ERR_CONTENT_LENGTH_MISMATCH": DataLoss,
    "ERR_CONTENT_DECODING_FAILED": DataLoss,
    "ERR_INVALID_CHUNKED_ENCODING": DataLoss,
    "ERR_RESPONSE_HEADERS_TRUNCATED": DataLoss,
    "ERR_TOO_MANY_REDIRECTS": TooManyRedirects,
    "ERR_INVALID_URL": InvalidURL,
    "ERR_INVALID_REDIRECT": InvalidURL,
    "ERR_UNSAFE_REDIRECT": AddressRefused,
    "ERR_UNSAFE_PORT": AddressRefused,
    "ERR_ACCESS_DENIED": AddressRefused,
}


def classify_error(message: str) -> type[FetchError]:
    """The error class for a Playwright error message (navigation errors, crashes)."""
    if "Download is starting" in message:
        return NotRenderable
    match = _NET_ERROR.search(message)
    if match:
        # Connection-level failures not listed (refused, DNS, TLS, proxy tunnel) are worth a
        # retry, perhaps over another route, as they are for the HTTP fetcher.
        return _NET_ERRORS.get(match.group(1), ConnectError)
    if "Timeout" in message and "exceeded" in message:
        return FetchTimeout
    return BrowserError
