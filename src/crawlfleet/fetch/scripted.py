"""A fetcher that answers from a function: unit tests of the attempt pipeline without sockets.

In the manner of httpx's ``MockTransport``::

    def site(request: FetchRequest) -> FetchResult:
        if request.url.endswith("/missing"):
            return page(request.url, 404, b"gone")
        return page(request.url, 200, b"<a href='/next'>next</a>")

    fetcher = ScriptedFetcher(site)

The handler may also raise a :class:`~crawlfleet.errors.FetchError` (a timeout, a refused
connection) or be a coroutine function. Every call is kept in ``calls`` (request, route,
session), so a test can check what went out and how.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlfleet.fetch.base import FetchRequest, FetchResult

if TYPE_CHECKING:
    from crawlfleet.routes.pools import Route
    from crawlfleet.routes.sessions import Session

__all__ = ["Call", "ScriptedFetcher", "page"]

Handler = Callable[[FetchRequest], FetchResult | Awaitable[FetchResult]]


def page(
    url: str,
    status: int = 200,
    body: bytes = b"",
    headers: Sequence[tuple[str, str]] = (("Content-Type", "text/html; charset=utf-8"),),
) -> FetchResult:
    """A response as the HTTP fetcher would return it."""
    return FetchResult(
        url=url,
        status=status,
        reason="OK" if status < 400 else "Error",
        http_version="HTTP/1.1",
        headers=list(headers),
        body=body,
        elapsed=0.001,
        remote_ip="192.0.2.1",
        request_headers=[("User-Agent", "crawlfleet-test")],
    )


@dataclass(frozen=True, slots=True)
class Call:
    request: FetchRequest
    route: Route | None
    session: Session | None


class ScriptedFetcher:
    """A :class:`~crawlfleet.fetch.base.Fetcher` whose answers come from ``handler``."""

    def __init__(self, handler: Handler, *, kind: str = "http") -> None:
        self.kind = kind
        self.handler = handler
        self.calls: list[Call] = []
        self.closed = False

    async def fetch(
        self,
        request: FetchRequest,
        *,
        route: Route | None = None,
        session: Session | None = None,
    ) -> FetchResult:
        self.calls.append(Call(request, route, session))
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        assert isinstance(answer, FetchResult)
        return answer

    async def close(self) -> None:
        self.closed = True
