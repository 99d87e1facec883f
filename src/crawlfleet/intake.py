"""A job's way into the store: its spec (where the spider lives, its politeness and budgets) and
its seed requests, built and checked before anything is written, then submitted in one go.

Everything that can refuse a spider (its settings, its arguments, its start requests) runs in
:func:`prepare`, before :func:`submit` touches the store: a spider refused at start leaves no
job behind.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from crawlfleet.config.custom_settings import for_spider
from crawlfleet.errors import StoreError, UsageError
from crawlfleet.model import DomainLimits, Job, JobSpec, NewRequest, RoutePlan, Run, RunKind
from crawlfleet.spider import session_params_of
from crawlfleet.spiders import SPIDER_NAME, spider_instance
from crawlfleet.urls import credentials_by_origin, mask_credentials

log = logging.getLogger("crawlfleet.submit")

if TYPE_CHECKING:
    from crawlfleet.config import Settings
    from crawlfleet.frontier.ports import Frontier
    from crawlfleet.spider import Request, Spider

__all__ = ["Intake", "prepare", "seed_requests", "submit"]


@dataclass(frozen=True)
class Intake:
    """A job ready to submit: its spec and its seeds (canonical, fingerprinted)."""

    spec: JobSpec
    seeds: list[NewRequest]
    spider_cls: type[Spider]

    @property
    def kinds(self) -> list[str]:
        """The fetcher kinds its workers need (``worker --kind``): the spider's and its seeds'
        (``auto`` climbs to the impersonating fetcher and the browser), and HTTP (robots.txt)."""
        from crawlfleet.model import KINDS, kind_of

        wanted = {kind_of(s.fetcher) for s in self.seeds} | {"http"}
        if self.spider_cls.fetcher == "auto":
            wanted.update(KINDS)
        else:
            wanted.add(kind_of(self.spider_cls.fetcher))
        return [k for k in KINDS if k in wanted]


def seed_requests(
    requests: Iterable[Request],
    fetcher: str = "http",
    credentials: Mapping[str, tuple[str, str]] | None = None,
    pools: Iterable[str] | None = None,
    session_params: frozenset[str] | None = None,
) -> list[NewRequest]:
    """A spider's start requests as the store takes them: the URL as fetched (normalised, no
    credentials), fingerprint (of its canonical form, method and body), domain, depth 0, the
    spider's ``fetcher`` where a request names none. Seeds are never filtered by scope.

    Credentials in a URL (``http://user:password@host/``) are split off here and never stored:
    the fetch sends them to that origin from ``credentials`` (the spider's ``start_urls``,
    :func:`~crawlfleet.urls.credentials_by_origin`). Raises UsageError for a start URL that
    does not parse, or whose credentials are not those of its origin in ``start_urls``, or
    that names a route pool (``Request(pool=...)``) not in ``pools`` (when given)."""
    from crawlfleet.routes.pools import unknown_pool
    from crawlfleet.urls import (
        DEFAULT_SESSION_PARAMS,
        mask_credentials,
        origin_of,
        request_identity,
        split_credentials,
    )

    known = None if pools is None else frozenset(pools)
    out = []
    for req in requests:
        reason = unknown_pool(req.pool, known) if known is not None else None
        if reason is not None:
            raise UsageError(f"start request {mask_credentials(req.url)!r}: {reason}")
        url, secret = split_credentials(req.url)
        try:
            canon, fp, domain = request_identity(
                url, req.method, req.body, session_params=session_params or DEFAULT_SESSION_PARAMS
            )
        except ValueError as exc:
            raise UsageError(f"bad start URL {mask_credentials(req.url)!r}: {exc}") from None
        if secret is not None and (credentials or {}).get(origin_of(canon)) != secret:
            raise UsageError(
                f"start URL {mask_credentials(req.url)!r}: credentials in a URL are taken from "
                "the spider's start_urls only"
            )
        out.append(
            NewRequest(
                url=canon,
                fingerprint=fp,
                domain=domain,
                priority=req.priority,
                callback=req.callback_name,
                meta=req.stored_meta(),
                method=req.method,
                body=req.body,
                fetcher=req.fetcher or fetcher,
                max_attempts=req.max_attempts,
                headers=req.headers,
                pool=req.pool,
            )
        )
    return out


def prepare(
    name: str,
    spider_ref: str,
    spider_cls: type[Spider],
    settings: Settings,
    job_settings: Mapping[str, Any] | None = None,
) -> Intake:
    """Check the spider and build its job: settings as its workers will apply them, trap
    budgets, politeness defaults, and its seeds (its ``start_requests`` run here, once).

    ``spider_cls`` is the configured class (``spiders.configure``); ``job_settings`` are the
    keys stored with the job for every worker's loader (arguments, ``-s`` settings, overrides).
    """
    from crawlfleet.data.validate import record_validator
    from crawlfleet.routes.pools import RoutesConfig

    # refuse bad settings now, in one line (and keep the job's quality rules)
    own = for_spider(settings, spider_cls.custom_settings, spider_cls.name)
    record_validator(spider_cls)  # a bad item_key too
    quality = _quality(spider_cls, own)
    try:
        check_recrawl(spider_cls)
    except ValueError as exc:
        raise UsageError(f"spider {spider_cls.__name__}: {exc}") from None
    spider = spider_instance(spider_cls)
    try:
        seeds = seed_requests(
            spider.start_requests(),
            spider_cls.fetcher,
            credentials_by_origin(spider.start_urls),
            (settings.routes.pools or RoutesConfig()).names,
            session_params_of(spider),
        )
    except UsageError:
        raise
    except Exception as exc:  # the spider's own code: its error, in one line
        line = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise UsageError(f"spider {spider_cls.__name__}.start_requests failed: {line}") from None
    if not seeds:
        raise UsageError(
            f"spider {spider_cls.__name__} has no start_urls (nor sitemap_urls, start_requests)"
        )
    for seed in seeds:  # at start, not after the fetch: the store keeps callbacks by name
        if seed.callback is not None and not callable(getattr(spider, seed.callback, None)):
            raise UsageError(
                f"spider {spider_cls.__name__} has no callback {seed.callback!r} "
                f"(named by its start request {mask_credentials(seed.url)})"
            )
    from crawlfleet.notify.keeper import QUALITY_KEY

    spec = _spec(name, spider_ref, spider_cls, settings, job_settings)
    spec = replace(spec, settings={**spec.settings, QUALITY_KEY: quality})
    return Intake(spec, seeds, spider_cls)


def _quality(spider_cls: type[Spider], settings: Settings) -> dict[str, Any]:
    """The job's quality rules (``[quality]``, the spider's ``custom_settings`` and
    ``field_coverage`` over it) and its model's fields, checked: a coverage rule must name a
    field of the model and be a share."""
    from crawlfleet.data.profile import field_kinds
    from crawlfleet.errors import ConfigError
    from crawlfleet.monitor.quality import QualityRules
    from crawlfleet.notify.keeper import job_quality

    kinds = field_kinds(spider_cls.item)
    coverage = dict(spider_cls.field_coverage or {})
    rules = QualityRules.of(settings.quality, coverage)
    for field_name, least in rules.coverage.items():
        if kinds and field_name not in kinds:
            raise ConfigError(
                f"spider {spider_cls.name}: coverage rule for {field_name!r}, which is not a "
                f"field of {spider_cls.item.__name__ if spider_cls.item else 'its item'}"
            )
        if isinstance(least, bool) or not isinstance(least, int | float) or not 0 <= least <= 1:
            raise ConfigError(
                f"spider {spider_cls.name}: coverage of {field_name!r} is a share from 0 to 1, "
                f"not {least!r}"
            )
    return job_quality(rules, kinds)


def _spec(
    name: str,
    spider_ref: str,
    spider_cls: type[Spider],
    settings: Settings,
    job_settings: Mapping[str, Any] | None,
) -> JobSpec:
    """What the store keeps of the job: the spider's politeness, attempts, trap budgets and
    routes, with the settings every worker's loader applies."""
    rate = spider_cls.domain_rate
    traps = settings.trap_rules(
        max_depth=spider_cls.max_depth,
        max_url_length=spider_cls.max_url_length,
        max_repeated_segments=spider_cls.max_repeated_segments,
        host_page_budget=spider_cls.host_page_budget,
        pattern_budget=spider_cls.pattern_budget,
    )
    return JobSpec(
        name=name,
        spider=spider_ref,
        settings={**(job_settings or {}), SPIDER_NAME: spider_cls.name},
        default_limits=DomainLimits(
            max_in_flight=spider_cls.domain_concurrency,
            min_delay=1.0 / rate if rate else 0.0,
        ),
        domain_limits=dict(settings.domains),
        max_attempts=spider_cls.max_attempts,
        page_budget=traps.host_page_budget,
        pattern_budget=traps.pattern_budget,
        routes=_route_plans(settings, spider_cls),
        record_history=spider_cls.record_history,
    )


