"""``crawlfleet plan``: what the route pools allow per domain, and what a target needs."""

from __future__ import annotations

import json
from typing import Any

import click

from crawlfleet.cli.common import async_command, opened, queue_option, settings

PLAN_HELP = """Route capacity: per domain and pool, the pages/s the routes allow, the routes a
target needs, the time to drain the backlog, the cost per day and the bottleneck.

\b
The arithmetic (per domain, on the route tier it is crawled on):
  route rate     = min(pool rate, pool concurrency / latency)       one route, one domain
  requests/s     = min(route rate x healthy routes,                  summed over its pools
                       domain_rate, 1 / Crawl-delay,
                       domain_concurrency / latency)                 the binding term is
                                                                     the bottleneck
  pages/s        = requests/s x (1 - block rate)
  in flight      = requests/s x latency                              (Little's law)
  routes needed  = ceil(target / ((1 - block rate) x route rate))
  drain time     = backlog / pages/s
  cost/day       = requests/s x 86,400 x pool cost
  sessions/hour  = requests/s x 3,600 / session uses                 (sticky pools)

\b
Domains come from --domain, else from SPIDER.py's start URLs (with its domain_concurrency
and domain_rate), else, with --queue (and --job), from the running crawl: its backlog per
domain, the latency and block rate each lane observed, and the routes whose breakers are
not open. Targets: 2M/day, 500k/h, 50/s (per domain with --per-domain, else the total,
split over the domains by backlog). --json prints the same as data (keys: see
crawlfleet.routes.planner).
"""


@click.command(help=PLAN_HELP)
@click.argument("spider", metavar="[SPIDER.py]", required=False)
@queue_option
@click.option("--job", help="The running job to plan from (with --queue; default: the only one).")
@click.option("--domain", "domains", multiple=True, metavar="HOST", help="A domain to plan.")
@click.option("--target", metavar="N/UNIT", help="Pages wanted, like 2M/day.")
@click.option("--per-domain", is_flag=True, help="The target is per domain, not the total.")
@click.option(
    "--latency",
    type=float,
    default=0.5,
    show_default=True,
    help="Seconds per request where none was observed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_context
@async_command
async def plan(
    ctx: click.Context,
    spider: str | None,
    queue: str | None,
    job: str | None,
    domains: tuple[str, ...],
    target: str | None,
    per_domain: bool,
    latency: float,
    as_json: bool,
) -> None:
    from crawlfleet.routes.planner import (
        make_plan,
        parse_target,
        plan_json,
        render_plan,
    )
    from crawlfleet.routes.pools import RoutesConfig

    s = settings(ctx, {"queue": queue})
    config = s.routes.pools or RoutesConfig()
    wanted = parse_target(target) if target else None
    observed: dict[tuple[str, str], Any] = {}
    healthy: dict[str, int] | None = None
    if domains or spider:
        inputs = _inputs_of(domains, spider, wanted if per_domain else None)
    elif queue or s.queue:
        inputs, observed, healthy = await _from_store(s, job, wanted if per_domain else None)
    else:  # pragma: no cover - the queue always has a default
        raise click.UsageError("name a spider, a --domain, or a --queue")
    result = make_plan(
        config,
        inputs,
        observed=observed,
        healthy=healthy,
        target_total=None if per_domain else wanted,
        latency=latency,
    )
    click.echo(json.dumps(plan_json(result), indent=2) if as_json else render_plan(result))


def _inputs_of(domains: tuple[str, ...], spider: str | None, target: float | None) -> list[Any]:
    from urllib.parse import urlsplit

    from crawlfleet.routes.planner import DomainInput
    from crawlfleet.spiders import load_spider

    if domains:
        return [DomainInput(d.lower(), target=target) for d in domains]
    assert spider is not None
    cls = load_spider(spider)
    hosts = sorted({(urlsplit(u).hostname or "").lower() for u in cls.start_urls} - {""})
    rate = cls.domain_rate
    pools = tuple(cls.route_pools) if cls.route_pools else None
    return [DomainInput(h, cls.domain_concurrency, rate, target=target, pools=pools) for h in hosts]


async def _from_store(
    s: Any, job: str | None, target: float | None
) -> tuple[list[Any], dict[tuple[str, str], Any], dict[str, int]]:
    """The running crawl's domains, what its lanes observed, and its healthy routes."""
    import time

    from crawlfleet.cli.common import one_job
    from crawlfleet.policy.health import Breaker, RouteStats
    from crawlfleet.routes.planner import DomainInput, Observed

    async with opened(s, create=False) as store:
        name = await one_job(store, job)
        domain_rows, lane_rows = await store.capacity(name)
    inputs = [
        DomainInput(
            domain,
            concurrency=cap,
            rate=1.0 / min_delay if min_delay else None,
            crawl_delay=floor or None,
            backlog=int(queued or 0),
            target=target,
            tier=tier,
        )
        for domain, queued, cap, min_delay, floor, tier in domain_rows
    ]
    per_pool: dict[tuple[str, str], list[RouteStats]] = {}
    healthy: dict[str, int] = {}
    seen_routes: set[str] = set()
    now = time.time()
    for domain, route, pool, _tier, health, breaker in lane_rows:
        stats = RouteStats.from_json(json.loads(health)) if health not in ("", "{}") else None
        if stats is not None:
            per_pool.setdefault((domain, pool), []).append(stats)
        if route not in seen_routes:
            seen_routes.add(route)
            state = Breaker.from_json(json.loads(breaker)) if breaker not in ("", "{}") else None
            up = state is None or state.status(now) != "open"
            healthy[pool] = healthy.get(pool, 0) + int(up)
    observed = {key: _observed(stats, Observed) for key, stats in per_pool.items()}
    return inputs, observed, healthy


def _observed(stats: list[Any], observed: Any) -> Any:
    """One (domain, pool)'s latency and block rate, weighted by the lanes' recent responses."""
    responses = sum(s.responses for s in stats)
    attempts = sum(s.successes + s.blocks + s.errors for s in stats)
    latency = sum(s.latency * s.responses for s in stats) / responses if responses else None
    blocks = sum(s.blocks for s in stats) / attempts if attempts else None
    return observed(latency=latency, block_rate=blocks)
