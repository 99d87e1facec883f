"""What a worker keeps of a page between runs and sends for it: conditional headers, what a
visit found, the page's document after it."""

from __future__ import annotations

from typing import Any

import pytest

from crawlfleet.data.warc import Capture
from crawlfleet.model import Lease, Visit
from crawlfleet.policy.revisit import RevisitRule
from crawlfleet.worker.revisit import (
    conditional_headers,
    last_capture,
    page_after,
    sent_validators,
    visit_of,
)

SHA = bytes(range(20))
CAPTURE = ["w.warc.gz", "<urn:uuid:1>", "https://a.test/p", "2024-05-01T12:00:00Z"]


def lease(**page: Any) -> Lease:
    return Lease(1, "j", "https://a.test/p", "a.test", 0, 0, None, {}, "GET", None, None, 1, 5, 1,
                 0.0, 0.0, page=page)  # fmt: skip


@pytest.mark.parametrize(
    ("page", "own", "sent"),
    [
        ({}, None, None),  # a first fetch: nothing conditional
        ({"etag": '"v1"'}, None, {"If-None-Match": '"v1"'}),
        ({"last_modified": "Wed, 01 May 2024 12:00:00 GMT"}, {"Accept": "x"},
         {"Accept": "x", "If-Modified-Since": "Wed, 01 May 2024 12:00:00 GMT"}),
        ({"etag": '"v1"', "last_modified": "M"}, None,
         {"If-None-Match": '"v1"', "If-Modified-Since": "M"}),
        ({"etag": '"v1"'}, {"if-none-match": "*"}, {"if-none-match": "*"}),  # the request's own
    ],
)  # fmt: skip
def test_conditional_headers(
    page: dict[str, str], own: dict[str, str] | None, sent: dict[str, str] | None
) -> None:
    assert conditional_headers(lease(**page), own) == sent
    assert sent_validators(lease(**page)) is bool(page)


@pytest.mark.parametrize(
    ("page", "status", "digest", "visit"),
    [
        ({}, 200, SHA, Visit.NEW),
        ({"hash": SHA.hex(), "status": 200, "etag": "x"}, 304, None, Visit.NOT_MODIFIED),
        ({"hash": SHA.hex(), "status": 200}, 200, SHA, Visit.UNCHANGED),
        ({"hash": SHA.hex(), "status": 200}, 200, b"\x00" * 20, Visit.CHANGED),
        ({"hash": SHA.hex(), "status": 200}, 404, SHA, Visit.CHANGED),  # gone now
        ({"status": 404}, 404, None, Visit.CHANGED),  # no body hash to compare
    ],
)
def test_visit_of(page: dict[str, Any], status: int, digest: bytes | None, visit: Visit) -> None:
    assert visit_of(lease(**page), status, digest) is visit


def test_page_after_a_full_response_and_a_304() -> None:
    rule = RevisitRule(3_600.0, 86_400.0)
    capture = Capture(*CAPTURE)
    first, interval = page_after(
        lease(),
        Visit.NEW,
        status=200,
        headers={"etag": '"v1"', "last-modified": "M1"},
        digest=SHA,
        rule=rule,
        capture=capture,
    )
    assert first == {"status": 200, "etag": '"v1"', "last_modified": "M1", "hash": SHA.hex(),
                     "capture": CAPTURE, "interval": 3_600.0}  # fmt: skip
    assert interval == 3_600.0
    again, interval = page_after(
        lease(**first), Visit.NOT_MODIFIED, status=304, headers={"etag": '"v2"'}, digest=None,
        rule=rule, capture=None,
    )  # fmt: skip
    # a 304 keeps the last full response's hash and capture, takes fresher validators, and the
    # interval grows
    assert again == {**first, "etag": '"v2"', "interval": 5_400.0} and interval == 5_400.0
    assert last_capture(lease(**again)) == capture
    plain, none = page_after(lease(), Visit.NEW, status=200, headers={}, digest=SHA, rule=None,
                             capture=None)  # fmt: skip
    assert plain == {"status": 200, "hash": SHA.hex()} and none is None
    assert last_capture(lease()) is None
