"""Escalation by route tier: a domain that keeps getting blocked on a tier moves to the next one.

Pools are ordered in tiers, cheap first (``tier = 0`` direct, 1 datacenter, 2 residential, as
configured). A domain is crawled on one tier at a time; :func:`update` folds each attempt's
result on that tier into a decayed block rate, and

* moves the domain **up** a tier when, over about ``window`` seconds, at least ``min_attempts``
  attempts were made and ``up_rate`` or more of them were blocks (a higher tier must exist);
* **probes back down** a tier after ``probe_after`` seconds on a higher tier without the
  lower one being tried, to save cost: if the lower tier still blocks, the same rule moves the
  domain up again, and the next probe waits twice as long (up to ``probe_cap``).

Pure, with the clock passed in; the state is a frozen dataclass of JSON scalars the store keeps
per domain. Every move is returned to the caller, which emits it as an event.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

__all__ = ["EscalationConfig", "EscalationState", "Move", "update"]


@dataclass(frozen=True, slots=True)
class EscalationConfig:
    window: float = 60.0  # half-life of the counts behind the block rate (seconds)
    min_attempts: float = 10.0
    up_rate: float = 0.5
    probe_after: float = 600.0
    probe_cap: float = 86400.0


DEFAULT_ESCALATION: Final = EscalationConfig()


@dataclass(frozen=True, slots=True)
class EscalationState:
    tier: int = 0
    since: float = 0.0  # when the domain came to this tier
    updated_at: float = 0.0
    attempts: float = 0.0
    blocks: float = 0.0
    probes: int = 0  # failed probes down in a row (each doubles the wait before the next)
    probed: bool = False  # this tier was reached by a probe down, not yet proven good


@dataclass(frozen=True, slots=True)
class Move:
    """A change of tier: ``up`` after blocks, or a probe back down."""

    from_tier: int
    to_tier: int
    why: str


def _decay(now: float, then: float, config: EscalationConfig) -> float:
    return 1.0 if now <= then else math.exp2(-(now - then) / config.window)


def update(
    state: EscalationState,
    tiers: Sequence[int],
    *,
    now: float,
    blocked: bool,
    tier: int,
    config: EscalationConfig = DEFAULT_ESCALATION,
) -> tuple[EscalationState, Move | None]:
    """The domain's escalation after one attempt on ``tier`` (``blocked``: it was a block).

    ``tiers`` are the tiers the domain has lanes on. Results of another tier than the current
    one (requests in flight when it moved) are ignored.
    """
    ordered = sorted(set(tiers))
    if tier != state.tier or len(ordered) < 2:
        return state, None
    k = _decay(now, state.updated_at, config)
    state = replace(
        state,
        updated_at=max(now, state.updated_at),
        attempts=state.attempts * k + 1,
        blocks=state.blocks * k + blocked,
    )
    higher = [t for t in ordered if t > state.tier]
    lower = [t for t in ordered if t < state.tier]
    enough = state.attempts >= config.min_attempts
    if higher and enough and state.blocks >= config.up_rate * state.attempts:
        # a probe down that failed makes the next one wait longer
        probes = state.probes + 1 if state.probed else state.probes
        moved = EscalationState(tier=higher[0], since=now, updated_at=now, probes=probes)
        rate = state.blocks / state.attempts
        return moved, Move(state.tier, higher[0], f"{rate:.0%} blocked on tier {state.tier}")
    if state.probed and enough:  # the probe held: the tier is good again
        state = replace(state, probed=False, probes=0)
    wait = min(config.probe_cap, config.probe_after * math.exp2(min(state.probes, 64)))
    if lower and not blocked and now - state.since >= wait:
        moved = EscalationState(
            tier=lower[-1], since=now, updated_at=now, probes=state.probes, probed=True
        )
        return moved, Move(state.tier, lower[-1], f"probing tier {lower[-1]} after {wait:.0f}s")
    return state, None
