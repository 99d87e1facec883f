"""After the verdict: a request that ends dead calls its errback (``Request(errback=...)``), as
Scrapy's do, with a :class:`~crawlfleet.request.RequestFailure`. The dead letter is kept either
way; the errback runs in the callback thread with the callback's time budget, its errors are
logged (never the request's), and what it returns or yields is not used (a warning says so)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from crawlfleet.model import Failure, Lease
from crawlfleet.request import STORED, Request, RequestFailure
from crawlfleet.urls import mask_credentials
from crawlfleet.worker.attempt.state import Attempt
from crawlfleet.worker.offloop import OffLoop

__all__ = ["Errback"]

log = logging.getLogger("crawlfleet.worker")


class Errback:
    def __init__(self, offloop: OffLoop) -> None:
        self.offloop = offloop

    async def __call__(self, a: Attempt, dead: Failure) -> None:
        own = (a.lease.meta or {}).get(STORED) or {}
        name = own.get("errback") if isinstance(own, Mapping) else None
        if not name:
            return
        spider = a.job.runtime.spider
        url = mask_credentials(a.lease.url)
        method = getattr(spider, name, None)
        if not callable(method):
            log.warning("%s has no errback %r (for %s)", type(spider).__name__, name, url)
            return
        reason = dead.dead_reason.value if dead.dead_reason is not None else ""
        failure = RequestFailure(_request_of(a.lease, own), reason, dead.error, dead.status)

        def call(_: float) -> int:
            return sum(1 for obj in _iterate(method(failure)) if obj is not None)

        try:
            unused = await self.offloop.run(call, a.job.runtime.parse_timeout)
        except Exception as exc:
            log.warning("errback %s of %s raised %s: %s", name, url, type(exc).__name__, exc)
            return
        if unused:
            log.warning(
                "errback %s of %s returned %d items: an errback's output is not used (yield "
                "records and requests from callbacks)",
                name,
                url,
                unused,
            )


def _request_of(lease: Lease, own: Mapping[str, Any]) -> Request:
    """The dead request as its errback sees it (URL, method, body, meta, cb_kwargs, callback)."""
    meta = {k: v for k, v in (lease.meta or {}).items() if k != STORED}
    cb_kwargs = own.get("cb_kwargs")
    return Request(
        lease.url,
        lease.callback,
        meta=meta,
        method=lease.method,
        body=lease.body,
        cb_kwargs=cb_kwargs if isinstance(cb_kwargs, Mapping) else None,
    )


def _iterate(result: Any) -> Iterable[Any]:
    if result is None:
        return ()
    if isinstance(result, (Request, dict, str, bytes)) or not isinstance(result, Iterable):
        return (result,)
    return result
