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
import hashlib
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from crawlfleet.cache import DEFAULT_CACHE_MEMORY, BoundedSet, sizes
from crawlfleet.config.sections import WorkerSettings
from crawlfleet.data import jsonsafe
from crawlfleet.data.captures import Captures, Provenance
from crawlfleet.data.validate import (
    Invalid,
    invalid_from_exception,
    quarantine_row,
    record_validator,
)
from crawlfleet.errors import ParseError, TooComplex, TooManyItems
from crawlfleet.model import Job, NewRequest, QuarantineRow, RecordRow
from crawlfleet.policy.fetchers import DOMAIN, fetcher_for, probe_down_every
from crawlfleet.policy.traps import TrapRules, check_url, page_type, spider_overrides
from crawlfleet.request import STORED
from crawlfleet.response import Response
from crawlfleet.routes.pools import unknown_pool
from crawlfleet.spider import SITEMAP_CALLBACK, Request, Spider, session_params_of
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
    dropped: int = 0  # records the spider's process_record dropped
    #: requests refused for their pool (one the worker does not have), one line each
    pool_refused: list[str] = field(default_factory=list)
    #: what the spider got out of the page: items it yielded, and links it found (known or not)
    found: int = 0
    #: Requests refused alone, by why (a URL that is not a string, an unknown callback...)
    refused: Counter[str] = field(default_factory=Counter)
    #: the request whose page this is (the store notes which page found each new link)
    found_by: int | None = None
    #: the page is a sitemap: what it lists is the site's inventory (no links cap, no URL-shape
    #: budget), and the sitemaps it lists are judged by the sitemap rules, not the scope
    listed: bool = False


class RobotsVerdict(Protocol):
    def cached_verdict(self, url: str) -> bool | None: ...


#: most hosts whose scope verdict a job remembers (a broad crawl meets many)
SCOPE_HOSTS_MAX = 10_000


def _seen_key(fp: bytes) -> int:
    # 8 bytes of a 16-byte fingerprint: the in-memory set is a pre-filter, the store decides
    return int.from_bytes(fp[:8], "little")


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
        # (never None for the always-limited guards: spider_overrides leaves them out then)
        return TrapRules(**spider_overrides(own))  # type: ignore[arg-type]
    return settings.trap_rules(**own)


