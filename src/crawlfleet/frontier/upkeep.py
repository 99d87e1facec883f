"""When a store's tables need an ANALYZE or a VACUUM: a pure decision over their counters.

PostgreSQL plans the lease from its statistics. After a bulk intake (ten million seeds, say) a
table whose statistics say it is small or empty gets plans that scan and sort every queued row
of the job (measured: 58 ms a lease at 10,000,000 queued instead of 7). Autovacuum would analyze
it within a minute or so, but a server may run without autovacuum (some CI and managed setups
turn it off), and then nothing ever analyzes or vacuums the queue: every lease and completion
leaves a dead row version behind, and the hot small tables (``domains``, ``lanes``: updated at
every lease) bloat first. So the store looks after its own tables (``Frontier.maintain``):

* ANALYZE a table whose rows changed by more than :data:`ANALYZE_SHARE` of what the planner
  believes it holds (and at least :data:`ANALYZE_MIN` rows), or that was never analyzed; always,
  autovacuum or not (an ANALYZE samples a bounded number of rows: ~0.2 s at 10,000,000);
* VACUUM a table with more than :data:`VACUUM_MIN` dead rows and :data:`VACUUM_SHARE` of its live
  ones, only where autovacuum does not run for it (the store's own tuning of autovacuum for
  ``requests`` is in migration 0016).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "ANALYZE_MIN",
    "ANALYZE_SHARE",
    "UPKEEP_EVERY",
    "VACUUM_MIN",
    "VACUUM_SHARE",
    "TableHealth",
    "actions",
]

ANALYZE_MIN: Final = 1_000
ANALYZE_SHARE: Final = 0.1
VACUUM_MIN: Final = 1_000
VACUUM_SHARE: Final = 0.05
#: seconds between two upkeeps: a worker's schedule, and the most often a store runs one
UPKEEP_EVERY: Final = 10.0

Action = Literal["analyze", "vacuum"]


@dataclass(frozen=True, slots=True)
class TableHealth:
    """One table's counters, as ``pg_stat_user_tables`` and ``pg_class`` give them."""

    name: str
    live: int  # n_live_tup
    dead: int  # n_dead_tup
    changed: int  # n_mod_since_analyze: rows inserted, updated or deleted since its last ANALYZE
    planned: float  # reltuples: the rows the planner believes it holds (-1: never analyzed)
    autovacuum: bool  # whether autovacuum runs for this table (server setting and reloptions)


def actions(tables: list[TableHealth]) -> list[tuple[Action, str]]:
    """What to run, in the order given: ``("vacuum", table)`` (a ``VACUUM (ANALYZE)``, which
    analyzes too) or ``("analyze", table)``; nothing for a table in good shape."""
    out: list[tuple[Action, str]] = []
    for t in tables:
        if not t.autovacuum and t.dead >= VACUUM_MIN and t.dead >= VACUUM_SHARE * t.live:
            out.append(("vacuum", t.name))
        elif t.changed >= ANALYZE_MIN and (t.planned < 0 or t.changed >= ANALYZE_SHARE * t.planned):
            out.append(("analyze", t.name))
    return out
