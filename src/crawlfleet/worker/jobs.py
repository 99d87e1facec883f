"""What a worker keeps open per job: the spider and its caches, fetchers, robots gate, WARC.

:class:`JobContexts` loads a job the first time one of its leases arrives (once, however many
leases arrive together), and remembers a job it cannot load here (no such spider on this
machine) so that the worker stops leasing it. Everything here is a cache or a handle: the store
has the truth, and a worker that dies loses nothing but these.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crawlfleet.cache import share
from crawlfleet.config import Settings
from crawlfleet.config.custom_settings import for_spider
from crawlfleet.data.rawstore import RawStore, open_raw_store
from crawlfleet.data.warc import WarcWriter, recover
from crawlfleet.errors import CrawlfleetError, RawStoreUnavailable, SpiderLoadError
from crawlfleet.fetch.base import Fetcher, FetcherPool
from crawlfleet.fetch.http import FetchSettings, HttpClient, HttpFetcher
from crawlfleet.fetch.impersonate import ImpersonateClient, ImpersonateFetcher
from crawlfleet.fetch.robots import RobotsCache, RobotsGate
from crawlfleet.frontier.ports import Jobs, Pacing
from crawlfleet.routes.pools import DIRECT, Route, RoutesConfig
from crawlfleet.spiders import load_job_spider
from crawlfleet.worker.extract import JobRuntime, trap_rules

if TYPE_CHECKING:
    from crawlfleet.fetch.browser import BrowserSettings
    from crawlfleet.spider import Spider

#: seconds between reloads of an ``auto`` job's page types: what other workers judged
PAGE_TYPES_REFRESH = 10.0

__all__ = ["JobContext", "JobContexts", "browser_settings", "fetch_settings_of", "safe_name"]

log = logging.getLogger("crawlfleet.worker")


@dataclass
class JobContext:
    """One job as this worker runs it."""

    runtime: JobRuntime
    fetchers: FetcherPool
    robots: RobotsGate | None
    warc: WarcWriter
    raw: RawStore
    settings: Settings
    #: the routes this worker knows, by id (the store hands out ids; the proxy URLs, with their
    #: credentials, live only in each worker's own configuration)
    routes: Mapping[str, Route] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.runtime.job.name


class JobStore(Jobs, Pacing, Protocol):
    """What loading a job needs of the store: the job, and its lanes' pacing (Crawl-delay)."""


