"""The classify step: data, a final answer (404, 410...), a block or an error. Only data goes
on to be parsed; a block page is marked as one in the WARC and never taken for data."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from crawlfleet.model import DeadReason, Outcome
from crawlfleet.policy.blocks import BlockKind
from crawlfleet.policy.classify import classify
from crawlfleet.policy.retry import parse_retry_after
from crawlfleet.worker.attempt.escalate import Escalate
from crawlfleet.worker.attempt.page import response_of
from crawlfleet.worker.attempt.snapshot import mark_block
from crawlfleet.worker.attempt.state import Attempt, Verdict
from crawlfleet.worker.attempt.verdict import Verdicts

if TYPE_CHECKING:
    from crawlfleet.fetch.base import FetchResult

__all__ = ["Classify"]

log = logging.getLogger("crawlfleet.worker")

#: most bytes of a plain-text error answer quoted in its failure
_PLAIN_REASON_MAX = 300


class Classify:
    def __init__(self, verdicts: Verdicts, escalate: Escalate, clock: Callable[[], float]) -> None:
        self.verdicts = verdicts
        self.escalate = escalate
        self.clock = clock

    async def __call__(self, a: Attempt) -> Verdict | None:
        result, rt = a.result, a.job.runtime
        assert result is not None
        response = response_of(a)
        try:
            verdict = rt.spider.is_blocked(response)
        except Exception:  # a broken hook must not pass a block page as data
            log.exception("%s.is_blocked raised", rt.spider_cls.__name__)
            verdict = None
        found = classify(
            result.status,
            result.header_map,
            response.body,  # the rendered DOM for a browser fetch
            spider_verdict=verdict,
            attempts=a.lease.attempts,
        )
        a.outcome = found.outcome
        if found.block.blocked:
            a.block_reason = found.block.reason
            if found.block.reason == "structure:scripts-only" and self.escalate.suspect(a):
                # a shell that scripts fill: for an auto spider, a page for the browser
                return self.escalate.to_browser(a, "a scripted shell over HTTP")
            mark_block(a, self.clock())
            climbed = self.escalate.climb(a, found.block.reason)
            if climbed is not None:
                return climbed
        if found.outcome is Outcome.OK:
            return None
        if found.outcome is Outcome.GONE:
            return self.verdicts.completion(a)
        if found.block.kind is BlockKind.EMPTY:  # one retry (classify), then dead(empty)
            final = found.outcome is Outcome.PERMANENT_ERROR
            dead = DeadReason.EMPTY if final else None
            return self.verdicts.fail(
                a, found.outcome, f"HTTP {result.status} (empty page)", dead=dead
            )
        retry_after = parse_retry_after(result.header_map.get("retry-after"), self.clock())
        # the classifier's reason, as `fetch` shows it: what to look at in the page
        blocked = ""
        if found.outcome is Outcome.BLOCKED:
            why = found.block.reason
            blocked = f" (block page: {why})" if why else " (block page)"
        said = _plain_reason(result) if found.outcome is Outcome.PERMANENT_ERROR else ""
        return self.verdicts.fail(
            a, found.outcome, f"HTTP {result.status}{blocked}{said}", retry=retry_after
        )


def _plain_reason(result: FetchResult) -> str:
    """A short plain-text answer's first line (``": CSRF token missing"``): what a 4xx said
    about the request is worth keeping with its dead letter."""
    content_type = (result.header("content-type") or "").lower()
    if not content_type.startswith("text/plain") or len(result.body) > _PLAIN_REASON_MAX:
        return ""
    line = result.body.decode("utf-8", "replace").strip().split("\n", 1)[0].strip()
    return f": {line}" if line else ""
