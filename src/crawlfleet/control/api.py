"""The JSON API and ``/metrics`` of ``serve``: reads of the newest overview, and the changes
(pause, resume, cancel a job; replay dead letters). URLs are shown with credentials masked;
proxy URLs only masked, and only those this process's settings know.

=====================================  =========================================================
``GET /api/overview``                  the fleet in numbers, and the alerts firing
``GET /api/jobs``                      every job: counts, state, what its spider produced
``GET /api/domains``                   backlog, oldest ready age, in flight, pacing, block rate
``GET /api/routes``                    pools and routes: breaker state, success, latency
``GET /api/workers``                   every worker process: alive, kinds, pages/s, memory
``GET /api/dead?job=&reason=&limit=``  dead letters, newest first (``/api/dead/ID``: one)
``GET /api/quarantine?job=&limit=``    quarantined records with their errors
``GET /api/history``                   the charts' series
``GET /api/quality?job=&runs=``        each job's run profiles (newest first) and their alerts
``GET /api/outbox``                    deliveries per destination, and the dead ones
``POST /api/jobs/NAME/ACTION``         ACTION: pause, resume, cancel
``POST /api/dead/replay``              ``{"ids": [...]}`` or ``{"job": ..., "reason": ...}``
``GET /metrics[?only=store]``          Prometheus text (``fleet_metrics.FleetCollector``)
=====================================  =========================================================
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from crawlfleet.control.raw import snapshot_response
from crawlfleet.control.state import ControlState
from crawlfleet.local.runner import is_finished, state_fields
from crawlfleet.model import DeadLetter, DeadReason, JobState
from crawlfleet.monitor.fleet import FleetCollector
from crawlfleet.monitor.overview import DomainView, JobView, Overview, RouteView, WorkerView
from crawlfleet.urls import mask_credentials

__all__ = ["STATE", "register"]

STATE: Final = web.AppKey("state", ControlState)
ACTIONS: Final = {
    "pause": JobState.PAUSED,
    "resume": JobState.RUNNING,
    "cancel": JobState.CANCELLED,
}
NO_STORE: Final = {"Cache-Control": "no-store"}


def register(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/overview", overview)
    r.add_get("/api/jobs", jobs)
    r.add_get("/api/domains", domains)
    r.add_get("/api/routes", routes)
    r.add_get("/api/workers", workers)
    r.add_get("/api/dead", dead)
    r.add_get("/api/dead/{id:\\d+}", dead_one)
    r.add_get("/api/quarantine", quarantine)
    r.add_get("/quarantine/{id:\\d+}/snapshot", snapshot)
    r.add_get("/api/history", history)
    r.add_get("/api/quality", quality)
    r.add_get("/api/outbox", outbox)
    r.add_post("/api/jobs/{name}/{action}", job_action)
    r.add_post("/api/dead/replay", replay)
    r.add_get("/metrics", metrics)


def _json(data: Any) -> web.Response:
    return web.json_response(data, headers=NO_STORE)


async def _ov(request: web.Request) -> Overview:
    return await request.app[STATE].overview()


def overview_json(ov: Overview) -> dict[str, Any]:
    states: dict[str, int] = {}
    for j in ov.jobs:
        word = "finished" if is_finished(j.stats) else j.stats.state.value
        states[word] = states.get(word, 0) + 1
    return {
        "at": ov.at,
        "jobs": states,
        "backlog": ov.backlog,
        "leased": sum(j.stats.leased for j in ov.jobs),
        "done": sum(j.stats.done for j in ov.jobs),
        "dead": sum(j.stats.dead for j in ov.jobs),
        "records": sum(j.stats.records for j in ov.jobs),
        "quarantined": sum(j.stats.quarantined for j in ov.jobs),
        "oldest_age": ov.oldest_age,
        "pages": ov.pages(),
        "pages_per_second": ov.pages_per_second,
        "success_ratio": ov.success_ratio,
        "block_ratio": ov.block_ratio,
        "validation_failure_ratio": ov.validation_failure_ratio,
        "workers_alive": ov.workers_alive,
        "workers": len(ov.workers),
        "workers_stale": len(ov.workers_stale),
        "leases_expired": ov.counts.attempts_by_outcome.get("lease_expired", 0),
        "tier_moves_up": ov.counts.tier_moves_up,
        "alerts": [a.as_json() for a in ov.alerts],
    }


def job_json(j: JobView) -> dict[str, Any]:
    return {
        **asdict(j.stats),
        "name": j.name,
        **state_fields(j.stats),  # state, job_state, finished, progress (as status --json)
        "avg_retry_depth": j.stats.avg_retry_depth,
        "dead_by_reason": dict(j.dead_by_reason),
        "records_made": j.records_made,
        "quarantined_made": j.quarantined_made,
        "validation_failure_ratio": j.validation_failure_ratio,
        "pages": j.pages,
        "blocked_pages": j.blocked_pages,
    }


def domain_json(d: DomainView, rate: float | None) -> dict[str, Any]:
    return {**asdict(d), "backlog": d.backlog, "rate": rate}


def route_json(r: RouteView) -> dict[str, Any]:
    return asdict(r)


def worker_json(w: WorkerView) -> dict[str, Any]:
    return {
        **asdict(w.stats),
        "counters": None,  # the raw counters stay in the store: /metrics sums them
        "gauges": dict(w.gauges),
        "alive": w.alive,
        "state": w.state,
        "silent": w.silent,
        "pages": w.pages,
        "pages_per_second": w.pages_per_second,
        "success_ratio": w.success_ratio,
        "memory": w.memory,
        "in_flight": w.in_flight,
    }


def dead_json(d: DeadLetter) -> dict[str, Any]:
    return {
        "id": d.id,
        "job": d.job,
        "url": mask_credentials(d.url),
        "reason": d.reason.value,
        "error": d.error,
        "attempts": d.attempts,
        "died_at": d.died_at,
        "history": [asdict(a) for a in d.history],
    }


async def overview(request: web.Request) -> web.Response:
    return _json(overview_json(await _ov(request)))


async def jobs(request: web.Request) -> web.Response:
    return _json([job_json(j) for j in (await _ov(request)).jobs])


async def domains(request: web.Request) -> web.Response:
    ov = await _ov(request)
    rates = request.app[STATE].history.domain_rates()
    return _json([domain_json(d, rates.get(d.domain)) for d in ov.domains[:200]])


async def routes(request: web.Request) -> web.Response:
    ov = await _ov(request)
    pools = {name: h.to_json() for name, h in ov.pools.items()}
    return _json({"pools": pools, "routes": [route_json(r) for r in ov.routes[:500]]})


async def workers(request: web.Request) -> web.Response:
    return _json([worker_json(w) for w in (await _ov(request)).workers[:500]])


def _limit(request: web.Request, default: int = 100) -> int:
    try:
        return max(1, min(1000, int(request.query.get("limit", default))))
    except ValueError:
        raise web.HTTPBadRequest(text="limit must be a number") from None


def _reason(value: str | None) -> DeadReason | None:
    if not value:
        return None
    try:
        return DeadReason(value)
    except ValueError:
        raise web.HTTPBadRequest(text=f"unknown reason {value!r}") from None


async def dead(request: web.Request) -> web.Response:
    store = request.app[STATE].store
    job = request.query.get("job") or None
    letters = await store.dead_letters(job, _reason(request.query.get("reason")), _limit(request))
    return _json([dead_json(d) for d in letters])


async def dead_one(request: web.Request) -> web.Response:
    letter = await request.app[STATE].store.dead_letter(int(request.match_info["id"]))
    if letter is None:
        raise web.HTTPNotFound(text="no such dead letter")
    return _json(dead_json(letter))


async def quarantine(request: web.Request) -> web.Response:
    store = request.app[STATE].store
    items = await store.quarantine_items(request.query.get("job") or None, _limit(request))
    return _json(
        [
            {
                "id": i.id,
                "job": i.job,
                "url": mask_credentials(i.row.url),
                "errors": list(i.row.errors),
                "data": i.row.data,
                "fetched_at": i.row.fetched_at,
                "warc_file": i.row.warc_file,
                "warc_record_id": i.row.warc_record_id,
                "snapshot": f"/quarantine/{i.id}/snapshot" if i.row.warc_record_id else None,
            }
            for i in items
        ]
    )


async def snapshot(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    item = await state.store.quarantine_item(int(request.match_info["id"]))
    if item is None:
        raise web.HTTPNotFound(text="no such quarantined record")
    return await snapshot_response(item.row, state.settings.store.raw)


async def history(request: web.Request) -> web.Response:
    return _json(request.app[STATE].history.as_json())


async def job_action(request: web.Request) -> web.Response:
    state, name = request.app[STATE], request.match_info["name"]
    target = ACTIONS.get(request.match_info["action"])
    if target is None:
        raise web.HTTPNotFound(text=f"no action {request.match_info['action']!r}")
    if await state.store.get_job(name) is None:
        raise web.HTTPNotFound(text=f"no job named {name!r}")
    await state.store.set_job_state(name, target)
    state.changed()
    return _json({"job": name, "state": target.value})


async def replay(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="send a JSON object") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="send a JSON object")
    ids = body.get("ids") or []
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise web.HTTPBadRequest(text="ids must be a list of request ids")
    job, reason = body.get("job"), _reason(body.get("reason"))
    if not ids and not job:
        raise web.HTTPBadRequest(text="name the requests to replay: ids, or a job")
    n = await state.store.replay_dead(job, reason, ids)
    state.changed()
    return _json({"replayed": n})


async def metrics(request: web.Request) -> web.Response:
    ov = await _ov(request)
    registry = CollectorRegistry(auto_describe=False)
    # ?only=store: without the workers' summed counters, for a Prometheus that scrapes every
    # worker's own /metrics too (it would count them twice)
    registry.register(FleetCollector(lambda: ov, counters=request.query.get("only") != "store"))
    body = generate_latest(registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST, **NO_STORE})


async def quality(request: web.Request) -> web.Response:
    import json

    store = request.app[STATE].store
    job = request.query.get("job") or None
    runs = _runs(request)
    names = [job] if job else [j.name for j in await store.list_jobs()]
    if job and await store.get_job(job) is None:
        raise web.HTTPNotFound(text=f"no job named {job!r}")
    out = []
    for name in names:
        rows = await store.profiles(name, limit=runs)
        out.append(
            {"job": name, "runs": [{**json.loads(r.profile), "final": r.final} for r in rows]}
        )
    return _json(out)


def _runs(request: web.Request) -> int:
    try:
        return max(1, min(50, int(request.query.get("runs", 4))))
    except ValueError:
        raise web.HTTPBadRequest(text="runs must be a number") from None


async def outbox(request: web.Request) -> web.Response:
    from crawlfleet.notify.destinations import destinations

    state = request.app[STATE]
    labels = {d.id: d.label for d in destinations(state.settings)}
    counts = await state.store.outbox_counts()
    dead = await state.store.dead_deliveries(_limit(request))
    return _json(
        {
            "destinations": [
                {**asdict(c), "label": labels.get(c.destination, c.destination)} for c in counts
            ],
            "dead": [
                {**asdict(d), "label": labels.get(d.destination, d.destination)} for d in dead
            ],
        }
    )
