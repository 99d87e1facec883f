"""A job's state as ``status --json`` and ``/api/jobs`` give it: the fields agree."""

from __future__ import annotations

import pytest

from crawlfleet.local.runner import state_fields
from crawlfleet.model import JobState, JobStats


@pytest.mark.parametrize(
    ("stats", "state", "job_state", "finished", "progress"),
    [
        (JobStats("j", JobState.RUNNING, queued=1), "running", "running", False, "running"),
        (JobStats("j", JobState.RUNNING, leased=1), "running", "running", False, "running"),
        (JobStats("j", JobState.RUNNING, done=9), "finished", "running", True, "finished"),
        (JobStats("j", JobState.PAUSED, queued=2), "paused", "paused", False, "paused"),
        (
            JobStats("j", JobState.PAUSED, done=9),
            "paused",
            "paused",
            True,
            "paused (finished)",
        ),
        (JobStats("j", JobState.CANCELLED, queued=5), "cancelled", "cancelled", True, "cancelled"),
        (
            JobStats("j", JobState.CANCELLED, queued=5, leased=1),
            "cancelled",
            "cancelled",
            False,
            "cancelled (leases in flight)",
        ),
    ],
)
def test_state_fields__never_running_beside_finished(
    stats: JobStats, state: str, job_state: str, finished: bool, progress: str
) -> None:
    got = state_fields(stats)
    assert got == {
        "state": state,
        "job_state": job_state,
        "finished": finished,
        "progress": progress,
    }
    assert not (got["finished"] and got["state"] == "running")
