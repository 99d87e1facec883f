"""The snapshot step: the exchange archived in the WARC before anything judges it; a payload
archived before becomes a ``revisit`` record of its first capture; a rendered DOM is linked to
its response as a resource record."""

from __future__ import annotations

from collections.abc import Callable

from crawlfleet.data.warc import mask_form_secrets
from crawlfleet.model import Lease
from crawlfleet.worker.attempt.state import Attempt, Verdict

__all__ = ["Snapshot", "archived_body", "mark_block"]


class Snapshot:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        result, rt = a.result, a.job.runtime
        assert result is not None
        a.digest = rt.content_hash(result.body)
        a.earlier = rt.captures.get(a.digest)
        a.warc = a.job.warc.write(
            url=result.url,
            method=a.lease.method,
            request_headers=result.request_headers,
            status=result.status,
            reason=result.reason,
            http_version=result.http_version,
            response_headers=result.headers,
            body=result.body,
            fetched_at=self.clock(),
            ip=result.remote_ip,
            request_body=archived_body(a.lease),
            revisit_of=a.earlier,
            payload_sha1=a.digest,
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
