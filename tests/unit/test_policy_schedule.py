"""Schedules: --every and --cron timings and the next due time after a moment."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from crawlfleet.policy.schedule import Timing, next_due, parse_timing


def at(text: str) -> float:
    """Epoch seconds of an ISO time (UTC unless it names an offset)."""
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


ANCHOR = at("2024-05-01T09:10:00")


@pytest.mark.parametrize(
    ("after", "due"),
    [
        (at("2024-05-01T08:00:00"), at("2024-05-01T09:10:00")),  # before the anchor: the anchor
        (at("2024-05-01T09:10:00"), at("2024-05-01T15:10:00")),  # strictly after
        (at("2024-05-01T15:09:59"), at("2024-05-01T15:10:00")),
        (at("2024-05-01T15:10:00"), at("2024-05-01T21:10:00")),
        (at("2024-05-03T00:00:00"), at("2024-05-03T03:10:00")),  # down a day: one run, on time
    ],
)
def test_every_keeps_its_times_of_day(after: float, due: float) -> None:
    timing = parse_timing(every="6h", anchor=ANCHOR)
    assert next_due(timing, after) == due


@pytest.mark.parametrize(
    ("cron", "tz", "after", "due"),
    [
        ("0 6 * * *", "UTC", "2024-05-01T05:59:00", "2024-05-01T06:00:00+00:00"),
        ("0 6 * * *", "UTC", "2024-05-01T06:00:00", "2024-05-02T06:00:00+00:00"),
        ("*/15 * * * *", "UTC", "2024-05-01T06:01:00", "2024-05-01T06:15:00+00:00"),
        ("0 6 * * mon-fri", "UTC", "2024-05-03T07:00:00", "2024-05-06T06:00:00+00:00"),
        # 06:00 in Paris is 04:00 UTC in summer ...
        ("0 6 * * *", "Europe/Paris", "2024-05-01T00:00:00", "2024-05-01T06:00:00+02:00"),
        # ... and 05:00 UTC in winter
        ("0 6 * * *", "Europe/Paris", "2024-01-10T00:00:00", "2024-01-10T06:00:00+01:00"),
    ],
)
def test_cron(cron: str, tz: str, after: str, due: str) -> None:
    timing = parse_timing(cron=cron, tz=tz)
    assert next_due(timing, at(after)) == datetime.fromisoformat(due).timestamp()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "one of them"),
        ({"every": "6h", "cron": "0 6 * * *"}, "one of them"),
        ({"every": "soon"}, "not a duration"),
        ({"every": "30s"}, "shortest interval"),
        ({"cron": "0 6 * *"}, "five fields"),
        ({"cron": "61 6 * * *"}, "five fields"),
        ({"cron": "0 0 6 * * *"}, "five fields"),  # seconds are not a field here
        ({"every": "1h", "tz": "Mars/Olympus"}, "unknown time zone"),
    ],
)
def test_bad_timings_are_one_line(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_timing(**kwargs)


@pytest.mark.parametrize(
    ("timing", "text"),
    [
        (Timing(every=21_600.0), "every 6h"),
        (Timing(every=90.0), "every 90s"),
        (Timing(every=86_400.0 * 2), "every 2d"),
        (Timing(cron="0 6 * * *"), 'cron "0 6 * * *"'),
        (Timing(cron="0 6 * * *", tz="Europe/Paris"), 'cron "0 6 * * *" (Europe/Paris)'),
    ],
)
def test_describe(timing: Timing, text: str) -> None:
    assert timing.describe() == text
