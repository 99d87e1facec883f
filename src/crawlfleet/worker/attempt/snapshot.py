"""The snapshot step: the exchange archived in the WARC before anything judges it, as
received (content-coded bodies as they came), each redirect before it as its own exchange; a
payload archived before becomes a ``revisit`` record of its first capture; a rendered DOM is
linked to its response as a resource record."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crawlfleet.data.warc import mask_form_secrets
from crawlfleet.model import Lease
from crawlfleet.worker.attempt.state import Attempt, Verdict

if TYPE_CHECKING:
    from crawlfleet.data.warc import WarcWriter
    from crawlfleet.fetch.base import FetchResult

__all__ = ["Snapshot", "archived_body", "final_request_body", "mark_block", "write_hops"]


class Snapshot:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        result, rt = a.result, a.job.runtime
        assert result is not None
        a.digest = rt.content_hash(result.body)
        # The WARC's payload digest is over the body as received (still content-coded): the
        # content hash is it when there was no coding, else one more SHA-1, over fewer bytes.
        received = result.raw_body
        a.payload_digest = a.digest if received is None else rt.content_hash(received)
        a.earlier = rt.captures.get(a.payload_digest)  # the same bytes archived before
        write_hops(a.job.warc, result, a.lease, self.clock())
        a.warc = a.job.warc.write(
            url=result.url,
            method=result.method or a.lease.method,
            request_headers=result.request_headers,
            status=result.status,
            reason=result.reason,
            http_version=result.http_version,
            response_headers=result.headers,
            body=result.body,
            fetched_at=self.clock(),
            ip=result.remote_ip,
            request_body=final_request_body(a.lease, result),
            revisit_of=a.earlier,
            payload_sha1=a.payload_digest,
            as_received=received,
        )
        rendered = getattr(result, "rendered_html", None)
        if isinstance(rendered, str) and rendered:  # what the browser made of it, linked
            a.job.warc.write_resource(
                url=result.url,
                body=rendered.encode("utf-8", "surrogatepass"),
                content_type="text/html; charset=utf-8; crawlfleet=rendered-dom",
                fetched_at=self.clock(),
                concurrent_to=a.warc.record_id,
            )
        return None


def mark_block(a: Attempt, now: float) -> None:
    """The archived response was a block page: a metadata record says so (and why), so the
    snapshot is kept, never taken for the page."""
    if a.warc is None or a.result is None:
        return
    fields = [("crawlfleet-block", a.block_reason or "blocked")]
    if a.route is not None:
        fields.append(("crawlfleet-route", a.route.id))
    a.job.warc.write_metadata(
        url=a.result.url, fields=fields, fetched_at=now, refers_to=a.warc.record_id
    )


def archived_body(lease: Lease) -> bytes | None:
    """The request body as archived: a form's password masked. The request's own Content-Type
    says whether it is a form (the final hop of a redirected POST sent none)."""
    if not lease.body:
        return lease.body
    return mask_form_secrets(lease.body, list((lease.headers or {}).items()))


def write_hops(warc: WarcWriter, result: FetchResult, lease: Lease, fetched_at: float) -> None:
    """Archive the redirects that led to ``result``, each as its own request/response pair
    (a replay of the URL asked for then answers as the site did: 301, 302, ... and Location)."""
    for hop in result.hops:
        body = hop.request_body
        if body:  # a form's password masked, as the request's own Content-Type says
            body = mask_form_secrets(body, list((lease.headers or {}).items()))
        warc.write(
            url=hop.url,
            method=hop.method,
            request_headers=hop.request_headers,
            status=hop.status,
            reason=hop.reason,
            http_version=hop.http_version,
            response_headers=hop.headers,
            body=hop.body,
            fetched_at=fetched_at,
            ip=hop.remote_ip,
            request_body=body,
            truncated=hop.truncated,
        )


def final_request_body(lease: Lease, result: FetchResult) -> bytes | None:
    """The body the final request sent, as archived: none once a redirect made it a GET."""
    if result.method and result.method != lease.method.upper():
        return None
    return archived_body(lease)
