from __future__ import annotations

import pytest

from crawlfleet.frontier import upkeep
from crawlfleet.frontier.upkeep import TableHealth, actions


def table(
    live: int = 100_000,
    dead: int = 0,
    changed: int = 0,
    planned: float = 100_000,
    autovacuum: bool = True,
) -> TableHealth:
    return TableHealth("requests", live, dead, changed, planned, autovacuum)


@pytest.mark.parametrize(
    ("health", "expected"),
    [
        (table(), []),  # fresh statistics, no dead rows
        (table(live=0, changed=999, planned=-1), []),  # a few seeds: nothing to plan for
        (table(live=3_000, changed=3_000, planned=-1), ["analyze"]),  # never analyzed
        (table(changed=9_999), []),  # under a tenth of what the planner knows
        (table(changed=10_000), ["analyze"]),
        # ten million seeds into a table analyzed when it held a thousand rows
        (table(live=10_000_000, changed=10_000_000, planned=1_000), ["analyze"]),
        # dead rows: left to autovacuum where it runs, vacuumed (and analyzed) where not
        (table(dead=50_000, changed=50_000), ["analyze"]),
        (table(dead=50_000, changed=50_000, autovacuum=False), ["vacuum"]),
        (table(dead=4_999, autovacuum=False), []),  # under 5% of the live rows
        (table(live=1_000, dead=999, planned=1_000, autovacuum=False), []),  # under the floor
        # a small hot table (lanes, domains): a thousand rows, tens of thousands of dead ones
        (table(1_000, dead=30_000, changed=32_000, planned=1_000, autovacuum=False), ["vacuum"]),
    ],
)
def test_actions(health: TableHealth, expected: list[str]) -> None:
    assert [action for action, _ in actions([health])] == expected


def test_actions__name_the_table_in_the_order_given() -> None:
    tables = [
        TableHealth("domains", 1_000, 30_000, 30_000, 1_000, False),
        TableHealth("jobs", 3, 0, 3, 3, False),
        TableHealth("requests", 0, 0, 5_000, -1, False),
    ]
    assert actions(tables) == [("vacuum", "domains"), ("analyze", "requests")]


def test_upkeep__runs_as_often_and_with_the_thresholds_the_readme_says() -> None:
    # README, "Store upkeep": every 10 s; ANALYZE past a tenth changed; VACUUM past 5% dead
    assert upkeep.UPKEEP_EVERY == 10.0
    assert (upkeep.ANALYZE_SHARE, upkeep.VACUUM_SHARE) == (0.1, 0.05)
    assert (upkeep.ANALYZE_MIN, upkeep.VACUUM_MIN) == (1_000, 1_000)
