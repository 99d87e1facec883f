"""One job's view inside a worker: its spider, scope, link dedup, and what a page produces.

``JobRuntime.process`` turns a fetched response into what the store needs in one transaction:
validated records, quarantined records, and the new links worth sending (in scope, not seen by
this worker before). The worker around it only moves data; this is where a page's output is
judged.

A link that looks like a crawler trap (too deep, too long, repetitive: :func:`check_url`) is not
dropped: it goes to the store marked as a trap and stays there as ``dead(trap)``, counted per
domain. The budgets (pages per host, per URL pattern) are counted by the store itself, at enqueue,
so they hold across the whole fleet.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import traceback
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from crawlfleet.data.validate import Invalid, RecordValidator, invalid_from_exception
from crawlfleet.data.warc import Capture
from crawlfleet.errors import ParseError, SpiderLoadError
from crawlfleet.model import (
    Job,
    NewRequest,
    QuarantineRow,
    RecordRow,
)
from crawlfleet.policy.traps import TrapRules, check_url, page_type
from crawlfleet.response import Response
from crawlfleet.spider import Request, Spider
from crawlfleet.urls import (
    LinkCanonicalizer,
    credentials_by_origin,
    host_of,
    in_scope,
    mask_credentials,
    request_identity,
)

if TYPE_CHECKING:
    from crawlfleet.config import Settings


@dataclass(slots=True)
class PageOutput:
    records: list[RecordRow] = field(default_factory=list)
    quarantined: list[QuarantineRow] = field(default_factory=list)
    discovered: list[NewRequest] = field(default_factory=list)
    traps: int = 0
    robots_dropped: int = 0
    #: new links past the page's ``max_links_per_page``: dropped, not queued
    links_dropped: int = 0
    #: requests refused for themselves (a pool the worker does not have), one line each
    refused: list[str] = field(default_factory=list)
    #: what the spider got out of the page: items it yielded, and links it found (known or not)
    found: int = 0


class RobotsVerdict(Protocol):
    def cached_verdict(self, url: str) -> bool | None: ...


#: most link keys remembered as handled before the set starts over (memory bound)
HANDLED_MAX = 500_000
#: one in this many new requests of a page type that needs the browser tries HTTP again
PROBE_EVERY = 16
#: most archived payloads remembered for WARC revisit records (least recently used go first)
CAPTURES_MAX = 50_000


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a page's records come from: its WARC record, and the first capture of the same
    payload when the page was archived as a revisit (``refers_to_*``)."""

    file: str | None = None
    record_id: str | None = None
    refers_to_file: str | None = None
    refers_to: str | None = None


class Captures:
    """Payloads this worker archived in full, by content hash: a later page with the same bytes
    is archived as a ``revisit`` of the first capture instead of storing the bytes again.

    A capture is remembered as soon as its page is judged data (not a block or an error): the
    revisit follows it in the same WARC stream, so whenever the revisit is durable, so is the
    capture. Whether the store took the page is noted apart (:meth:`confirm`): only such pages
    count as parsed for a spider's ``skip_duplicate_content`` (a refused lease's page is fetched
    again elsewhere, and its records come from there). A cache: bounded, and a miss only costs a
    full copy in the WARC, never a page or a record.
    """

    def __init__(self, max_size: int = CAPTURES_MAX) -> None:
        self.max_size = max_size
        self._by_hash: OrderedDict[bytes, Capture] = OrderedDict()
        self._confirmed: set[bytes] = set()

    def get(self, digest: bytes) -> Capture | None:
        capture = self._by_hash.get(digest)
        if capture is not None:
            self._by_hash.move_to_end(digest)
        return capture

    def remember(self, digest: bytes, capture: Capture) -> None:
        self._by_hash.setdefault(digest, capture)
        if len(self._by_hash) > self.max_size:
            gone, _ = self._by_hash.popitem(last=False)
            self._confirmed.discard(gone)

    def confirm(self, digest: bytes) -> None:
        """The store accepted a page with this content: its output is in the store."""
        if digest in self._by_hash:
            self._confirmed.add(digest)

    def parsed(self, digest: bytes) -> bool:
        """Whether a page with this content was parsed and its output accepted by the store."""
        return digest in self._confirmed

    def __len__(self) -> int:
        return len(self._by_hash)


def _seen_key(fp: bytes) -> int:
    # 8 bytes of a 16-byte fingerprint: the in-memory set is a pre-filter, the store decides
    return int.from_bytes(fp[:8], "little")


def record_validator(spider_cls: type[Spider]) -> RecordValidator:
    """The spider's record checks (``item``, ``item_key``); a bad ``item_key`` is refused with
    one line naming the spider (:class:`~crawlfleet.errors.SpiderLoadError`)."""
    try:
        return RecordValidator(spider_cls.item, spider_cls.item_key)
    except (TypeError, ValueError) as exc:
        raise SpiderLoadError(f"spider {spider_cls.__name__}: {exc}") from None


