"""The quality keeper over every backend: a running run checked once per interval however many
processes keep it, a finished run closed once (its profile final, its alerts and run summary
written with it), alerts fired once per run and subject, each sink fed the run's records in
batches once."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from tests.conftest import FakeClock
from tests.contract.test_frontier import TTL, urls

from crawlfleet.config import Settings
from crawlfleet.config.sections import SinkSettings
from crawlfleet.frontier.ports import Frontier
from crawlfleet.model import Completion, JobSpec, QuarantineRow, RecordRow
from crawlfleet.monitor.quality import QualityRules
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.keeper import QUALITY_KEY, QualityKeeper, job_quality

KINDS = {"sku": "text", "price": "number", "rating": "number"}


def _settings() -> Settings:
    s = Settings.of(**{"notify.webhook": "http://127.0.0.1:9/hook", "quality.check_every": "60"})
    return replace(s, sinks=(SinkSettings(url="http://127.0.0.1:9/sink", name="w", batch=4),))


async def _job(frontier: Frontier, **rules: object) -> None:
    q = job_quality(QualityRules(min_records=5, **rules), KINDS)  # type: ignore[arg-type]
    await frontier.submit_job(JobSpec("j", "spider.py", settings={QUALITY_KEY: q}))


async def _crawl(frontier: Frontier, n: int, without_rating: int) -> None:
    await frontier.enqueue("j", urls(1))
    (lease,) = await frontier.lease("w", 1, TTL)
    records = [
        RecordRow(
            f"p{i:02}",
            {"sku": f"p{i:02}", "price": float(i), "rating": None if i < without_rating else 4.0},
            f"http://a.test/p/{i}",
            1.0,
            "a.warc.gz",
            f"<urn:uuid:{i}>",
        )
        for i in range(n)
    ]
    bad = [QuarantineRow({"sku": 1}, [{"type": "string_type"}], "http://a.test/q", 1.0)]
    await frontier.complete([Completion(lease.ref, 200, records=records, quarantined=bad)])


def _keepers(frontier: Frontier, clock: FakeClock, n: int) -> list[QualityKeeper]:
    s = _settings()
    return [QualityKeeper(frontier, s, destinations(s), clock=clock) for _ in range(n)]


async def test_a_finished_run_is_closed_once_with_its_alerts_and_summary(
    frontier: Frontier, clock: FakeClock
) -> None:
    await _job(frontier, coverage={"rating": 0.9})
    await _crawl(frontier, 10, without_rating=3)
    keepers = _keepers(frontier, clock, 3)
    await asyncio.gather(*(k.tick() for k in keepers))
    await asyncio.gather(*(k.tick() for k in keepers))

    (row,) = await frontier.profiles("j")
    assert row.final and row.run == 1
    saved = json.loads(row.profile)
    assert (saved["records"], saved["quarantined"], saved["pages"]) == (10, 1, 1)
    assert saved["quarantine_by_reason"] == {"string_type": 1}
    assert saved["fields"]["rating"]["coverage"] == 0.7
    assert saved["fields"]["price"]["median"] == 4.5
    assert [a["alert"] for a in saved["alerts"]] == ["coverage_rule", "validation_failure_rate"]

    events = await frontier.outbox_events()
    kinds = sorted(e.kind for e in events)
    assert kinds == ["alert", "alert", "changes", "changes", "changes", "run_finished"]
    (rule,) = [json.loads(e.body) for e in events if e.key.endswith("coverage_rule:rating")]
    assert (rule["field"], rule["value"], rule["threshold"], rule["run"]) == ("rating", 0.7, 0.9, 1)
    assert [x["key"] for x in rule["examples"]] == ["p00", "p01", "p02"]
    assert rule["examples"][0]["warc_record_id"] == "<urn:uuid:0>"
    (finished,) = [json.loads(e.body) for e in events if e.kind == "run_finished"]
    assert finished["summary"]["records"] == 10
    assert finished["alerts"] == ["coverage_rule", "validation_failure_rate"]

    batches = sorted(
        (json.loads(e.body) for e in events if e.kind == "changes"), key=lambda b: b["batch"]
    )
    assert [b["batch"] for b in batches] == [1, 2, 3]
    assert [r["key"] for b in batches for r in b["records"]] == [f"p{i:02}" for i in range(10)]
    assert {r["status"] for b in batches for r in b["records"]} == {"new"}

    hook, sink = (d.id for d in destinations(_settings()))
    counts = {c.destination: c.queued for c in await frontier.outbox_counts()}
    assert counts == {
        hook: 3,
        sink: 3,
    }  # alerts and the summary to the webhook, batches to the sink


async def test_a_running_run_is_checked_once_per_interval_and_alerts_once(
    frontier: Frontier, clock: FakeClock
) -> None:
    await _job(frontier, coverage={"rating": 0.9})
    await _crawl(frontier, 10, without_rating=3)
    await frontier.enqueue("j", urls(2)[1:])  # one more page queued: the run goes on
    keepers = _keepers(frontier, clock, 3)
    await asyncio.gather(*(k.tick() for k in keepers))
    (row,) = await frontier.profiles("j")
    assert not row.final
    alerts = sorted(e.key for e in await frontier.outbox_events(kind="alert"))
    assert alerts == [
        "alert:j:1:coverage_rule:rating",
        "alert:j:1:validation_failure_rate:validation_failure_rate",
    ]
    checked = json.loads(row.profile)["at"]

    clock.advance(30)  # not due yet
    await keepers[0].tick()
    assert json.loads((await frontier.profiles("j"))[0].profile)["at"] == checked
    clock.advance(31)
    await keepers[1].tick()
    assert json.loads((await frontier.profiles("j"))[0].profile)["at"] == clock.now
    assert len(await frontier.outbox_events(kind="alert")) == 2  # found again, not fired again
    assert await frontier.outbox_events(kind="run_finished") == []


async def test_a_clean_run_fires_nothing(frontier: Frontier, clock: FakeClock) -> None:
    await _job(frontier, coverage={"rating": 0.9}, validation_rate=None)
    await _crawl(frontier, 10, without_rating=0)
    (keeper,) = _keepers(frontier, clock, 1)
    await keeper.tick()
    assert await frontier.outbox_events(kind="alert") == []
    assert len(await frontier.outbox_events(kind="run_finished")) == 1


async def test_a_run_slow_to_profile_is_checked_less_often(
    frontier: Frontier, clock: FakeClock
) -> None:
    await _job(frontier)
    await _crawl(frontier, 10, without_rating=0)
    await frontier.enqueue("j", urls(2)[1:])  # the run goes on
    (keeper,) = _keepers(frontier, clock, 1)
    await keeper.tick()
    row = json.loads((await frontier.profiles("j"))[0].profile)
    # as if that check had taken 30 s: the next is due after 30 / CHECK_SHARE = 600 s
    await frontier.save_profile("j", 1, json.dumps({**row, "took": 30.0}))
    clock.advance(61)
    await keeper.tick()
    assert json.loads((await frontier.profiles("j"))[0].profile)["took"] == 30.0
    clock.advance(540)
    await keeper.tick()
    assert json.loads((await frontier.profiles("j"))[0].profile)["at"] == clock.now


async def test_fleet_alerts__sent_through_the_outbox_once_per_period(
    frontier: Frontier, clock: FakeClock
) -> None:
    from crawlfleet.notify.service import FLEET_REPEAT, emit_fleet_alerts

    s = Settings.of(
        **{"notify.webhook": "http://127.0.0.1:9/hook", "control.alert_oldest_age": "5"}
    )
    await frontier.submit_job(JobSpec("j", "spider.py"))
    await frontier.enqueue("j", urls(3))
    clock.advance(10)
    now = clock()
    assert await emit_fleet_alerts(frontier, s, now) == 2  # no worker alive, and the wait
    assert await emit_fleet_alerts(frontier, s, now + 60) == 0, "sent again within its period"
    assert await emit_fleet_alerts(frontier, s, now + FLEET_REPEAT) == 2
    fleet = [json.loads(e.body) for e in await frontier.outbox_events(None, "alert", 10)]
    assert {(b["alert"], b["run"]) for b in fleet} == {
        ("no_worker_alive", None),
        ("oldest_queued_age", None),
    }
    oldest = next(b for b in fleet if b["alert"] == "oldest_queued_age")
    assert oldest["job"] == "j" and oldest["subject"].startswith("j/")
    quiet = Settings.of(**{"control.alert_oldest_age": "5"})  # no destination: nothing queued
    assert await emit_fleet_alerts(frontier, quiet, now + 2 * FLEET_REPEAT) == 0
