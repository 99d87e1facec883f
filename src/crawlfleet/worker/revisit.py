"""What a worker keeps of a page from one run to the next, and what it sends for it.

The store keeps, per request, a small JSON document the worker writes at each completion and the
lease hands back (``Lease.page``):

* ``etag`` / ``last_modified``: the validators of the last full response, sent back as
  ``If-None-Match`` / ``If-Modified-Since`` (a request that sets either itself sends its own);
* ``hash``: the SHA-1 of the last body (hex), and ``status``: its status, which tell an
  unchanged page from a changed one when the server sends no validators;
* ``interval``: the page's revisit interval (adaptive revisit, :mod:`crawlfleet.policy.revisit`);
* ``capture``: the WARC record of the last full response (file, record id, target URI, date),
  which a ``304``'s revisit record refers to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawlfleet.model import Lease, Visit
from crawlfleet.policy.revisit import Change, RevisitRule, next_interval

if TYPE_CHECKING:
    from crawlfleet.data.warc import Capture
    from crawlfleet.spider import Spider

__all__ = [
    "conditional_headers",
    "last_capture",
    "page_after",
    "revisit_rule",
    "sent_validators",
    "visit_of",
]

_CONDITIONS = ("if-none-match", "if-modified-since")


def conditional_headers(
    lease: Lease, headers: Mapping[str, str] | None
) -> Mapping[str, str] | None:
    """The request's headers with the validators of its page's last response (none kept, or
    the request sets its own: as they are)."""
    page = lease.page
    etag, modified = page.get("etag"), page.get("last_modified")
    if not etag and not modified:
        return headers
    if headers and any(name.lower() in _CONDITIONS for name in headers):
        return headers
    out = dict(headers or {})
    if etag:
        out["If-None-Match"] = str(etag)
    if modified:
        out["If-Modified-Since"] = str(modified)
    return out


def sent_validators(lease: Lease) -> bool:
    """Whether the fetch of ``lease`` was conditional (a ``304`` then means unchanged)."""
    return bool(lease.page.get("etag") or lease.page.get("last_modified"))


def visit_of(lease: Lease, status: int, digest: bytes | None) -> Visit:
    """What this fetch found against the page's last one."""
    page = lease.page
    if not page.get("hash") and not page.get("status"):
        return Visit.NEW
    if status == 304:
        return Visit.NOT_MODIFIED
    same = digest is not None and page.get("hash") == digest.hex()
    return Visit.UNCHANGED if same and page.get("status") == status else Visit.CHANGED


_RULES: dict[tuple[type[Spider], str | None], RevisitRule | None] = {}


def revisit_rule(spider_cls: type[Spider], callback: str | None) -> RevisitRule | None:
    """The revisit rule of a spider's pages of ``callback`` (``revisit_rules``, else
    ``revisit_min`` / ``revisit_max``); None: every run revisits them. The spider's values
    were checked at intake (``crawlfleet.intake``)."""
    key = (spider_cls, callback)
    if key not in _RULES:
        if len(_RULES) > 1_000:
            _RULES.clear()
        own = spider_cls.revisit_rules.get(callback or "parse")
        rule = RevisitRule.of(*own) if own is not None else None
        _RULES[key] = rule or RevisitRule.of(spider_cls.revisit_min, spider_cls.revisit_max)
    return _RULES[key]


def page_after(
    lease: Lease,
    visit: Visit,
    *,
    status: int,
    headers: Mapping[str, str],
    digest: bytes | None,
    rule: RevisitRule | None,
    capture: Capture | None,
) -> tuple[dict[str, Any], float | None]:
    """The page's document after this visit, and its revisit interval (None: no rule).

    A ``304`` keeps the last full response's hash, status and capture, and takes any fresher
    validators it sends; a full response replaces them all."""
    page = dict(lease.page)
    etag, modified = headers.get("etag"), headers.get("last-modified")
    if visit is Visit.NOT_MODIFIED:
        if etag:
            page["etag"] = etag
        if modified:
            page["last_modified"] = modified
    else:
        page = {"status": status}
        if etag:
            page["etag"] = etag
        if modified:
            page["last_modified"] = modified
        if digest is not None:
            page["hash"] = digest.hex()
        if capture is not None:
            page["capture"] = [capture.file, capture.record_id, capture.target_uri, capture.date]
    interval = None
    if rule is not None:
        change = {
            Visit.NEW: Change.NEW,
            Visit.CHANGED: Change.CHANGED,
            Visit.UNCHANGED: Change.UNCHANGED,
            Visit.NOT_MODIFIED: Change.UNCHANGED,
        }[visit]
        old = lease.page.get("interval")
        interval = next_interval(rule, float(old) if isinstance(old, int | float) else None, change)
        page["interval"] = interval
    return page, interval


def last_capture(lease: Lease) -> Capture | None:
    """The WARC record of the page's last full response, if the job kept it."""
    from crawlfleet.data.warc import Capture

    kept = lease.page.get("capture")
    if not isinstance(kept, list) or len(kept) != 4:
        return None
    file, record_id, target_uri, date = kept
    return Capture(file, str(record_id), str(target_uri), str(date))