def check_recrawl(spider_cls: type[Spider]) -> None:
    """Raise ValueError (one line) for recurring-crawl attributes the spider cannot have:
    ``revisit_min`` / ``revisit_max`` / ``revisit_rules`` (durations, min no longer than max),
    ``record_history`` (1 to 1,000), sitemap rules that are not regexes."""
    import re

    from crawlfleet.policy.revisit import RevisitRule

    RevisitRule.of(spider_cls.revisit_min, spider_cls.revisit_max)
    for callback, bounds in spider_cls.revisit_rules.items():
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise ValueError(f"revisit_rules[{callback!r}] must be (revisit_min, revisit_max)")
        RevisitRule.of(*bounds)
    history = spider_cls.record_history
    if not isinstance(history, int) or isinstance(history, bool) or not 1 <= history <= 1000:
        raise ValueError(f"record_history must be a whole number from 1 to 1000: {history!r}")
    for pattern in [*(r for r, _ in spider_cls.sitemap_rules), *spider_cls.sitemap_follow]:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ValueError(
                f"sitemap rule {pattern!r} is not a regular expression: {exc}"
            ) from None
    for _, callback in spider_cls.sitemap_rules:
        if not callable(getattr(spider_cls, callback, None)):
            raise ValueError(f"sitemap_rules names a callback it does not have: {callback!r}")


