"""A host whose robots.txt cannot be read is named, with why, in crawl's progress line and in
``status`` (a request never waits unseen)."""

from __future__ import annotations

from crawlfleet.cli.views import progress_line, status_block
from crawlfleet.model import JobState, JobStats

WHY = "robots.txt unreachable (AddressRefused: 10.0.0.7 is a private address): host postponed"


def test_the_host_waiting_for_robots_txt_is_named_with_why() -> None:
    stats = JobStats(
        "shop",
        JobState.RUNNING,
        waiting=13,
        robots_waiting={"a.test": (12, WHY), "b.test": (1, WHY)},
    )
    said = "waiting for robots.txt of a.test (AddressRefused: 10.0.0.7 is a private address): "
    assert progress_line(stats, 0.0).endswith(said + "12 requests (+1 more hosts)")
    assert f"  {said}12 requests (+1 more hosts)" in status_block(stats)


def test_nothing_is_said_when_no_host_waits() -> None:
    stats = JobStats("shop", JobState.RUNNING)
    assert "robots.txt" not in progress_line(stats, 0.0)
    assert not any("robots.txt" in line for line in status_block(stats))
