"""What the demo shop can do wrong on purpose: the fault switches and the machinery of the
stateful ones (per-client rate limit and captcha rule, latency that grows with load).

* :class:`Faults`: the switches, set from the command line or ``POST /__admin/faults``.
* :class:`ClientLimits`: a client address may have at most ``rate_limit`` requests *accepted*
  within any sliding second (a log of accepted times per address; a refused request does not
  count, as with a leaky bucket). Beyond it: 429 with ``Retry-After`` (whole seconds until a
  slot frees). A client refused more than ``captcha_after`` times within ``captcha_window``
  seconds keeps pushing: it gets status-200 captcha pages for ``captcha_for`` seconds,
  whatever it asks.
* :class:`Load`: the server's requests in flight, and the latency they cost: ``latency +
  latency_per_request * in flight`` (this request included), so alone a request takes
  ``latency + latency_per_request``.

The clock is passed in; nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ClientLimits", "Faults", "Load", "Verdict", "selected"]

Verdict = tuple[Literal["ok", "limited", "captcha"], int]


@dataclass
class Faults:
    """Fault switches, all off by default. Fractions apply to product pages, chosen by URL hash.

    * ``transient_503``: these answer 503 to their first ``transient_attempts`` requests.
    * ``slow``: these answer after ``slow_delay`` seconds, every time.
    * ``cut``: the first ``transient_attempts`` requests get half the body, then the connection
      is closed.
    * ``captcha``: the first ``transient_attempts`` requests get a status-200 captcha page.
    * ``rate_limit``: a client address may have N requests accepted within any sliding second;
      beyond, 429 with ``Retry-After`` (see :mod:`crawlfleet.demo.limits`).
    * ``captcha_after``: a client refused more than this many times within ``captcha_window``
      seconds gets status-200 captcha pages for ``captcha_for`` seconds (None: never).
    * ``latency`` / ``latency_per_request``: every page takes ``latency + latency_per_request x
      requests in flight`` (this one included) seconds: a server that slows down with load.
    * ``captcha_clients``: client addresses answered with status-200 captcha pages, whatever
      they ask (robots.txt aside): a route the site has flagged.
    * ``session_cookie``: the shop sets a ``shopsid`` cookie on every request without one, and
      logs per request the client address, the cookie it sent and the one it was given.
    * ``captcha_sessions``: ``shopsid`` values answered with captcha pages: an identity the site
      has flagged (the route is fine, the session is not).
    * ``trap``: every page links an endless ``/calendar/YYYY/MM`` archive.
    * ``always_500``: paths answering 500 until ``POST /__admin/fix``.
    * ``robots_503``: robots.txt answers 503 until ``POST /__admin/robots-ok``.
    """

    transient_503: float = 0.0
    slow: float = 0.0
    slow_delay: float = 1.0
    cut: float = 0.0
    captcha: float = 0.0
    transient_attempts: int = 1
    rate_limit: int | None = None
    captcha_after: int | None = None
    captcha_window: float = 10.0
    captcha_for: float = 60.0
    latency: float = 0.0
    latency_per_request: float = 0.0
    captcha_clients: list[str] = field(default_factory=list)
    session_cookie: bool = False
    captcha_sessions: list[str] = field(default_factory=list)
    trap: bool = False
    always_500: list[str] = field(default_factory=list)
    robots_503: bool = False

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``changes`` (field name → value); unknown names raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise ValueError(f"unknown fault switches: {sorted(unknown)}")
        for name, value in changes.items():
            setattr(self, name, list(value) if name in _LISTS else value)


_LISTS = frozenset({"always_500", "captcha_clients", "captcha_sessions"})


def selected(kind: str, key: str, fraction: float) -> bool:
    """True if page ``key`` is in the deterministic ``fraction`` of pages hit by fault ``kind``."""
    if fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{kind}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


@dataclass
class _Client:
    accepted: deque[float] = field(default_factory=deque)
    refused: deque[float] = field(default_factory=deque)
    captcha_until: float = 0.0
    peak: int = 0  # most requests accepted within one sliding second
    rate_limited: int = 0
    captchas: int = 0


@dataclass
class ClientLimits:
    """Per-address sliding-window rate limit and captcha rule; see the module docstring."""

    clients: dict[str, _Client] = field(default_factory=dict)

    def check(
        self,
        client: str,
        now: float,
        limit: int | None,
        captcha_after: int | None = None,
        captcha_window: float = 10.0,
        captcha_for: float = 60.0,
    ) -> Verdict:
        """``("ok", 0)``, ``("limited", retry_after_seconds)`` or ``("captcha", 0)`` for one
        request of ``client`` at ``now`` (``limit`` None: no limit, no captcha rule)."""
        c = self.clients.setdefault(client, _Client())
        if now < c.captcha_until:
            c.captchas += 1
            return "captcha", 0
        if limit is None:
            return "ok", 0
        while c.accepted and c.accepted[0] <= now - 1.0:
            c.accepted.popleft()
        if len(c.accepted) < limit:
            c.accepted.append(now)
            c.peak = max(c.peak, len(c.accepted))
            return "ok", 0
        c.rate_limited += 1
        c.refused.append(now)
        while c.refused and c.refused[0] <= now - captcha_window:
            c.refused.popleft()
        if captcha_after is not None and len(c.refused) > captcha_after:
            c.captcha_until = now + captcha_for
        retry_after = max(1, math.ceil(c.accepted[0] + 1.0 - now)) if c.accepted else 1
        return "limited", retry_after

    def as_json(self) -> dict[str, dict[str, int]]:
        """Per address: the most requests accepted in one sliding second, 429s, captchas."""
        return {
            addr: {
                "max_accepted_per_second": c.peak,
                "rate_limited": c.rate_limited,
                "captchas": c.captchas,
            }
            for addr, c in self.clients.items()
        }


@dataclass
class Load:
    """Requests in flight at the server and what they cost in latency."""

    in_flight: int = 0
    peak: int = 0
    at_arrival: Counter[int] = field(default_factory=Counter)

    def enter(self, base: float, per_request: float) -> float:
        """One request arrives: the seconds it should take (0 when the mode is off)."""
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if not base and not per_request:
            return 0.0
        self.at_arrival[self.in_flight] += 1
        return base + per_request * self.in_flight

    def leave(self) -> None:
        self.in_flight -= 1

    def as_json(self, base: float, per_request: float) -> dict[str, Any]:
        """In flight at arrival (a histogram), the peak, and the latency they cost: median and
        the unloaded value (alone)."""
        out: dict[str, Any] = {
            "in_flight_at_arrival": {str(n): k for n, k in sorted(self.at_arrival.items())},
            "max_in_flight": self.peak,
        }
        total = sum(self.at_arrival.values())
        if total:
            half, seen = (total + 1) // 2, 0
            for n, k in sorted(self.at_arrival.items()):
                seen += k
                if seen >= half:
                    out["median_latency"] = base + per_request * n
                    break
            out["unloaded_latency"] = base + per_request
        return out