def _route_plans(settings: Settings, spider_cls: type[Spider]) -> tuple[RoutePlan, ...]:
    """The routes the job's pools offer (``[[routes.pool]]``, the spider's ``route_pools``):
    ids and terms, never proxy URLs. None configured: direct only."""
    pools = settings.routes.pools
    if pools is None and not spider_cls.route_pools:
        return ()
    from crawlfleet.routes.pools import RoutesConfig, route_plans

    return route_plans(
        pools or RoutesConfig(), spider=spider_cls.name, spider_pools=spider_cls.route_pools
    )


async def submit(
    store: Frontier, intake: Intake, *, recrawl: bool = False, fresh: bool = False
) -> tuple[Job, int, Run | None]:
    """Register the job (or update its spider and settings) and add its new seeds; returns the
    job, how many seeds were new, and the run it started (None: none).

    ``recrawl``: a job whose run is finished starts its next one (its known pages that are due
    are queued again); one whose run goes on is resumed. ``fresh``: the job starts over, its
    requests and their history dropped (its records stay until the new run finished; a
    StoreError while requests are leased)."""
    existing = await store.get_job(intake.spec.name)
    job = await store.submit_job(intake.spec)
    started = None
    if existing is not None and fresh:
        started = await store.start_run(job.name, RunKind.FRESH)
    elif existing is not None and recrawl and await store.is_finished(job.name):
        started = await store.start_run(job.name, RunKind.RECRAWL)
    added = await store.enqueue(job.name, intake.seeds)
    try:
        await store.maintain()  # a bulk of seeds: the planner learns the queue's new size now
    except StoreError as exc:
        log.warning("store upkeep after the seeds failed: %s", exc)
    return job, added, started
