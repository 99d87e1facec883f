"""Escalation by tier: up on blocks, probes back down after a while, backing off when they fail."""

from __future__ import annotations

from crawlfleet.policy.escalation import EscalationConfig, EscalationState, update

CONFIG = EscalationConfig(window=60, min_attempts=10, up_rate=0.5, probe_after=600)
TIERS = (0, 1, 2)


def run(state: EscalationState, now: float, n: int, blocked: bool) -> tuple[EscalationState, list]:
    moves = []
    for _ in range(n):
        state, move = update(state, TIERS, now=now, blocked=blocked, tier=state.tier,
                             config=CONFIG)  # fmt: skip
        if move:
            moves.append(move)
    return state, moves


def test_healthy_tier__stays() -> None:
    state, moves = run(EscalationState(), 1000, 50, blocked=False)
    assert (state.tier, moves) == (0, [])


def test_blocked_tier__moves_up_one_tier_once_enough_attempts_say_so() -> None:
    state, moves = run(EscalationState(), 1000, 9, blocked=True)
    assert state.tier == 0, "nine attempts are too few to judge"
    state, moves = run(state, 1000, 1, blocked=True)
    assert state.tier == 1 and [(m.from_tier, m.to_tier) for m in moves] == [(0, 1)]
    assert "blocked on tier 0" in moves[0].why


def test_a_few_blocks_among_many_successes__no_move() -> None:
    state = EscalationState()
    for i in range(100):
        state, move = update(state, TIERS, now=1000 + i, blocked=i % 4 == 0, tier=state.tier,
                             config=CONFIG)  # fmt: skip
        assert move is None


def test_probe_down__after_probe_after_then_back_up_and_the_next_wait_doubles() -> None:
    state, _ = run(EscalationState(), 1000, 10, blocked=True)
    assert state.tier == 1
    state, moves = run(state, 1000 + 599, 1, blocked=False)
    assert moves == [] and state.tier == 1
    state, moves = run(state, 1000 + 601, 1, blocked=False)
    assert state.tier == 0 and state.probed and moves[0].why.startswith("probing tier 0")
    state, moves = run(state, 1700, 10, blocked=True)  # still blocked below: back up
    assert state.tier == 1 and state.probes == 1
    state, moves = run(state, 1700 + 700, 1, blocked=False)
    assert state.tier == 1, "the second probe waits 1200 s"
    state, moves = run(state, 1700 + 1300, 1, blocked=False)
    assert state.tier == 0


def test_results_of_another_tier_are_ignored_and_one_tier_never_moves() -> None:
    state = EscalationState(tier=1, since=1000)
    same, move = update(state, TIERS, now=1001, blocked=True, tier=0, config=CONFIG)
    assert (same, move) == (state, None)
    alone, move = update(EscalationState(), (0,), now=1, blocked=True, tier=0, config=CONFIG)
    assert move is None and alone.tier == 0
