"""The knobs of the pacing controller (:mod:`crawlfleet.policy.pacing`), checked.

``[pacing]`` in crawlfleet.toml sets any field but ``min_delay`` and ``max_concurrency``, which
come from the lane's limits (``domain_rate``, ``domain_concurrency``, a Crawl-delay). The
comments say what each does; the module docstring of ``pacing`` says how they fit together.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PacingConfig"]


@dataclass(frozen=True)
class PacingConfig:
    """Bounds and rates of adaptation; the defaults suit most sites (``[pacing]`` in
    crawlfleet.toml sets any field but ``min_delay`` and ``max_concurrency``, which come from the
    lane's limits). Raises ``ValueError`` for values outside their range."""

    min_delay: float = 0.0
    max_delay: float = 60.0
    max_concurrency: int = 8
    min_concurrency: int = 1
    start_concurrency: int = 4
    crawl_delay_cap: float = 30.0
    # Push-back share among recent responses (EWMA over pushback_window responses) that slows
    # the lane down: delay x slowdown_factor, concurrency x window_factor.
    pushback_window: int = 25
    pushback_share: float = 0.25
    slowdown_factor: float = 2.0
    window_factor: float = 0.75
    # A slow-down with no healthy rate to start from: delay at least this, times slowdown_factor.
    slowdown_floor: float = 0.25
    # Latency: typical (a running median, moving by latency_step in log terms a response)
    # against the baseline (the lowest, measured again every probe_every seconds while
    # latency steers the pace).
    # Load: typical above latency_ratio x baseline, the excess (x the healthy rate) showing
    # more than queue_high requests waiting.
    latency_step: float = 0.1
    probe_every: float = 10.0
    latency_ratio: float = 1.5
    queue_high: float = 1.0
    # Load seen: the rate goes to latency_backoff of the healthy rate, once per round trip.
    latency_backoff: float = 0.9
    # Recovery per second while healthy: delay x recover_factor; concurrency doubles every
    # recover_every seconds. A delay within snap of the floor snaps to it. Every 0.25 s, eight
    # fresh lanes of one domain on a site answering in 5 ms sent 40-60 requests each in their
    # first half second, and every one on the wire when the first 429 came back earned
    # another (43-108 of 2,900 requests, routes walled by captchas); at 0.5 s, 16-48, none.
    recover_factor: float = 0.5
    recover_every: float = 0.5
    snap: float = 0.001
    retry_after_cap: float = 3600.0
    # Host circuit: after circuit_threshold failures in a row (no response, or 5xx) the host is
    # closed for circuit_base seconds, doubling with each further opening, up to circuit_cap,
    # and reopened with one request in flight.
    circuit_threshold: int = 5
    circuit_base: float = 30.0
    circuit_cap: float = 3600.0
    # Route breaker (a proxy that refuses or fails): open for breaker_cooldown seconds before
    # one probe request, the cool-down doubling per failed probe up to breaker_cooldown_cap.
    breaker_cooldown: float = 30.0
    breaker_cooldown_cap: float = 3600.0
    # The ceiling a 429 teaches: the healthy rate over rate_window seconds before it; the lane
    # resumes at limit_fraction of it, probes upward by probe a second but at most probe_step
    # a response (so a probe cycle is ~400 requests at the least), forgets it after
    # limit_hold seconds without a 429.
    limit_fraction: float = 0.85
    probe: float = 0.02
    probe_step: float = 0.0004
    limit_hold: float = 600.0
    rate_window: float = 1.0
    # How far ahead the store hands out start slots (its lease horizon): answers to requests
    # leased before a change may keep coming that long after it, and are no news about it.
    # Slots leased ahead hold the domain's in-flight places: at 2 s, a lane paced at 30/s
    # held 60 of them, and the other lanes of its domain (other routes) waited; at 0.5 s,
    # eight lanes at 25/s each held 100 slots of a domain allowing 64, and the domain's cap,
    # not its routes, set the pace (115 requests/s of the 240 allowed; 185 at 0.15 s). Above
    # the worker's idle lease cadence (0.15 s), so that a slot is leased before it is due.
    lease_horizon: float = 0.2

    def __post_init__(self) -> None:
        checks = {
            "limit_fraction must be in (0, 1]": 0 < self.limit_fraction <= 1,
            "pushback_share must be in (0, 1)": 0 < self.pushback_share < 1,
            "recover_factor must be in (0, 1)": 0 < self.recover_factor < 1,
            "window_factor must be in (0, 1]": 0 < self.window_factor <= 1,
            "latency_backoff must be in (0, 1)": 0 < self.latency_backoff < 1,
            "latency_step must be in (0, 1]": 0 < self.latency_step <= 1,
            "slowdown_factor must be >= 1": self.slowdown_factor >= 1,
            "latency_ratio must be > 1": self.latency_ratio > 1,
            "min_concurrency must be between 1 and max_concurrency": (
                1 <= self.min_concurrency <= self.max_concurrency
            ),
            "windows and times must be > 0": min(
                self.rate_window,
                self.recover_every,
                self.probe_every,
                self.pushback_window,
                self.max_delay,
                self.lease_horizon,
                self.breaker_cooldown,
            )
            > 0,
            "breaker_cooldown_cap must be >= breaker_cooldown": (
                self.breaker_cooldown_cap >= self.breaker_cooldown
            ),
            "probe, probe_step, snap, queue_high, slowdown_floor must be >= 0": min(
                self.probe, self.probe_step, self.snap, self.queue_high, self.slowdown_floor
            )
            >= 0,
        }
        failed = [why for why, ok in checks.items() if not ok]
        if failed:
            raise ValueError("; ".join(failed))
