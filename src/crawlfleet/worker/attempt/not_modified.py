"""The not-modified step: a ``304`` to the validators the request sent (its page's, kept from
the last run) ends the attempt as *unchanged*. The page is not parsed, its records of the last
run are carried over and its links stay as they are in the store; the exchange is archived as a
WARC ``revisit`` record (server-not-modified profile) of the page's last full capture."""

from __future__ import annotations

from collections.abc import Callable

from crawlfleet.model import Outcome
from crawlfleet.worker.attempt.snapshot import final_request_body, write_hops
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.attempt.verdict import Verdicts
from crawlfleet.worker.revisit import last_capture, sent_validators

__all__ = ["NotModified"]


class NotModified:
    def __init__(self, verdicts: Verdicts, clock: Callable[[], float]) -> None:
        self.verdicts = verdicts
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        result = a.result
        assert result is not None
        if result.status != 304 or not sent_validators(a.lease):
            return None
        a.outcome = Outcome.OK
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
            revisit_of=last_capture(a.lease),
            not_modified=True,
            as_received=result.raw_body,
        )
        return self.verdicts.completion(a, carry=True)
