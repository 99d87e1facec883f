"""The spider's :class:`~crawlfleet.response.Response` of an attempt: the raw document, or the
DOM a browser rendered, built once (the spider's block test and its callback share it)."""

from __future__ import annotations

from collections.abc import Callable

from crawlfleet.response import Response
from crawlfleet.worker.attempt.state import Attempt

__all__ = ["page", "rendered_body", "response_of"]


def response_of(a: Attempt) -> Response:
    """The attempt's Response, built on first use: a browser fetch is parsed from its DOM."""
    if a.response is not None:
        return a.response
    result = a.result
    assert result is not None
    body, encoding = result.body, None
    rendered = getattr(result, "rendered_html", None)
    if isinstance(rendered, str) and rendered:
        body, encoding = rendered_body(rendered)
    a.response = page(a, body, encoding, a.job.runtime.unknown_links)
    return a.response


def rendered_body(rendered: str) -> tuple[bytes, str]:
    """A browser's rendered DOM as a page body and its encoding."""
    return rendered.encode("utf-8", "surrogatepass"), "utf-8"


def page(
    a: Attempt,
    body: bytes,
    encoding: str | None,
    unknown_links: Callable[[list[str], str], list[str]] | None,
) -> Response:
    """The spider's Response for the attempt's result, with ``body`` as the page."""
    result = a.result
    assert result is not None
    return Response(
        result.url,
        result.status,
        result.header_map,
        body,
        encoding=encoding,
        meta=a.lease.meta,
        depth=a.lease.depth,
        request_url=a.lease.url,
        unknown_links=unknown_links,
    )