def trap_rules(spider_cls: type[Spider], settings: Settings | None = None) -> TrapRules:
    """A spider's trap guards: its own attributes, else ``[traps]`` from the settings."""
    own = {
        "max_depth": spider_cls.max_depth,
        "max_url_length": spider_cls.max_url_length,
        "max_repeated_segments": spider_cls.max_repeated_segments,
        "host_page_budget": spider_cls.host_page_budget,
        "pattern_budget": spider_cls.pattern_budget,
        "max_links_per_page": spider_cls.max_links_per_page,
    }
    if settings is None:
        return TrapRules(**{k: v for k, v in own.items() if v is not None})
    return settings.trap_rules(**own)


class JobRuntime:
    """Everything a worker keeps in memory for one job (caches only; the store has the truth)."""

    def __init__(self, job: Job, spider_cls: type[Spider], traps: TrapRules | None = None) -> None:
        self.job = job
        self.spider_cls = spider_cls
        self.spider = spider_cls()
        self.validator = record_validator(spider_cls)
        self.scope = tuple(spider_cls.scope_hosts())
        self.links = LinkCanonicalizer()
        self.seen: set[int] = set()
        self.handled: set[object] = set()  # link keys already judged (see LinkCanonicalizer.key)
        self.captures = Captures()
        #: the fetcher each page type ``(domain, URL pattern)`` was found to need (``auto``)
        self.page_types: dict[tuple[str, str], str] = {}
        #: page types this worker sent to the browser on suspicion, not judged there yet
        self.suspected: set[tuple[str, str]] = set()
        self.traps = traps or trap_rules(spider_cls)
        self.max_attempts = spider_cls.max_attempts
        #: the route pools a request may name (``Request(pool=...)``); None: not checked here
        self.pools: frozenset[str] | None = None
        #: ``Authorization`` for the origins whose start URLs carry credentials (split off at
        #: intake: the store never has them; only the fetch of that origin sends them)
        self.authorization = {
            origin: basic_authorization(*credentials)
            for origin, credentials in credentials_by_origin(self.spider.start_urls).items()
        }

    # -- links ----------------------------------------------------------------------------------

    def seed_requests(self) -> list[NewRequest]:
        """The spider's start requests, canonical (seeds are never filtered by scope)."""
        out = []
        for req in self.spider.start_requests():
            canon, fp, _ = request_identity(req.url, req.method, req.body)
            out.append(self._new(req, canon, fp, 0))
        return out

    def _new(
        self, req: Request, canon: str, fp: bytes, depth: int, trap: str | None = None
    ) -> NewRequest:
        return NewRequest(
            url=canon,
            fingerprint=fp,
            domain=host_of(canon),
            priority=req.priority,
            depth=depth,
            callback=req.callback_name,
            meta=req.meta or None,
            method=req.method,
            body=req.body,
            fetcher=req.fetcher or self._fetcher_for(canon, fp),
            max_attempts=req.max_attempts,
            trap=trap,
            pool=req.pool,
        )

    def link(
        self, req: Request, depth: int, out: PageOutput, robots: RobotsVerdict | None = None
    ) -> None:
        """Queue ``req`` in ``out`` if it is in scope and new to this worker (a trap is queued
        marked as one: the store keeps it as ``dead(trap)``); past the page's
        ``max_links_per_page`` it is dropped and counted (``out.links_dropped``)."""
        if req.pool and self.pools is not None:
            reason = unknown_pool(req.pool, self.pools)
            if reason is not None:
                out.refused.append(f"request {mask_credentials(req.url)} refused: {reason}")
                return
        cap = self.traps.max_links_per_page
        if cap is not None and len(out.discovered) >= cap:
            out.links_dropped += 1  # not marked handled: another page may still add it
            return
        base = req.base
        if base is not None and req.method == "GET" and req.body is None:
            # fast path: most links of a page are the site's menus, already judged
            link_key = self.links.key(req.href, base)
            if link_key in self.handled:
                return
            if len(self.handled) >= HANDLED_MAX:
                self.handled.clear()
            self.handled.add(link_key)
            resolved = self.links.resolve_key(link_key, req.href, base)
            if resolved is None:
                return  # not http(s), or does not parse
            canon, fp, host = resolved
        else:  # an absolute URL without a page, or a request with a method or body of its own
            try:
                canon, fp, host = request_identity(req.url, req.method, req.body)
            except ValueError:
                return
        key = _seen_key(fp)
        if key in self.seen or not in_scope(host, self.scope):
            return
        self.seen.add(key)
        trap = check_url(canon, depth, self.traps)
        if trap is not None:
            out.traps += 1
            out.discovered.append(self._new(req, canon, fp, depth, trap))
            return
        if robots is not None and robots.cached_verdict(canon) is False:
            out.robots_dropped += 1  # known disallowed: never worth a queue row
            return
        out.discovered.append(self._new(req, canon, fp, depth))

    def _fetcher_for(self, url: str, fp: bytes) -> str:
        """The fetcher of a new request with none of its own: the spider's; for ``auto``, the
        browser where its page type was found to need it (but for one in ``PROBE_EVERY``, sent
        to HTTP again to learn whether it still does)."""
        fetcher = self.spider_cls.fetcher
        if fetcher != "auto" or not (self.page_types or self.suspected):
            return fetcher
        key = (host_of(url), page_type(url))
        needs = self.page_types.get(key)
        if needs is None and key in self.suspected:
            return "browser"
        if needs == "browser" and fp[0] % PROBE_EVERY:
            return "browser"
        return fetcher

    def unknown_links(self, hrefs: list[str], base: str) -> list[str]:
        """The plain links ``hrefs`` of a page at ``base`` not judged already (sent, or
        dropped: ``link`` would drop them again). ``follow_all`` builds Requests only for these."""
        return self.links.unknown(hrefs, base, self.handled)

    def forget(self, discovered: Iterable[NewRequest]) -> None:
        """The store refused the page (lease lost): its links must be sendable again."""
        self.handled.clear()
        for req in discovered:
            self.seen.discard(_seen_key(req.fingerprint))

    # -- pages ----------------------------------------------------------------------------------

    def content_hash(self, body: bytes) -> bytes:
        """The body's SHA-1: the WARC payload digest too (computed once; WARC readers dedupe
        and verify by it). SHA-1 runs on the CPU's SHA extensions where present."""
        return hashlib.sha1(body).digest()  # noqa: S324 - a content digest, not a signature

    def process(
        self,
        response: Response,
        *,
        robots: RobotsVerdict | None = None,
        page_url: str,
        callback: str | None,
        depth: int,
        fetched_at: float,
        warc: Provenance,
    ) -> PageOutput:
        """Run the callback on ``response``; raises ParseError if the spider code fails."""
        out = PageOutput()
        method = getattr(self.spider, callback or "parse", None)
        if method is None:
            raise ParseError(f"spider {self.spider_cls.__name__} has no callback {callback!r}")
        position = 0
        try:
            for obj in _iterate(method(response)):
                out.found += obj is not None
                if isinstance(obj, Request):
                    self.link(obj, depth + 1, out, robots)
                elif obj is not None:
                    self._record(obj, page_url, position, fetched_at, warc, out)
                    position += 1
        except ValidationError as exc:  # the spider built its model with bad data
            self._quarantine(invalid_from_exception(exc), page_url, fetched_at, warc, out)
        except Exception as exc:
            raise ParseError(_short_traceback(exc)) from exc
        out.found += response.links_found
        return out

    def sample(self, response: Response, callback: str | None) -> tuple[int, int]:
        """What the callback gets out of ``response``, keeping none of it: (items, links). Links
        are counted as offered (``follow_all`` builds no Request here); a spider error counts
        what came before it (the real parse is where errors are reported)."""
        method = getattr(self.spider, callback or "parse", None)
        items = links = 0
        if method is None:
            return items, links
        try:
            for obj in _iterate(method(response)):
                if isinstance(obj, Request):
                    links += 1
                elif obj is not None:
                    items += 1
        except Exception:  # noqa: S110 - see above
            pass
        return items, links + response.links_found

    def _record(
        self,
        obj: Any,
        page_url: str,
        position: int,
        fetched_at: float,
        warc: Provenance,
        out: PageOutput,
    ) -> None:
        checked = self.validator.check(obj, page_url=page_url, position=position)
        if isinstance(checked, Invalid):
            self._quarantine(checked, page_url, fetched_at, warc, out)
        else:
            out.records.append(
                RecordRow(
                    checked.key,
                    checked.data,
                    page_url,
                    fetched_at,
                    warc.file,
                    warc.record_id,
                    warc.refers_to_file,
                    warc.refers_to,
                )
            )

    @staticmethod
    def _quarantine(
        invalid: Invalid,
        page_url: str,
        fetched_at: float,
        warc: Provenance,
        out: PageOutput,
    ) -> None:
        out.quarantined.append(
            QuarantineRow(
                invalid.data,
                invalid.errors,
                page_url,
                fetched_at,
                warc.file,
                warc.record_id,
                warc.refers_to_file,
                warc.refers_to,
            )
        )


def unknown_pool(names: Iterable[str], known: Iterable[str]) -> str | None:
    """Why a request naming route pools ``names`` cannot be queued (one line), or None if every
    one of them is in ``known``."""
    pools = sorted(known)
    for name in names:
        if name not in pools:
            close = difflib.get_close_matches(name, pools, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"no route pool named {name!r}{hint}"
    return None


def basic_authorization(user: str, password: str) -> str:
    """The HTTP Basic ``Authorization`` value for ``user`` and ``password`` (RFC 7617, UTF-8)."""
    token = base64.b64encode(f"{user}:{password}".encode("utf-8", "surrogatepass"))
    return f"Basic {token.decode('ascii')}"


def _iterate(result: Any) -> Iterator[Any]:
    if result is None:
        return iter(())
    if isinstance(result, (Request, dict)) or not isinstance(result, Iterable):
        return iter((result,))
    return iter(result)


def _short_traceback(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