class JobRuntime:
    """Everything a worker keeps in memory for one job (caches only; the store has the truth).

    The caches (fingerprints of requests sent, link keys judged, links resolved, payloads
    archived) share ``cache_memory`` bytes (``[worker] cache_memory``) and forget the least
    recently used entries first: a forgotten link is resolved again and sent again, and the
    store's unique key drops it.
    """

    def __init__(
        self,
        job: Job,
        spider_cls: type[Spider],
        traps: TrapRules | None = None,
        cache_memory: int = DEFAULT_CACHE_MEMORY,
    ) -> None:
        self.job = job
        self.spider_cls = spider_cls
        self.spider = spider_cls()
        self.validator = record_validator(spider_cls)
        # the instance's: a spider may set start_urls or allowed_domains in __init__ (-a)
        self.scope = tuple(self.spider.scope_hosts())
        #: query and path parameters left out of fingerprints (crawlfleet's and the spider's)
        self.session_params = session_params_of(self.spider)
        size = sizes(cache_memory)
        self.links = LinkCanonicalizer(self.session_params, max_cache=size.links)
        #: fingerprints (their first 8 bytes) of requests this worker sent to the store
        self.seen: BoundedSet[int] = BoundedSet(size.seen)
        #: link keys already judged (see LinkCanonicalizer.key)
        self.handled: BoundedSet[object] = BoundedSet(size.handled)
        self.captures = Captures(size.captures)
        self._scope_of: dict[str, bool] = {}  # in_scope per host (bounded: cleared when big)
        self._callbacks: dict[str, bool] = {}  # whether the spider has a callback of that name
        #: the fetcher each page type ``(domain, URL pattern)`` was found to need (``auto``)
        self.page_types: dict[tuple[str, str], str] = {}
        #: page types this worker sent to the browser on suspicion, not judged there yet
        self.suspected: set[tuple[str, str]] = set()
        #: per domain: its probes down blocked in a row (``auto``: each halves the probe share)
        self.blocked_probes: dict[str, int] = {}
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
        #: most items one page's callback may yield, and seconds it may run (``[worker]``)
        self.max_yields = WorkerSettings.max_yields_per_page
        self.parse_timeout = WorkerSettings.parse_timeout

    # -- links ----------------------------------------------------------------------------------

    def seed_requests(self) -> list[NewRequest]:
        """The spider's start requests, canonical (seeds are never filtered by scope)."""
        out = []
        for req in self.spider.start_requests():
            canon, fp, _ = request_identity(
                req.url, req.method, req.body, session_params=self.session_params
            )
            out.append(self._new(req, canon, fp, 0))
        return out

    def _new(
        self,
        req: Request,
        canon: str,
        fp: bytes,
        depth: int,
        trap: str | None = None,
        cookiejar: str | None = None,
        host: str | None = None,
        found_by: int | None = None,
        listed: bool = False,
        session: str | None = None,
    ) -> NewRequest:
        meta = req.stored_meta()
        if meta is None or "cookiejar" not in meta:
            if cookiejar is not None:
                meta = {**(meta or {}), "cookiejar": cookiejar}
            elif session is not None:  # kept beside cb_kwargs, out of the spider's meta
                own = (meta or {}).get(STORED) or {}
                meta = {**(meta or {}), STORED: {**own, "session": session}}
        # positional, in NewRequest's field order: one per new link, the hot path of discovery
        return NewRequest(
            canon,
            fp,
            host if host is not None else host_of(canon),
            req.priority,
            depth,
            req.callback_name,
            meta,
            req.method,
            req.body,
            req.fetcher or self._fetcher_for(canon, fp),
            req.max_attempts,
            trap,
            req.headers,
            req.pool,
            found_by,
            req.lastmod,
            listed,
        )

    def link(
        self,
        req: Request,
        depth: int,
        out: PageOutput,
        robots: RobotsVerdict | None = None,
        cookiejar: str | None = None,
        session: str | None = None,
    ) -> None:
        """Queue ``req`` in ``out`` if it is in scope and new to this worker (a trap is queued
        marked as one: the store keeps it as ``dead(trap)``); past the page's
        ``max_links_per_page`` it is dropped and counted (``out.links_dropped``)."""
        if req.pool and self.pools is not None:
            reason = unknown_pool(req.pool, self.pools)
            if reason is not None:
                out.pool_refused.append(f"request {mask_credentials(req.url)} refused: {reason}")
                out.refused["a pool the worker does not have"] += 1
                return
        cap = self.traps.max_links_per_page
        if cap is not None and len(out.discovered) >= cap and not out.listed:
            out.links_dropped += 1  # not marked handled: another page may still add it
            return
        base = req.base
        if base is not None and req.method == "GET" and req.body is None:
            # fast path: most links of a page are the site's menus, already judged
            link_key = self.links.key(req.href, base)
            if not self.handled.add_new(link_key):
                return
            resolved = self.links.resolve_key(link_key, req.href, base)
            if resolved is None:
                return  # not http(s), or does not parse
            canon, fp, host = resolved
        else:  # an absolute URL without a page, or a request with a method or body of its own
            try:
                canon, fp, host = request_identity(
                    req.url, req.method, req.body, session_params=self.session_params
                )
            except ValueError:
                return
        # a sitemap a sitemap lists is judged by the sitemap rules (crawlfleet.sitemap), the
        # pages it lists by the scope as any link
        sitemap = out.listed and req.callback_name == SITEMAP_CALLBACK
        if not (sitemap or self._in_scope(host)) or not self.seen.add_new(_seen_key(fp)):
            return
        found_by, listed = out.found_by, out.listed
        trap = check_url(canon, depth, self.traps)
        if trap is not None:
            out.traps += 1
            out.discovered.append(
                self._new(req, canon, fp, depth, trap, cookiejar, host, found_by, listed, session)
            )
            return
        if robots is not None and robots.cached_verdict(canon) is False:
            out.robots_dropped += 1  # known disallowed: never worth a queue row
            return
        out.discovered.append(
            self._new(req, canon, fp, depth, None, cookiejar, host, found_by, listed, session)
        )

    def _in_scope(self, host: str) -> bool:
        known = self._scope_of.get(host)
        if known is None:
            if len(self._scope_of) >= SCOPE_HOSTS_MAX:
                self._scope_of.clear()
            known = self._scope_of[host] = in_scope(host, self.scope)
        return known

    def _fetcher_for(self, url: str, fp: bytes) -> str:
        """The fetcher of a new request with none of its own: the spider's; for ``auto``, the
        browser where its page type was found to need it, but for the odd probe back over HTTP
        (see :mod:`crawlfleet.policy.fetchers`)."""
        fetcher = self.spider_cls.fetcher
        if fetcher != "auto" or not self.page_types:
            return fetcher
        host = host_of(url)
        key = (host, page_type(url))
        return fetcher_for(
            fetcher,
            self.page_types.get(key),
            fingerprint=fp,
            domain_rung=self.page_types.get((host, DOMAIN)),
            down_every=probe_down_every(self.blocked_probes.get(host, 0)),
        )

    def unknown_links(self, hrefs: list[str], base: str) -> list[str]:
        """The plain links ``hrefs`` of a page at ``base`` not judged already (sent, or
        dropped: ``link`` would drop them again). ``follow_all`` builds Requests only for these."""
        return self.links.unknown(hrefs, base, self.handled)

    def resize(self, cache_memory: int) -> None:
        """Fit the caches in ``cache_memory`` bytes from now on (the worker took on another
        job: its budget is shared); a smaller budget forgets at once."""
        size = sizes(cache_memory)
        self.links.resize(size.links)
        self.seen.resize(size.seen)
        self.handled.resize(size.handled)
        self.captures.resize(size.captures)

    def forget(self, discovered: Iterable[NewRequest]) -> None:
        """The store refused the page (lease lost): its links must be sendable again."""
        self.handled.clear()
        for req in discovered:
            self.seen.discard(_seen_key(req.fingerprint))

    def forget_all(self) -> None:
        """Pages in flight were given back unreported (a local fault): every link is sendable
        again (the store dedupes what it has)."""
        self.handled.clear()
        self.seen.clear()

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
        cookiejar: str | None = None,
        session: str | None = None,
        deadline: float | None = None,
        found_by: int | None = None,
    ) -> PageOutput:
        """Run the callback on ``response``.

        Raises ParseError if the spider code fails, :class:`TooComplex` for a page past the
        nesting bounds (however the spider handled that) or a callback still running at
        ``deadline`` (``time.monotonic``), and :class:`TooManyItems` past
        :attr:`max_yields`. An item the store cannot use (a Request with a URL that is not a
        string, a callback the spider lacks) is refused alone and counted (``refused``); a
        record that fails validation is quarantined alone.

        The session the page's requests go with unless they name one (``meta["cookiejar"]``):
        ``cookiejar``, the one the page's own request named, else ``session``, the one that
        fetched the page when it holds cookies (followed, not named: see
        ``crawlfleet.routes.identities``)."""
        out = PageOutput(found_by=found_by, listed=callback == SITEMAP_CALLBACK)
        method = getattr(self.spider, callback or "parse", None)
        if method is None:
            raise ParseError(f"spider {self.spider_cls.__name__} has no callback {callback!r}")
        position = items = 0
        try:
            for obj in _iterate(method(response, **response.cb_kwargs)):
                items += 1
                if items > self.max_yields:
                    raise TooManyItems(
                        f"the callback yielded more than {self.max_yields:,} items "
                        "(worker.max_yields_per_page)"
                    )
                if deadline is not None and time.monotonic() > deadline:
                    raise TooComplex(f"the callback ran past {self.parse_timeout:g}s")
                out.found += obj is not None
                if isinstance(obj, Request):
                    why = self.refusal(obj)
                    if why is None:
                        self.link(obj, depth + 1, out, robots, cookiejar, session)
                    else:
                        out.refused[why] += 1
                elif obj is not None:
                    self._record(obj, page_url, position, fetched_at, warc, out)
                    position += 1
        except ValidationError as exc:  # the spider built its model with bad data
            out.quarantined.append(
                quarantine_row(invalid_from_exception(exc), page_url, fetched_at, warc)
            )
        except ParseError:
            raise
        except Exception as exc:
            if response.too_complex is None:
                raise ParseError(short_traceback(exc, spider_files(self.spider_cls))) from exc
        if response.too_complex is not None:  # even if the spider caught it and went on
            raise TooComplex(response.too_complex)
        out.found += response.links_found
        return out

    def refusal(self, req: Request) -> str | None:
        """Why the store cannot take ``req`` as a request of this spider, or None."""
        base = req.base
        if not isinstance(req.href, str) or not (base is None or isinstance(base, str)):
            return f"a Request URL must be a string, not {type(req.href).__name__}"
        name = req.callback_name
        if name is not None:
            known = self._callbacks.get(name)
            if known is None:
                if len(self._callbacks) >= 1_000:  # names the spider makes up as it goes
                    self._callbacks.clear()
                known = self._callbacks[name] = callable(getattr(self.spider, name, None))
            if not known:
                return f"unknown callback {name!r}"
        meta = req.stored_meta()
        if meta and (kind := jsonsafe.lenient_problem(meta)) is not None:
            what = "cb_kwargs" if req.meta and not jsonsafe.lenient_problem(req.meta) else "meta"
            return f"{what} that cannot be stored ({kind})"
        if req.errback is not None and not callable(
            getattr(self.spider, req.errback_name or "", None)
        ):
            return f"unknown errback {req.errback_name!r}"
        return None

    def sample(self, response: Response, callback: str | None) -> tuple[int, int]:
        """What the callback gets out of ``response``, keeping none of it: (items, links). Links
        are counted as offered (``follow_all`` builds no Request here); a spider error counts
        what came before it (the real parse is where errors are reported)."""
        method = getattr(self.spider, callback or "parse", None)
        items = links = 0
        if method is None:
            return items, links
        try:
            for obj in _iterate(method(response, **response.cb_kwargs)):
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
        obj = self.spider.process_record(obj)
        if obj is None:
            out.dropped += 1
            return
        checked = self.validator.check(obj, page_url=page_url, position=position)
        if isinstance(checked, Invalid):
            out.quarantined.append(quarantine_row(checked, page_url, fetched_at, warc))
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


def spider_files(spider_cls: type[Spider]) -> frozenset[str]:
    """The source files of a spider class and of its bases up to crawlfleet's ``Spider``."""
    files = set()
    for cls in spider_cls.__mro__:
        if cls is Spider or not issubclass(cls, Spider):
            continue
        module = sys.modules.get(cls.__module__)
        path = getattr(module, "__file__", None)
        if path:
            files.add(path)
    return frozenset(files)


def short_traceback(exc: BaseException, spider_files: frozenset[str] = frozenset()) -> str:
    """``Type: message at file:line in function`` of a spider's error, one line: the line is the
    last of the traceback in the spider's own files (``spider_files``), where the fix goes,
    else the last of all."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f.filename in spider_files] or frames
    where = f" at {own[-1].filename}:{own[-1].lineno} in {own[-1].name}" if own else ""
    message = str(exc)
    return f"{type(exc).__name__}: {message}{where}" if message else type(exc).__name__ + where