class JobContexts:
    """The jobs this worker has opened, loaded on first use; see the module docstring."""

    def __init__(
        self,
        store: JobStore,
        settings: Settings,
        *,
        worker_id: str,
        spiders: str | None = None,
        kinds: tuple[str, ...] = ("http",),
        routes: RoutesConfig | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.worker_id = worker_id
        self.spiders = spiders
        self.kinds = kinds
        self.routes = {r.id: r for r in routes.routes()} if routes is not None else {}
        self.unloadable: dict[str, str] = {}
        self._loaded: dict[str, JobContext] = {}
        self._loading: dict[str, asyncio.Future[JobContext | None]] = {}
        self._raw: dict[str, RawStore] = {}
        self._browser: Any = None  # the worker's one BrowserPool, started on first use
        self._page_types_at: dict[str, float] = {}
        self._refreshing: set[asyncio.Task[None]] = set()

    @property
    def loaded(self) -> list[JobContext]:
        return list(self._loaded.values())

    def browser_stats(self) -> Any:
        """The stats (``PoolStats``) of this worker's browser pool; None while it runs none."""
        return self._browser.stats if self._browser is not None else None

    async def get(self, name: str) -> JobContext | None:
        """The job's context, loading it on first use; None if it cannot run here."""
        if name in self._loaded:
            context = self._loaded[name]
            self._maybe_refresh(context)
            return context
        if name in self.unloadable:
            return None
        # many leases of a new job arrive at once: load it once, the others wait for that
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(self._load(name))
            self._loading[name] = loading
        return await asyncio.shield(loading)

    async def _load(self, name: str) -> JobContext | None:
        job = await self.store.get_job(name)
        try:
            if job is None:
                raise SpiderLoadError(f"job {name!r} disappeared")
            spider_cls = await asyncio.to_thread(load_job_spider, job, self.spiders)
            traps = trap_rules(spider_cls, self.settings)
            # the worker's cache budget is shared by the jobs it runs: the new one's part, and
            # the others' smaller parts from now on
            memory = share(self.settings.worker.cache_memory, len(self._loaded) + 1)
            runtime = JobRuntime(job, spider_cls, traps, memory)
            runtime.pools = frozenset(r.pool for r in self.routes.values()) or frozenset({DIRECT})
            if spider_cls.fetcher == "auto":  # what the fleet learnt, in this and earlier crawls
                runtime.page_types.update(await self.store.page_types(name))
                self._page_types_at[name] = asyncio.get_running_loop().time()
            self._loaded[name] = await self._open(runtime)
            for other in self._loaded.values():
                other.runtime.resize(share(self.settings.worker.cache_memory, len(self._loaded)))
        except CrawlfleetError as exc:
            self.unloadable[name] = str(exc)
            log.error("cannot run job %s here: %s", name, exc)
            return None
        return self._loaded[name]

    def _maybe_refresh(self, context: JobContext) -> None:
        """Reload an ``auto`` job's page types now and then, in the background: the verdicts of
        other workers (a browser worker judges the types an HTTP worker suspected)."""
        name = context.name
        at = self._page_types_at.get(name)
        now = asyncio.get_running_loop().time()
        if at is None or now - at < PAGE_TYPES_REFRESH:
            return
        self._page_types_at[name] = now

        async def refresh() -> None:
            try:
                context.runtime.page_types.update(await self.store.page_types(name))
            except Exception as exc:  # the next reload tries again
                log.warning("reloading the page types of %s: %s", name, exc)

        task = asyncio.create_task(refresh())
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _open(self, runtime: JobRuntime) -> JobContext:
        spider = runtime.spider_cls
        s = for_spider(self.settings, spider.custom_settings, spider.name)
        runtime.max_yields = s.worker.max_yields_per_page
        runtime.parse_timeout = s.worker.parse_timeout
        raw = await self.raw_store(s)  # first: it may fail, and then nothing is left open
        # the instance's seed hosts: a spider may set its start_urls in __init__ (-a)
        fetch_settings = fetch_settings_of(
            s, spider, hosts=runtime.spider.seed_hosts(), concurrency=s.concurrency
        )
        client = HttpClient(fetch_settings)
        await client.start()
        http = HttpFetcher(client)
        fetchers: list[Fetcher] = [http]
        impersonator: Fetcher | None = None
        if "impersonate" in self.kinds:
            impersonating = ImpersonateClient(fetch_settings)
            await impersonating.start()
            impersonator = ImpersonateFetcher(impersonating)
            fetchers.append(impersonator)
        if "browser" in self.kinds:
            try:
                fetchers.append(await self._browser_fetcher(fetch_settings))
            except BaseException:  # no Chromium: what was opened for the job is closed again
                await FetcherPool(fetchers).close()
                raise
        robots = None
        if spider.obey_robots:
            # robots.txt behind a bot wall is read a rung up (the wall's 403 would allow all);
            # an impersonating spider reads it as it reads its pages
            first: Fetcher = http
            climb = [impersonator] if impersonator is not None else []
            if spider.fetcher == "impersonate" and impersonator is not None:
                first, climb = impersonator, []
            cache = RobotsCache(
                first,
                user_agent=s.user_agent,
                error_recheck=s.robots_recheck,
                down_recheck=s.host_recheck,
                down_give_up=s.host_give_up,
                climb=climb,
                shared=self.store,  # one fetch of a host's robots.txt for the whole fleet
            )
            robots = RobotsGate(
                cache,
                self.store,
                recheck=s.robots_recheck,
                give_up=s.robots_give_up,
                down_recheck=s.host_recheck,
                down_give_up=s.host_give_up,
            )
        warc = raw.writer(
            safe_name(f"{runtime.job.name}-{self.worker_id}"),
            max_size=s.warc_max_size,
            gzip_level=s.warc_gzip_level,
        )
        return JobContext(runtime, FetcherPool(fetchers), robots, warc, raw, s, self.routes)

    async def _browser_fetcher(self, guard: FetchSettings) -> Fetcher:
        """A browser fetcher for one job, on the worker's one browser (its own contexts, and
        its job's address guard). Playwright is imported only by workers that run browsers."""
        from crawlfleet.fetch.browser import BrowserFetcher, BrowserPool

        if self._browser is None:
            pool = BrowserPool(browser_settings(self.settings))
            await pool.start()
            self._browser = pool
        fetcher: Fetcher = BrowserFetcher(pool=self._browser, guard=guard)
        return fetcher

    async def raw_store(self, s: Settings) -> RawStore:
        """The raw store ``s`` names, opened once per worker (spiders may name their own); one
        that does not answer yet opens with its :attr:`~crawlfleet.data.rawstore.RawStore.fault`
        set (:meth:`raw_fault`)."""
        store = self._raw.get(s.raw)
        if store is None:
            store = open_raw_store(s.raw, s3_endpoint=s.s3_endpoint, spool=s.raw_spool)
            # a store away now is waited out (the worker's local fault), a refusal stops it
            await asyncio.to_thread(store.open, wait=True)
            self._raw[s.raw] = store
        return store

    def raw_fault(self) -> RawStoreUnavailable | None:
        """Why a raw store of this worker takes no files now (an object store away), if so."""
        for store in self._raw.values():
            if (fault := store.fault) is not None:
                return fault
        return None

    def forget_sent(self) -> None:
        """Forget which links each job sent (a cache: the store dedupes them anyway), so the
        links of pages that were never reported are sent again when they are fetched again."""
        for job in self._loaded.values():
            job.runtime.forget_all()

    def warc_directories(self) -> list[Path]:
        """The directories the jobs' WARC files are written to (local, or the S3 spool)."""
        return sorted({job.warc.directory for job in self._loaded.values()})

    async def reopen_warcs(self) -> list[str]:
        """After a local fault (disk full): give every job a new WARC writer. The old one is
        closed as far as it can be, and its ``.open`` file cut after its last complete record
        and renamed to the name its records carry (``recover``). Returns the files recovered."""
        recovered: list[str] = []
        for job in self._loaded.values():
            old = job.warc
            with suppress(OSError):  # the error it failed with: its file is recovered below
                await asyncio.to_thread(old.close)
            recovered += await asyncio.to_thread(recover, old.directory, prefix=old.prefix)
            job.warc = job.raw.writer(old.prefix, max_size=old.max_size, gzip_level=old.gzip_level)
            # the old file's tail may be cut: no revisit may refer to a capture lost with it
            job.runtime.captures.clear()
        return recovered

    async def flush(self) -> None:
        """Make every WARC record written so far durable (snapshot before ack)."""
        await asyncio.gather(*(asyncio.to_thread(j.warc.flush) for j in self._loaded.values()))

    async def close(self) -> None:
        """Close every job's fetchers, robots fetches and WARC, then upload and close the raw
        stores (object stores upload what is left)."""
        for job in self._loaded.values():
            if job.robots is not None:
                await job.robots.close()
            await job.fetchers.close()
            await asyncio.to_thread(job.warc.close)
        self._loaded.clear()
        if self._browser is not None:  # no Chromium outlives its worker
            browser, self._browser = self._browser, None
            await browser.close()
        stores, self._raw = list(self._raw.values()), {}
        for store in stores:
            await asyncio.to_thread(store.close)


def fetch_settings_of(
    s: Settings, spider: type[Spider] | None, *, hosts: Iterable[str], concurrency: int
) -> FetchSettings:
    """The fetchers' settings of a job: its ``[worker]`` limits, its ``[fetch]`` section with
    the spider's ``tls_verify`` and ``impersonate`` over it, and the hosts that may be private
    (the ones the user named)."""
    f = s.fetch
    tls_verify = f.tls_verify if spider is None or spider.tls_verify is None else spider.tls_verify
    profile = f.impersonate if spider is None or spider.impersonate is None else spider.impersonate
    return FetchSettings(
        timeout=s.fetch_timeout,
        max_body=s.max_body,
        max_redirects=s.max_redirects,
        user_agent=s.user_agent,
        concurrency=concurrency,
        max_idle_connections=s.max_idle_connections,
        allow_private_addresses=bool(spider is not None and spider.allow_private_addresses),
        private_ok_hosts=frozenset(h.lower() for h in hosts),
        ca_file=f.ca_file or None,
        tls_verify=tls_verify,
        impersonate=profile,
    )


def browser_settings(s: Settings) -> BrowserSettings:
    """The browser pool of a worker, from its ``[browser]`` section (one pool per process, so
    the worker's settings, not a job's)."""
    from crawlfleet.fetch.browser import BrowserSettings

    b = s.browser
    return BrowserSettings(
        executable=b.executable,
        contexts=b.contexts,
        pages_per_context=b.pages_per_context,
        pages_per_browser=b.pages_per_browser,
        memory_budget=b.memory_budget,
        ca_file=s.fetch.ca_file or None,
    )


def safe_name(text: str) -> str:
    """A file-name-safe version of ``text`` (job names and worker ids are user input)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
