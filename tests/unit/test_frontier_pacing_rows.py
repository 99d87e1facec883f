"""A lane's pacing as the store keeps it: four columns and one JSON document, read back as the
state that was written; a document of another version reads with a new lane's defaults."""

from __future__ import annotations

import json
from dataclasses import replace

from crawlfleet.frontier.pacing import state_from_row, write_values
from crawlfleet.policy.pacing import PacingConfig, initial


def row(state_values: tuple[object, ...], document: str) -> tuple[object, ...]:
    delay, concurrency, blocked_until, _ = state_values
    return (
        "shop.test",
        "direct",
        64,
        0.0,
        3,
        12.5,
        delay,
        concurrency,
        blocked_until,
        0.5,
        document,
    )


def test_a_written_state_reads_back_as_it_was() -> None:
    state = replace(
        initial(PacingConfig()), delay=0.25, concurrency=7, ewma_latency=0.02, share=0.1, floor=0.5
    )
    values = write_values(state)
    lane = state_from_row(row(values, str(values[3])))
    assert lane.pacing == state
    assert (lane.domain, lane.route, lane.max_in_flight, lane.in_flight) == (
        "shop.test",
        "direct",
        64,
        3,
    )


def test_a_document_of_another_version_reads_with_new_lane_defaults() -> None:
    config = PacingConfig()
    values = write_values(initial(config))
    document = json.loads(str(values[3]))
    del document["burst_rate"]  # written before the field existed
    document["retired_knob"] = 1.0  # a field this version no longer knows
    lane = state_from_row(row(values, json.dumps(document)), config)
    assert lane.pacing.burst_rate == initial(config).burst_rate
    assert not hasattr(lane.pacing, "retired_knob")
    assert state_from_row(row(values, ""), config).pacing.window == initial(config).window
